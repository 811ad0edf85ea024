package extproc

import "github.com/toolmesh/toolmesh/extproc/reqheaders"

// droppedClientHeaders returns the client's request headers that service
// (of the request's snapshot) does not accept: the allow-list of
// reqheaders.Dropped.
func (x *request) droppedClientHeaders(service string) []string {
	return reqheaders.Dropped(x.headers, x.snap, service)
}
