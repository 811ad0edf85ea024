//go:build tools

// Package deps pins the chosen dependencies before the packages that use them exist.
package deps

import (
	_ "github.com/envoyproxy/go-control-plane/pkg/cache/v3"
	_ "github.com/envoyproxy/go-control-plane/pkg/server/v3"
	_ "github.com/envoyproxy/go-control-plane/pkg/client/sotw/v3"
	_ "github.com/envoyproxy/go-control-plane/envoy/service/ext_proc/v3"
	_ "github.com/envoyproxy/go-control-plane/envoy/config/bootstrap/v3"
	_ "google.golang.org/grpc"
	_ "google.golang.org/grpc/xds"
	_ "github.com/modelcontextprotocol/go-sdk/mcp"
	_ "github.com/mark3labs/mcp-go/client"
	_ "github.com/tetratelabs/wazero"
	_ "github.com/redis/go-redis/v9"
	_ "github.com/santhosh-tekuri/jsonschema/v6"
	_ "github.com/spf13/cobra"
	_ "sigs.k8s.io/yaml"
	_ "github.com/prometheus/client_golang/prometheus"
)
