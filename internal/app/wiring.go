package app

import (
	"fmt"
	"log/slog"
	"net/http"

	"github.com/prometheus/client_golang/prometheus"
	"go.opentelemetry.io/otel/trace"

	"github.com/toolmesh/toolmesh/registry"
	"github.com/toolmesh/toolmesh/registry/refresher"
	"github.com/toolmesh/toolmesh/registry/surface"
	"github.com/toolmesh/toolmesh/xds"
)

// This file turns a validated Config into the runtime's parts. Every
// command that needs a part gets it here, so a config block cannot reach
// one command and miss another.

// registryParts are what the registry runs with besides the config: the
// Portal, the peers' clients, the snapshot store and the observers.
type registryParts struct {
	source  registry.Source
	fetcher registry.ManifestFetcher
	lister  registry.MCPLister
	store   registry.Store
	pins    surface.Store // pinned tool definitions (surface.go)
	client  *http.Client  // the embedding services'
	log     *slog.Logger
	tracer  trace.TracerProvider
	metrics prometheus.Registerer
}

// registryOptions are the registry's options for cfg.
func registryOptions(cfg *Config, p registryParts) refresher.Options {
	return refresher.Options{
		Source:       p.source,
		Fetcher:      p.fetcher,
		MCPLister:    p.lister,
		Store:        p.store,
		Interval:     cfg.RefreshInterval.D(),
		FetchTimeout: cfg.FetchTimeout.D(),
		// Both are capped at Interval by the registry.
		RetryBackoff:    cfg.RetryBackoff.D(),
		RetryBackoffMax: cfg.RetryBackoffMax.D(),
		// A Portal answering "no routes" is treated as broken unless allowed.
		AllowEmptyListing: cfg.AllowEmptyListing,
		Logger:            p.log,
		TracerProvider:    p.tracer,
		// With a warm store, serve the restored snapshots at once and let the
		// first manifest refresh finish in the background (ADR 0005 order).
		ReadyAfterWarmStart: cfg.Redis != "",
		Registerer:          p.metrics,
		// The embedding services (eval-search ranks with the same, through
		// refresher.Embedders), with the credentials they name.
		Credentials:      cfg.Credentials,
		Embeddings:       cfg.Embeddings,
		DefaultEmbedding: cfg.DefaultEmbedding,
		EmbeddingClient:  p.client,
		Pins:             p.pins,
	}
}

// newRegistry is the registry for cfg, with its catalog overrides set.
func newRegistry(cfg *Config, p registryParts) (*refresher.Registry, error) {
	reg := refresher.New(registryOptions(cfg, p))
	if len(cfg.Catalogs) > 0 {
		if err := reg.SetCatalogOverrides(cfg.Catalogs); err != nil {
			return nil, fmt.Errorf("catalogs: %w", err)
		}
	}
	if err := reg.SetSurface(cfg.Surface); err != nil {
		return nil, err
	}
	return reg, nil
}

// xdsParts are what the xDS server's options take besides the config: the
// override file as loaded, the address Envoy's listener binds, and what
// tracing and the notifications server say.
type xdsParts struct {
	overrides     *xds.Overrides
	host          string
	port          uint32
	envoyTracing  *xds.EnvoyTracing
	notifications *xds.Notifications
}

// xdsOptions are the xDS server's options for cfg.
func xdsOptions(cfg *Config, p xdsParts) xds.Options {
	return xds.Options{
		Overrides:       p.overrides,
		Nodes:           cfg.Nodes,
		ListenAddress:   p.host,
		ListenPort:      p.port,
		MessageTimeout:  cfg.MessageTimeout.D(),
		MaxRequestBytes: uint64(cfg.MaxBodyBytes),
		// Envoy buffers the reply the extproc server maps; the same limit
		// on both sides keeps "too large" an MCP result, not a 500.
		MaxResponseBytes: uint64(cfg.MaxResponseBytes),
		ServerName:       cfg.ServerName,
		ServerVersion:    version,
		EnvoyTracing:     p.envoyTracing,
		DownstreamTLS:    cfg.DownstreamTLS,
		ControlTLS:       cfg.EnvoyControlTLS,
		Notifications:    p.notifications,
	}
}
