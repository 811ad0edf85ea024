package embed

import (
	"math"
	"testing"
)

// FuzzDecode: any body either fails or gives n unit vectors of one length.
func FuzzDecode(f *testing.F) {
	f.Add([]byte(`{"data":[{"index":1,"embedding":[0,2]},{"index":0,"embedding":[3,4]}]}`), 2)
	f.Add([]byte(`{"object":"list","data":[{"object":"embedding","embedding":[0.1,-0.2,0.3],"index":0}],"model":"m","usage":{"prompt_tokens":3,"total_tokens":3}}`), 1)
	f.Add([]byte(`{"data":[{"embedding":[1e308,1e308]}]}`), 1)
	f.Add([]byte(`{"data":[{"index":-1,"embedding":[1]}]}`), 1)
	f.Add([]byte(`{"error":{"message":"model not found"}}`), 1)
	f.Add([]byte(`{"data":null}`), 0)
	f.Fuzz(func(t *testing.T, body []byte, n int) {
		if n < 0 || n > 64 {
			return
		}
		vs, err := Decode(body, n)
		if err != nil {
			return
		}
		if len(vs) != n {
			t.Fatalf("%d vectors for %d inputs", len(vs), n)
		}
		for i, v := range vs {
			if len(v) == 0 || len(v) != len(vs[0]) {
				t.Fatalf("vector %d has %d values", i, len(v))
			}
			if l := Dot(v, v); math.IsNaN(l) || math.Abs(l-1) > 1e-3 {
				t.Fatalf("vector %d has length² %v", i, l)
			}
		}
	})
}
