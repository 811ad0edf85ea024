package registry

import "time"

// ServiceStatus is one Tool Service's line in a route's health detail. The
// counts are what the route's current snapshot serves from the service
// (tools: active, unambiguous ones); the protocol fields come from the
// listing that snapshot was built from.
type ServiceStatus struct {
	Name     string `json:"name"`
	Protocol string `json:"protocol"` // "toolservice" or "mcp"
	// Era ("stateless" or "legacy"), ProtocolVersion and Server (name and
	// version as the server reported them) of an MCP server.
	Era               string `json:"era,omitempty"`
	ProtocolVersion   string `json:"protocolVersion,omitempty"`
	Server            string `json:"server,omitempty"`
	Tools             int    `json:"tools"`
	Resources         int    `json:"resources,omitempty"`
	ResourceTemplates int    `json:"resourceTemplates,omitempty"`
	Prompts           int    `json:"prompts,omitempty"`
	// LastError is the service's latest fetch or listing failure, cleared
	// by the next success; the route keeps serving its last good entries.
	LastError   string     `json:"lastError,omitempty"`
	LastErrorAt *time.Time `json:"lastErrorAt,omitempty"`
	// ListedAt is this process's last successful listing of an MCP server;
	// FreshUntil is when it lists it again (absent: at the next cycle).
	ListedAt   *time.Time `json:"listedAt,omitempty"`
	FreshUntil *time.Time `json:"freshUntil,omitempty"`
	CacheScope string     `json:"cacheScope,omitempty"`
}

// ServiceLines builds the service lines of route rt from its snapshot snap
// (nil when it has none): what the snapshot serves from each service. The
// refresher adds each service's fetch fields (LastError, ListedAt, ...).
func ServiceLines(rt Route, snap *Snapshot) []ServiceStatus {
	out := make([]ServiceStatus, 0, len(rt.ToolServices))
	for _, svc := range rt.ToolServices {
		st := ServiceStatus{Name: svc.Name, Protocol: svc.ProtocolName()}
		if snap != nil {
			for _, t := range snap.Tools {
				if t.Service == svc.Name {
					st.Tools++
				}
			}
			st.Resources = countItems(snap.Resources, svc.Name)
			st.ResourceTemplates = countItems(snap.ResourceTemplates, svc.Name)
			st.Prompts = countItems(snap.Prompts, svc.Name)
			if m := snap.manifests[svc.Name]; m != nil && m.MCP != nil {
				st.Era = m.MCP.Era().String()
				st.ProtocolVersion = m.MCP.ProtocolVersion
				st.Server = m.MCP.ServerName
				if m.MCP.ServerVersion != "" {
					st.Server += " " + m.MCP.ServerVersion
				}
			}
		}
		out = append(out, st)
	}
	return out
}

func countItems(items []*FederatedItem, service string) int {
	n := 0
	for _, it := range items {
		if it.Service == service {
			n++
		}
	}
	return n
}
