package extproc

import (
	"encoding/json"
	"fmt"
	"strconv"
	"strings"
	"testing"

	extprocv3 "github.com/envoyproxy/go-control-plane/envoy/service/ext_proc/v3"

	"github.com/toolmesh/toolmesh/registry"
)

// searchCatalog builds a search-mode route of n tools whose names combine
// domains, objects and actions ("billing_invoice_create"), so that a
// request's words hit hundreds of tools each, as in a large real catalog.
func searchCatalog(b *testing.B, n int) *registry.Snapshot {
	b.Helper()
	domains := strings.Fields("billing crm hr support shop inventory shipping payments cloud iam ci monitoring drive mail calendar wiki analytics marketing accounting projects")
	objects := strings.Fields("invoice contact employee ticket order item shipment payment instance user build alert file message event page report campaign journal task customer account plan label comment")
	actions := strings.Fields("create get list update delete archive restore export import assign close approve cancel send search count merge copy move publish")
	route := registry.Route{Key: "core", Catalog: &registry.Catalog{Mode: registry.ModeSearch}}
	manifests := map[string]*registry.Manifest{}
	i := 0
	for _, d := range domains {
		m := &registry.Manifest{}
		manifests[d] = m
		route.ToolServices = append(route.ToolServices, registry.ToolService{Name: d, URL: "http://" + d + ".tools.svc:8080"})
		for _, o := range objects {
			for _, a := range actions {
				if i == n {
					break
				}
				i++
				m.Tools = append(m.Tools, registry.ManifestTool{
					Name:        d + "_" + o + "_" + a,
					Version:     "1.0.0",
					Description: fmt.Sprintf("%s a %s in %s. Returns the %s as JSON.", strings.ToUpper(a[:1])+a[1:], o, d, o),
					InputSchema: json.RawMessage(`{"type":"object","properties":{"` + o + `_id":{"type":"string","description":"ID of the ` + o + `."}}}`),
				})
			}
		}
	}
	if i < n {
		b.Fatalf("catalog vocabulary gives %d tools, want %d", i, n)
	}
	return buildSnapshot(b, route, manifests)
}

func searchSeq(query string) []*extprocv3.ProcessingRequest {
	body := `{"jsonrpc":"2.0","id":9,"method":"tools/call","params":{"name":"search_tools","arguments":{"query":` + strconv.Quote(query) + `}}}`
	return []*extprocv3.ProcessingRequest{
		reqHeaders(false, post("/mcp/core", len(body), "mcp-protocol-version", "2025-11-25")...),
		reqBody(body),
	}
}

// BenchmarkSearchTools10k is a search_tools call on a 10,000-tool route in
// search mode, answered by toolmesh on the request body: the ext_proc
// stream, parsing, ranking and encoding the shortlist. Compare it with
// BenchmarkEchoBaselineToolsList (the same two messages against a server
// that does nothing). Iterations cycle through a few requests, from one
// that matches a handful of tools to one whose words hit thousands.
func BenchmarkSearchTools10k(b *testing.B) {
	routes := testRoutes{"/mcp/core": {key: "core", snap: searchCatalog(b, 10_000)}}
	srv, err := New(Config{}, routes, nil, nil)
	if err != nil {
		b.Fatal(err)
	}
	client := serve(b, srv.GRPCServerOptions(), srv.Register)
	var seqs [][]*extprocv3.ProcessingRequest
	for _, q := range []string{
		"create an invoice in billing",
		"cancel the order 4242, the customer changed their mind",
		"list every open ticket assigned to me in support",
		"export all reports, campaigns and files from analytics, marketing and drive",
		"order a large pepperoni pizza",
	} {
		seqs = append(seqs, searchSeq(q))
	}
	isAnswer := func(r *extprocv3.ProcessingResponse) bool {
		return r.GetImmediateResponse().GetStatus().GetCode() == 200 &&
			strings.Contains(string(r.GetImmediateResponse().GetBody()), `"structuredContent"`)
	}
	runSequences(b, client, seqs, isAnswer)
}
