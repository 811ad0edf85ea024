package registry

import (
	"log/slog"
	"sync"

	"github.com/prometheus/client_golang/prometheus"
)

// maxUnknownFieldLabels bounds the field label of
// toolmesh_portal_unknown_fields_total: a Portal sending ever new field names
// cannot grow the series without limit; fields past the bound count as
// "other".
const maxUnknownFieldLabels = 64

// unknownFieldOther is the label of the fields past maxUnknownFieldLabels.
const unknownFieldOther = "other"

// NewUnknownFieldReporter returns a [ListingDecoder.OnUnknownField] that
// counts every unknown field of a decoded listing in
// toolmesh_portal_unknown_fields_total{field} (field: the path without
// indices, such as routes.toolServices.protocol) and logs a warning the
// first time this process meets each field, not on every refresh. reg may
// be nil (no metric); log may be nil (no warning).
func NewUnknownFieldReporter(log *slog.Logger, reg prometheus.Registerer) func(UnknownField) {
	counter := prometheus.NewCounterVec(prometheus.CounterOpts{
		Name: "toolmesh_portal_unknown_fields_total",
		Help: "Fields of Portal listings that this toolmesh does not know and ignored, by field path without indices.",
	}, []string{"field"})
	if reg != nil {
		reg.MustRegister(counter)
	}
	var mu sync.Mutex // decoding runs once per refresh, never on the request path
	seen := map[string]bool{}
	return func(u UnknownField) {
		mu.Lock()
		first := !seen[u.Field]
		label := u.Field
		if first && len(seen) >= maxUnknownFieldLabels {
			label, first = unknownFieldOther, !seen[unknownFieldOther]
			seen[unknownFieldOther] = true
		} else if first {
			seen[u.Field] = true
		}
		mu.Unlock()
		counter.WithLabelValues(label).Inc()
		if first && log != nil {
			log.Warn("portal listing has a field this toolmesh does not know; ignoring it (portalStrict rejects such listings)",
				slog.String("field", u.Field), slog.String("at", u.Path), slog.Int("line", u.Line), slog.Int("column", u.Column))
		}
	}
}
