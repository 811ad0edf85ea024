package e2e

import (
	"context"
	"testing"
	"time"

	"github.com/toolmesh/toolmesh/e2e/loadfaults"
)

// TestLoadFaults is the five-second variant of `make load` (package
// loadfaults): 8 clients in both eras through `toolmesh run` while svc-a
// restarts twice, svc-b gains and loses a tool and the Portal file is
// rewritten twice. No answer may be wrong, none may lack an HTTP answer,
// none may be the catch-all 404 (a call routed before Envoy had its
// Tool Service's route reads as "unavailable": xds/routes.go
// cluster_pending), and "unavailable" may only come around a restart or
// Portal change.
func TestLoadFaults(t *testing.T) {
	var progress syncBuffer
	rep, err := loadfaults.Run(context.Background(), loadfaults.Config{
		Toolmesh: toolmeshBin, Duration: 5 * time.Second, Clients: 8, Seed: 1, Progress: &progress,
	})
	if err != nil {
		t.Fatalf("loadfaults.Run: %v\n%s", err, progress.String())
	}
	t.Logf("%s%s", progress.String(), rep)
	for _, k := range []string{loadfaults.KindWrong, loadfaults.KindTransport, loadfaults.KindStrayUnavailable, loadfaults.KindNotRouted} {
		if n := rep.Kinds[k]; n != 0 {
			t.Errorf("%d answers of kind %s, want 0: %q", n, k, rep.Examples)
		}
	}
	if rep.Restarts < 2 || rep.PortalChanges < 2 || rep.ToolChanges < 2 {
		t.Errorf("faults injected: %d restarts, %d portal changes, %d tool changes; want at least 2 each", rep.Restarts, rep.PortalChanges, rep.ToolChanges)
	}
	// Each fault is seen by the clients: a restart as "unavailable" (or
	// nothing, if no call was in flight), a Portal change as gamma's 404
	// or c_* tools unknown in one version and answered in the other.
	if rep.Kinds[loadfaults.KindOK] < 50 || rep.Kinds[loadfaults.KindNoRoute] == 0 || rep.Kinds[loadfaults.KindUnknownTool] == 0 {
		t.Errorf("the run did not exercise both Portal versions: %v", rep.Kinds)
	}
}
