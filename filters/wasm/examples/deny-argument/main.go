// Command deny-argument is an example toolmesh WebAssembly filter: it denies
// a tool call when a string argument starts with a forbidden prefix.
//
// Configuration (optional), with these defaults:
//
//	{"tool": "delete_file", "argument": "path", "prefix": "/etc/"}
//
// Build: GOOS=wasip1 GOARCH=wasm go build -buildmode=c-shared -o deny-argument.wasm .
package main

import (
	"errors"
	"strings"

	"github.com/toolmesh/toolmesh/filters/wasm/guest"
)

func main() {}

func init() {
	guest.Configure(configure)
	guest.Handle(filter)
}

var tool, argument, prefix = "delete_file", "path", "/etc/"

func configure(config []byte) error {
	for key, dst := range map[string]*string{"tool": &tool, "argument": &argument, "prefix": &prefix} {
		raw, ok := guest.Field(config, key)
		if !ok {
			continue
		}
		s, ok := guest.String(raw)
		if !ok || s == "" {
			return errors.New(`"` + key + `" must be a non-empty string`)
		}
		*dst = s
	}
	return nil
}

func filter(req guest.Request) guest.Decision {
	if req.Stage != guest.StageRequest || req.Tool != tool {
		return guest.Pass()
	}
	if v, ok := req.StringArgument(argument); ok && strings.HasPrefix(v, prefix) {
		return guest.Deny(tool + ": " + argument + " under " + prefix + " is not allowed")
	}
	return guest.Pass()
}
