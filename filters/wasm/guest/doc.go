// Package guest is the SDK for writing toolmesh WebAssembly filters in Go.
//
// A filter is a Go reactor module built by Go's own toolchain:
//
//	GOOS=wasip1 GOARCH=wasm go build -buildmode=c-shared -o policy.wasm .
//
// The package implements the guest side of the "mcpfilter/v1" ABI described
// in docs/wasm-abi.md: it exports abi_version, alloc, configure and filter,
// decodes the JSON envelope the host passes in, calls the author's function
// and encodes the returned decision. A panic in the author's function is
// recovered and reported to the host as a failed call, so the host applies
// the filter's fail-open or fail-closed policy instead of losing the
// instance.
//
// The author writes one function and registers it from init (main is never
// called in a reactor, but package main needs one):
//
//	package main
//
//	import "github.com/toolmesh/toolmesh/filters/wasm/guest"
//
//	func main() {}
//
//	func init() { guest.Handle(filter) }
//
//	func filter(req guest.Request) guest.Decision {
//		if req.Stage == guest.StageRequest && req.Tool == "drop_table" {
//			return guest.Deny("dropping tables is not allowed here")
//		}
//		return guest.Pass()
//	}
//
// The package builds for any target so a filter's logic can be unit-tested
// with plain `go test` on the host; only the exports need wasip1.
//
// The JSON helpers in this package (Request.Argument, Field, String, Quote)
// are deliberately small and allocation-light. Filters may use
// encoding/json too; it works inside the guest but makes every call slower
// and the module larger.
package guest
