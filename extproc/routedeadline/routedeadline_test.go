package routedeadline

import (
	"context"
	"testing"

	"google.golang.org/grpc/metadata"

	"github.com/toolmesh/toolmesh/internal/wire"
)

// TestListenerLevel: the level comes from the stream's incoming metadata;
// none, several or an unreadable value count as an older listener.
func TestListenerLevel(t *testing.T) {
	for _, tc := range []struct {
		md   metadata.MD
		want int
	}{
		{nil, 0},
		{metadata.Pairs(wire.ListenerLevelMetadata, "1"), 1},
		{metadata.Pairs(wire.ListenerLevelMetadata, "7"), 7},
		{metadata.Pairs(wire.ListenerLevelMetadata, "yes"), 0},
		{metadata.Pairs(wire.ListenerLevelMetadata, "-1"), 0},
		{metadata.Pairs(wire.ListenerLevelMetadata, "1", wire.ListenerLevelMetadata, "1"), 0},
	} {
		ctx := context.Background()
		if tc.md != nil {
			ctx = metadata.NewIncomingContext(ctx, tc.md)
		}
		if got := ListenerLevel(ctx); got != tc.want {
			t.Errorf("metadata %v: level %d, want %d", tc.md, got, tc.want)
		}
	}
}
