package refresher

import (
	"strings"
	"testing"

	"github.com/toolmesh/toolmesh/internal/refreshtest"
	"github.com/toolmesh/toolmesh/internal/registrytest"
)

func TestRegistryWarmStartSkipsForeignServices(t *testing.T) {
	first := newEnv(t)
	first.start(t)
	// The Portal now serves alpha from other Tool Services; the stored
	// alpha would route to a cluster that no longer exists.
	second := newEnv(t, func(o *Options) { o.Store = first.store })
	second.portal.Set(registrytest.ModeOK, second.listing(
		strings.Replace(second.alphaDef, `"name":"a"`, `"name":"a2"`, 1), second.betaDef))
	second.a.Set(registrytest.ModeFail, "")
	second.b.Set(registrytest.ModeFail, "")
	second.shared.Set(registrytest.ModeFail, "")
	second.start(t)
	if second.reg.Snapshot("alpha") != nil {
		t.Error("a stored snapshot of other tool services was served")
	}
	if st := refreshtest.RouteStatus(t, second.reg, "alpha"); !strings.Contains(st.StoreError, "no longer lists") {
		t.Errorf("alpha = %+v", st)
	}
	if second.reg.Snapshot("beta") == nil {
		t.Error("beta, unchanged, must warm-start")
	}
}
