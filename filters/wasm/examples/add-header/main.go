// Command add-header is an example toolmesh WebAssembly filter: it adds a
// header to every tools/call request sent to a Tool Service.
//
// Configuration (optional): {"name": "x-policy", "value": "wasm-example"}.
// The header name and value default to those shown.
//
// Build: GOOS=wasip1 GOARCH=wasm go build -buildmode=c-shared -o add-header.wasm .
package main

import (
	"errors"

	"github.com/toolmesh/toolmesh/filters/wasm/guest"
)

func main() {}

func init() {
	guest.Configure(configure)
	guest.Handle(filter)
}

var headerName, headerValue = "x-policy", "wasm-example"

func configure(config []byte) error {
	if raw, ok := guest.Field(config, "name"); ok {
		name, ok := guest.String(raw)
		if !ok || name == "" {
			return errors.New(`"name" must be a non-empty string`)
		}
		headerName = name
	}
	if raw, ok := guest.Field(config, "value"); ok {
		value, ok := guest.String(raw)
		if !ok {
			return errors.New(`"value" must be a string`)
		}
		headerValue = value
	}
	return nil
}

func filter(req guest.Request) guest.Decision {
	if req.Stage != guest.StageRequest {
		return guest.Pass()
	}
	return guest.Rewrite().WithHeader(headerName, headerValue)
}
