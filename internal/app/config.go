package app

import (
	"encoding/json"
	"errors"
	"fmt"
	"log/slog"
	"net"
	"os"
	"strconv"
	"strings"
	"time"

	"github.com/spf13/pflag"
	"sigs.k8s.io/yaml"

	"github.com/toolmesh/toolmesh/extproc"
	"github.com/toolmesh/toolmesh/extproc/authn"
	"github.com/toolmesh/toolmesh/extproc/authz"
	"github.com/toolmesh/toolmesh/extproc/notify"
	"github.com/toolmesh/toolmesh/extproc/ratelimit"
	"github.com/toolmesh/toolmesh/extproc/upstreamcred"
	"github.com/toolmesh/toolmesh/filters"
	"github.com/toolmesh/toolmesh/internal/config"
	"github.com/toolmesh/toolmesh/internal/mtls"
	"github.com/toolmesh/toolmesh/registry"
	"github.com/toolmesh/toolmesh/registry/refresher"
	"github.com/toolmesh/toolmesh/registry/surface"
	"github.com/toolmesh/toolmesh/xds"
)

// Config is toolmesh's configuration: the YAML (or JSON) file named by
// --config, with command-line flags taking precedence over it. Every field
// has a default, so an empty file (or none) is a working configuration.
type Config struct {
	PortalConfig
	ListenConfig
	EndpointConfig
	RedisConfig
	SearchConfig
	UpstreamConfig
	AccessConfig
	// Filters configures the filter chain (docs/wasm-abi.md):
	// definitions in execution order, the filters every route runs, and
	// per-route changes. Input-schema validation runs on every route, with or
	// without this section, unless its schemaValidationOff names the route.
	Filters *filters.Config `json:"filters,omitempty"`
	// Surface is what routes expose (docs/surface.md): pinning of tool
	// definitions per route or Tool Service (off, warn, enforce) and each
	// route's virtual tools. Reloaded on SIGHUP, as a whole.
	Surface *surface.Config `json:"surface,omitempty"`
	// Tracing configures OpenTelemetry traces over OTLP (off by default;
	// docs/operators.md, "Tracing"): {"enabled": true, "endpoint":
	// "http://collector:4317", "protocol": "grpc"|"http", "samplingRatio":
	// 0.1, "resourceAttributes": {...}, "envoy": true}. Unset fields fall
	// back to the standard OTEL_* environment variables.
	Tracing *TracingConfig `json:"tracing,omitempty"`
	XDSConfig
	GRPCConfig
	NotificationsConfig
	LogConfig
}

// PortalConfig is where the routes come from and how often they are read again.
// Its keys are top-level keys of the config file (an inlined block of Config).
type PortalConfig struct {
	// Portal is where the routes come from: a Portal file (JSON or YAML,
	// docs/contracts/portal.md) or an http(s):// Portal base URL, whose /v1/routes is listed.
	// Empty means the embedded demo Portal and demo Tool Services, which only
	// `run` offers.
	Portal string `json:"portal,omitempty"`
	// PortalStrict rejects a Portal listing that has a field this toolmesh
	// does not know, as an invalid listing. By default such a field is
	// logged once, counted (toolmesh_portal_unknown_fields_total) and
	// ignored, so a Portal can add fields before every replica knows them.
	PortalStrict bool `json:"portalStrict,omitempty"`
	// RefreshInterval is the time between Portal and manifest refreshes
	// (default 30s).
	RefreshInterval config.Duration `json:"refreshInterval,omitempty"`
	// FetchTimeout bounds each Portal listing and manifest fetch (default
	// 10s), so one hanging peer cannot stall a refresh cycle.
	FetchTimeout config.Duration `json:"fetchTimeout,omitempty"`
	// RetryBackoff is the first wait before a failed Portal listing or a
	// route whose refresh failed (one without a snapshot included) is tried
	// again, ahead of the next refresh (default 1s). The wait doubles after
	// each failure, jittered; a success resets it.
	RetryBackoff config.Duration `json:"retryBackoff,omitempty"`
	// RetryBackoffMax is the longest such wait (default and ceiling: the
	// refresh interval).
	RetryBackoffMax config.Duration `json:"retryBackoffMax,omitempty"`
	// AllowEmptyListing lets a Portal listing that names no route remove
	// every route. By default such a listing counts as a failed one and the
	// current routes stay.
	AllowEmptyListing bool `json:"allowEmptyListing,omitempty"`
}

// ListenConfig is the addresses the servers bind, and Envoy's as xDS programs it.
// Its keys are top-level keys of the config file (an inlined block of Config).
type ListenConfig struct {
	// Listen is the address of the local data plane that `run` serves MCP
	// on, the development stand-in for Envoy (default 127.0.0.1:8080).
	Listen string `json:"listen,omitempty"`
	// ExtProcListen is the address of the ext_proc gRPC server that Envoy's
	// ext_proc filter calls (default 127.0.0.1:9002).
	ExtProcListen string `json:"extprocListen,omitempty"`
	// XDSListen is the address of the ADS gRPC server that Envoy gets its
	// listener, routes and clusters from (default 127.0.0.1:18000).
	XDSListen string `json:"xdsListen,omitempty"`
	// AdminListen is the address of the admin HTTP server: /healthz, /readyz,
	// /health and /metrics (default 127.0.0.1:9090, clear of Envoy's usual
	// admin port 9901).
	AdminListen string `json:"adminListen,omitempty"`
	// AdminToken, when set, is the bearer token that every admin endpoint
	// but /healthz and /readyz requires (401 without it). It says where the
	// token is read, once at start: a file ({"file": "/run/secrets/admin"},
	// trailing line breaks dropped) or an environment variable ({"env":
	// "TOOLMESH_ADMIN_TOKEN"}); the value itself is never in the config.
	AdminToken *config.CredentialSource `json:"adminToken,omitempty"`
	// EnvoyListen is the address Envoy's MCP listener binds, as programmed
	// over xDS by `xds` (default 0.0.0.0:10000). `run` programs its local data
	// plane with the Listen address instead.
	EnvoyListen string `json:"envoyListen,omitempty"`
	// NodeID is the Envoy node id the local data plane of `run` presents to
	// the xDS server (default toolmesh-local).
	NodeID string `json:"nodeId,omitempty"`
	// ControlTLS serves the ext_proc, xDS and notifications listeners over
	// mutual TLS (docs/operators.md, "Control channels"): the server
	// certificate and key, the CA client certificates must chain to, and
	// the SPIFFE IDs or DNS names a client certificate must carry. The
	// files are read again when they change. Unset: plaintext.
	ControlTLS *mtls.Config `json:"controlTLS,omitempty"`
	// InsecureListeners lets an ext_proc, xDS or notifications listener on
	// a non-loopback address serve without controlTLS; without it such a
	// listener refuses to start, since whoever reaches it can act as Envoy.
	InsecureListeners bool `json:"insecureListeners,omitempty"`
}

// EndpointConfig is what the MCP endpoint accepts and answers with.
// Its keys are top-level keys of the config file (an inlined block of Config).
type EndpointConfig struct {
	// AllowedOrigins lists the Origin values accepted on the MCP endpoint
	// (scheme://host[:port], or host[:port]; "*" as the port allows any).
	// A request with another Origin gets 403. Empty means the loopback
	// origins only.
	AllowedOrigins []string `json:"allowedOrigins,omitempty"`
	// AllowedHosts, when not empty, lists the Host values accepted on the MCP
	// endpoint (403 otherwise), as a guard against DNS rebinding.
	AllowedHosts []string `json:"allowedHosts,omitempty"`
	// MaxBodyBytes limits an MCP request body; a larger one gets 413
	// (default 1048576, 1 MiB).
	MaxBodyBytes int64 `json:"maxBodyBytes,omitempty"`
	// MaxResponseBytes limits a Tool Service reply; a larger one becomes an
	// isError result (default 4194304, 4 MiB).
	MaxResponseBytes int64 `json:"maxResponseBytes,omitempty"`
	// GCHeapFloorBytes is the smallest heap goal of the Go garbage
	// collector (default 0: GOGC alone, which suits a sidecar, ADR 0014;
	// a central gateway may set e.g. 67108864, 64 MiB): while the
	// live heap is small the collector waits for the heap to reach it
	// instead of collecting each time the heap doubles. A heap that
	// doubles past it anyway is collected as GOGC says; GOMEMLIMIT still
	// bounds it (the floor is at most half of that limit).
	GCHeapFloorBytes int64 `json:"gcHeapFloorBytes,omitempty"`
	// ToolLabelsPerRoute is how many distinct tools of each route get their
	// own tool label in toolmesh_tool_calls_total; calls of further tools
	// count as tool="(other)" (default 100, at most 10000).
	ToolLabelsPerRoute int `json:"toolLabelsPerRoute,omitempty"`
	// FederatedStreamTimeout bounds a federated MCP server's event stream
	// answering a tools/call: past it without the server's response, the
	// gateway ends the stream with an isError "timeout" result (ADR 0013).
	// By default the route timeout less a margin does so already; this
	// bound matters when it is shorter, or with federatedStreamDeadline off.
	FederatedStreamTimeout config.Duration `json:"federatedStreamTimeout,omitempty"`
	// FederatedStreamDeadline is "route" (the default: such a stream ends
	// with that result shortly before its route timeout, where Envoy's
	// listener allows it) or "off" (only FederatedStreamTimeout, if set,
	// ends it; otherwise the route timeout resets it, as in earlier
	// releases).
	FederatedStreamDeadline deadlineMode `json:"federatedStreamDeadline,omitempty"`
	// MessageTimeout is Envoy's per-message ext_proc timeout, programmed over
	// xDS (default 5s; Envoy's own 200ms default is too short).
	MessageTimeout config.Duration `json:"messageTimeout,omitempty"`
	// ServerName is the serverInfo name in MCP answers (default toolmesh).
	ServerName string `json:"serverName,omitempty"`
	// ListTTL is the ttlMs caching hint on 2026-07-28 tools/list and
	// server/discover results (default: the refresh interval, since a listing
	// cannot change faster than the registry refreshes).
	ListTTL config.Duration `json:"listTTL,omitempty"`
}

// RedisConfig is the store of the routes' last good snapshots.
// Its keys are top-level keys of the config file (an inlined block of Config).
type RedisConfig struct {
	// Redis is the URL of the Redis that keeps each route's last good snapshot
	// for warm start. Empty means the in-memory store. The scheme picks the
	// client, the rest is go-redis's URL syntax (docs/operators.md, "Redis
	// URLs"; registry/redisstore/redis_url.go):
	//   redis://[user:password@]host[:port][/db]                      one server
	//   redis+cluster://[user:password@]host:port[?addr=host2:port...]  Redis Cluster
	//   redis+sentinel://[suser:spassword@]host:port[/db]?master_name=NAME[&addr=host2:port...][&username=U&password=P]
	//   rediss://, rediss+cluster://, rediss+sentinel://              over TLS
	// In a sentinel URL the user info is the sentinels' credentials and
	// ?username=&password= the master's.
	Redis string `json:"redis,omitempty"`
	// RedisPrefix is the key prefix of the route snapshots (default
	// "toolmesh:route:").
	RedisPrefix string `json:"redisPrefix,omitempty"`
	// RedisTimeout bounds every Redis operation (default 500ms); a slow or
	// absent Redis never holds up serving.
	RedisTimeout config.Duration `json:"redisTimeout,omitempty"`
}

// SearchConfig is how catalogs are offered: per-route overrides and the embedding services of search mode.
// Its keys are top-level keys of the config file (an inlined block of Config).
type SearchConfig struct {
	// Catalogs overrides the Portal's catalog object per route key (ADR 0004):
	// {"mode": "full"|"search", "pageSize": N, "shortlist": K}. An override
	// replaces the Portal's object for that route as a whole.
	Catalogs map[string]registry.Catalog `json:"catalogs,omitempty"`
	// Embeddings are the OpenAI-compatible embedding services whose
	// similarity re-ranks search mode's shortlist (ADR 0007), by name; a
	// route's catalog.embedding names one.
	Embeddings map[string]registry.EmbeddingService `json:"embeddings,omitempty"`
	// DefaultEmbedding is the embedding service a search-mode route without
	// catalog.embedding uses (unset: none, the ranking is lexical).
	DefaultEmbedding string `json:"defaultEmbedding,omitempty"`
}

// UpstreamConfig is what the gateway sends to Tool Services and federated MCP servers.
// Its keys are top-level keys of the config file (an inlined block of Config).
type UpstreamConfig struct {
	// Credentials are the values of the headers a Portal entry with
	// protocol mcp sends to its MCP server (docs/contracts/portal.md): the
	// Portal names a credential, this map says where its value is read, from
	// a file ({"file": "/run/secrets/gh"}, trailing line breaks dropped) or
	// an environment variable ({"env": "GH_TOKEN"}), at every listing.
	Credentials map[string]config.CredentialSource `json:"credentials,omitempty"`
	// UpstreamAuth says, by Tool Service name, what credentials a Tool
	// Service or federated MCP server receives (ADR 0010): a credentials
	// entry, claims of the caller, or the client's own token (opt-in). The
	// client's Authorization is never forwarded otherwise. Reloaded on
	// SIGHUP, keeping the last good configuration.
	UpstreamAuth map[string]upstreamcred.ServiceAuth `json:"upstreamAuth,omitempty"`
	// ListingBounds bound each federated MCP server's listing, across its
	// pages (docs/contracts/portal.md, "Listing bounds"): items of each
	// kind and bytes of results. A Portal entry's listingBounds overrides
	// them per server. Unset fields: the built-in defaults.
	ListingBounds *registry.ListingBounds `json:"listingBounds,omitempty"`
}

// AccessConfig is who may call what: authentication, policies, approval.
// Its keys are top-level keys of the config file (an inlined block of Config).
type AccessConfig struct {
	// ResourceBase is the gateway's public base URL (scheme://host[:port]):
	// a route's canonical resource URI, the token audience (RFC 8707), is
	// ResourceBase + its public path.
	ResourceBase string `json:"resourceBase,omitempty"`
	// Auth makes routes OAuth 2.1 resource servers: per-route profiles of
	// trusted issuers, audience, scopes (docs/identity.md). Unset: every
	// route is open. Reloaded on SIGHUP.
	Auth *authn.Config `json:"auth,omitempty"`
	// Policies are the authorization policies (CEL) of each route
	// (docs/authorization.md); unset: everything is allowed.
	Policies *authz.Config `json:"policies,omitempty"`
	// Approval configures gateway-side human approval of risky tool calls
	// (docs/operators.md, "Approval"): {"keys": [{"id": "k1", "file":
	// "/run/secrets/approval-k1"}], "ttl": "5m", "routes": {"core":
	// {"annotations": ["destructiveHint"], "tools": ["delete_*"], "exempt":
	// []}}, "default": {...}}. Reloaded on SIGHUP.
	Approval *ApprovalConfig `json:"approval,omitempty"`
	// RateLimits are rate and concurrency limits per route, tool and caller,
	// local or through an Envoy rate limit service (docs/ratelimit.md).
	// Reloaded on SIGHUP.
	RateLimits *ratelimit.Config `json:"rateLimits,omitempty"`
	// RelayKeys are the HMAC keys of the ids given to federated legacy
	// servers' requests to the client, [{"id": "r1", "file": PATH}] as
	// approval.keys (the first signs, every one verifies). Every replica
	// needs the same keys; unset, a key is generated at start, which fits a
	// single replica only. Reloaded on SIGHUP.
	RelayKeys []ApprovalKey `json:"relayKeys,omitempty"`
}

// XDSConfig is what the xDS server programs besides the routes.
// Its keys are top-level keys of the config file (an inlined block of Config).
type XDSConfig struct {
	// DownstreamTLS makes Envoy's MCP listener mTLS-only and sends the
	// client certificate's SPIFFE ID to the extproc server as the caller's
	// mesh identity (ADR 0010): {certFile, keyFile, clientCAFile}, paths
	// on Envoy's file system. `run` serves its local data plane with them.
	DownstreamTLS *xds.DownstreamTLS `json:"downstreamTLS,omitempty"`
	// EnvoyControlTLS has Envoy reach the notifications servers over mTLS,
	// the other side of their controlTLS: {certFile, keyFile, caFile,
	// serverSANs}, paths on Envoy's file system (docs/operators.md,
	// "Control channels").
	EnvoyControlTLS *xds.ControlTLS `json:"envoyControlTLS,omitempty"`
	// Overrides is the path of the SRE override file (YAML; docs/sre.md):
	// cluster tuning per Tool Service or for all, reloaded when it changes.
	Overrides string `json:"overrides,omitempty"`
	// Nodes picks the routes each Envoy node is served, first match wins:
	// [{"id": "sidecar-*", "routes": ["core"]}]. An unmatched node gets
	// every route.
	Nodes []xds.NodeSelector `json:"nodes,omitempty"`
}

// GRPCConfig is the gRPC servers' keepalive and the shutdown's drain delay.
// Its keys are top-level keys of the config file (an inlined block of Config).
type GRPCConfig struct {
	// GRPCKeepaliveMinTime is the shortest interval between HTTP/2 PINGs a
	// client may send to the ext_proc and xDS gRPC servers, with or without
	// a stream open (default 10s). It must stay below the interval of the
	// Envoy bootstraps' connection_keepalive (30s): a client that pings more
	// often gets GOAWAY too_many_pings and loses its connection.
	GRPCKeepaliveMinTime config.Duration `json:"grpcKeepaliveMinTime,omitempty"`
	// GRPCKeepaliveTime is how long a gRPC server connection may go without
	// reading anything before the server pings the client (default 1m), so
	// the streams of an Envoy that vanished are reclaimed.
	GRPCKeepaliveTime config.Duration `json:"grpcKeepaliveTime,omitempty"`
	// GRPCKeepaliveTimeout is how long the server waits for the answer to
	// its ping before closing the connection (default 20s).
	GRPCKeepaliveTimeout config.Duration `json:"grpcKeepaliveTimeout,omitempty"`
	// DrainDelay is how long shutdown waits, with readiness and gRPC health
	// already NOT_SERVING, before it stops accepting work (default 5s; 0
	// allowed), so Envoy's health checks and load balancers move away first.
	DrainDelay config.Duration `json:"drainDelay,omitempty"`
}

// NotificationsConfig is the change-notification streams server (ADR 0012).
// Its keys are top-level keys of the config file (an inlined block of Config).
type NotificationsConfig struct {
	// NotificationsListen is the address of the notifications HTTP server
	// that serves change-notification streams (subscriptions/listen, and
	// the legacy GET stream) in `run` and `extproc`; Envoy reaches it through
	// the cluster toolmesh_notifications (ADR 0012). Empty (the default)
	// serves none: listChanged stays false, subscriptions/listen is -32601
	// and GET is 405.
	NotificationsListen string `json:"notificationsListen,omitempty"`
	// NotificationsAddresses are the host:port addresses at which Envoy
	// reaches the notifications servers, for `xds` to program the cluster
	// (IP addresses, or DNS names resolving to every replica). Unset, `run`
	// programs its own NotificationsListen address.
	NotificationsAddresses []string `json:"notificationsAddresses,omitempty"`
	// NotificationsKeepAlive is the interval of the SSE comment written on
	// an idle stream (default 15s; below Envoy's 5m stream_idle_timeout).
	NotificationsKeepAlive config.Duration `json:"notificationsKeepAlive,omitempty"`
	// NotificationsMaxStreams bounds the open streams of one process
	// (default 10000); one more is HTTP 503.
	NotificationsMaxStreams int `json:"notificationsMaxStreams,omitempty"`
	// NotificationsMaxStreamsPerClient bounds the open streams of one
	// client, the authenticated caller or else the downstream address
	// (default 32); one more is HTTP 429.
	NotificationsMaxStreamsPerClient int `json:"notificationsMaxStreamsPerClient,omitempty"`
}

// LogConfig is the process log.
// Its keys are top-level keys of the config file (an inlined block of Config).
type LogConfig struct {
	// LogLevel is debug, info, warn or error (default info).
	LogLevel string `json:"logLevel,omitempty"`
	// LogFormat is text or json (default text). Logs go to stderr.
	LogFormat string `json:"logFormat,omitempty"`
}

// Limits of the configuration.
const (
	minRefreshInterval = 100 * time.Millisecond
	minRetryBackoff    = 10 * time.Millisecond
	maxMessageTimeout  = time.Hour // Envoy's own ceiling for message_timeout
	// maxFederatedStreamTimeout: a route timeout is rarely longer; past a
	// day the setting is more likely a typo than a bound.
	maxFederatedStreamTimeout = 24 * time.Hour
	maxBodyLimit              = 64 << 20 // both limits travel in one gRPC message
	maxToolLabels             = 10000    // series of toolmesh_tool_calls_total per route and outcome
	maxDrainDelay             = 5 * time.Minute
	// maxNotificationsKeepAlive stays below Envoy's default
	// stream_idle_timeout (5m, http_connection_manager.proto), which ends a
	// stream that sends nothing for that long.
	maxNotificationsKeepAlive = 4 * time.Minute
	maxNotificationStreams    = 1 << 20

	// envoyKeepaliveInterval is the connection_keepalive interval of the
	// toolmesh_xds and toolmesh_extproc clusters in every Envoy bootstrap
	// of this repository (envoy/*.yaml, deploy/); the local data plane uses
	// the same. grpcKeepaliveMinTime must stay below it (bootstrap_test.go
	// checks the files).
	envoyKeepaliveInterval = 30 * time.Second
	// defaultKeepaliveMinTime leaves a third of that interval: Envoy pings
	// at interval plus 0-15% jitter after the last PING ACK, never sooner.
	// It is also grpc-go's own client floor (keepalive.ClientParameters.Time
	// is raised to 10s), so any grpc-go client with keepalive on passes.
	defaultKeepaliveMinTime = 10 * time.Second
)

// deadlineMode is federatedStreamDeadline's value. YAML 1.1, which the
// config file is read as, turns an unquoted off into false: that is "off"
// too, so that the documented spelling works without quotes.
type deadlineMode string

func (m *deadlineMode) UnmarshalJSON(b []byte) error {
	if string(b) == "false" {
		*m = "off"
		return nil
	}
	var s string
	if err := json.Unmarshal(b, &s); err != nil {
		return fmt.Errorf("federatedStreamDeadline must be route or off: %s", b)
	}
	*m = deadlineMode(s)
	return nil
}

// defaultConfig is the configuration with no file and no flags.
func defaultConfig() Config {
	var c Config
	c.Listen = "127.0.0.1:8080"
	c.ExtProcListen = "127.0.0.1:9002"
	c.XDSListen = "127.0.0.1:18000"
	c.AdminListen = "127.0.0.1:9090"
	c.EnvoyListen = "0.0.0.0:10000"
	c.NodeID = "toolmesh-local"
	c.RefreshInterval = config.Duration(refresher.DefaultInterval)
	c.FetchTimeout = config.Duration(refresher.DefaultFetchTimeout)
	c.RetryBackoff = config.Duration(refresher.DefaultRetryBackoff)
	c.MaxBodyBytes = 1 << 20
	c.MaxResponseBytes = 4 << 20
	c.ToolLabelsPerRoute = extproc.DefaultToolLabels
	c.MessageTimeout = config.Duration(5 * time.Second)
	c.FederatedStreamDeadline = "route"
	c.ServerName = "toolmesh"
	c.GRPCKeepaliveMinTime = config.Duration(defaultKeepaliveMinTime)
	c.GRPCKeepaliveTime = config.Duration(time.Minute)
	c.GRPCKeepaliveTimeout = config.Duration(20 * time.Second)
	c.DrainDelay = config.Duration(5 * time.Second)
	c.LogLevel = "info"
	c.NotificationsKeepAlive = config.Duration(notify.DefaultKeepAlive)
	c.NotificationsMaxStreams = notify.DefaultMaxStreams
	c.NotificationsMaxStreamsPerClient = notify.DefaultMaxStreamsPerClient
	c.LogFormat = "text"
	return c
}

// loadConfigFile reads the file at path over cfg: fields the file leaves out
// keep their value. Unknown fields are errors, so a typo cannot silently
// leave a setting at its default.
func loadConfigFile(path string, cfg *Config) error {
	data, err := os.ReadFile(path)
	if err != nil {
		return fmt.Errorf("read config: %w", err)
	}
	if err := parseConfig(data, cfg); err != nil {
		return fmt.Errorf("config %s: %w", path, err)
	}
	return nil
}

// parseConfig decodes a YAML or JSON document over cfg, strictly.
func parseConfig(data []byte, cfg *Config) error {
	if len(strings.TrimSpace(string(data))) == 0 {
		return nil
	}
	if err := yaml.UnmarshalStrict(data, cfg); err != nil {
		// The YAML library decodes through JSON and says so at length.
		msg := err.Error()
		for _, noise := range []string{"error unmarshaling JSON: ", "while decoding JSON: ", "json: "} {
			msg = strings.ReplaceAll(msg, noise, "")
		}
		return errors.New(msg)
	}
	return nil
}

// flagSet names the Config fields a subcommand exposes as flags; listen
// covers the local data plane (--listen and --node-id).
type flagSet struct {
	portal, listen, extproc, xds, envoyListen bool
}

// bindFlags registers the flags of the fields in which on fs, with defaults
// shown from defaultConfig. Values are read back by applyFlags only for the
// flags the user set, so a config file value is not overwritten by a default.
func bindFlags(fs *pflag.FlagSet, which flagSet) {
	d := defaultConfig()
	fs.String("config", "", "toolmesh YAML config `file`; flags override it")
	if which.portal {
		fs.String("portal", d.Portal, "Portal `file` (JSON/YAML) or http(s):// Portal base URL (default: the embedded demo, run only)")
	}
	if which.listen {
		fs.String("listen", d.Listen, "local data plane `address` (MCP on /mcp/{route})")
		fs.String("node-id", d.NodeID, "Envoy node `id` the local data plane presents to the xDS server")
	}
	if which.extproc {
		fs.String("extproc-listen", d.ExtProcListen, "ext_proc gRPC server `address`")
		fs.String("notifications-listen", d.NotificationsListen, "change-notification streams HTTP server `address` (default: none)")
	}
	if which.xds {
		fs.String("xds-listen", d.XDSListen, "xDS (ADS) gRPC server `address`")
		fs.Duration("message-timeout", d.MessageTimeout.D(), "ext_proc per-message timeout programmed into Envoy")
	}
	if which.envoyListen {
		fs.String("envoy-listen", d.EnvoyListen, "`address` Envoy's MCP listener binds, as programmed over xDS")
	}
	fs.String("control-tls-cert", "", "server certificate `file` (PEM) of the ext_proc, xDS and notifications listeners (config key controlTLS.certFile)")
	fs.String("control-tls-key", "", "private key `file` of --control-tls-cert (controlTLS.keyFile)")
	fs.String("control-tls-client-ca", "", "CA `file` client certificates of the control listeners must chain to (controlTLS.clientCAFile)")
	fs.StringSlice("control-tls-allowed-sans", nil, "SPIFFE IDs or DNS names a control listener's client certificate must carry one of (controlTLS.allowedSANs)")
	fs.Bool("insecure-listeners", false, "let ext_proc, xDS and notifications listeners on non-loopback addresses serve without TLS (insecureListeners)")
	fs.String("admin-listen", d.AdminListen, "admin HTTP `address` (/healthz, /readyz, /health, /metrics, /console/)")
	fs.String("admin-token-file", "", "`file` holding the bearer token every admin endpoint but /healthz and /readyz requires (default: none)")
	fs.Duration("refresh-interval", d.RefreshInterval.D(), "time between Portal and manifest refreshes")
	fs.Duration("fetch-timeout", d.FetchTimeout.D(), "bound on each Portal listing and manifest fetch")
	fs.StringSlice("allowed-origins", nil, "Origin values accepted on the MCP endpoint (default: loopback only)")
	fs.StringSlice("allowed-hosts", nil, "Host values accepted on the MCP endpoint (default: any)")
	fs.Int64("max-body-bytes", d.MaxBodyBytes, "MCP request body limit in bytes")
	fs.Int64("max-response-bytes", d.MaxResponseBytes, "Tool Service reply limit in bytes")
	fs.Int64("gc-heap-floor-bytes", d.GCHeapFloorBytes, "smallest heap goal of the Go garbage collector in bytes (0: GOGC alone)")
	fs.String("server-name", d.ServerName, "serverInfo name in MCP answers")
	fs.String("redis", d.Redis, "Redis `URL` for warm-start snapshots (default: in-memory store)")
	fs.Duration("grpc-keepalive-min-time", d.GRPCKeepaliveMinTime.D(), "shortest PING interval the gRPC servers accept from a client (below Envoy's connection_keepalive interval)")
	fs.Duration("grpc-keepalive-time", d.GRPCKeepaliveTime.D(), "idle time after which a gRPC server pings its client")
	fs.Duration("grpc-keepalive-timeout", d.GRPCKeepaliveTimeout.D(), "wait for a gRPC server ping's answer before closing the connection")
	fs.Duration("drain-delay", d.DrainDelay.D(), "on SIGTERM, time between health turning NOT_SERVING and draining (0: none)")
	fs.Bool("tracing", false, "export OpenTelemetry traces over OTLP (docs/operators.md, Tracing)")
	fs.String("tracing-endpoint", "", "OTLP collector `URL`, e.g. http://127.0.0.1:4317 (default: OTEL_EXPORTER_OTLP_* or the SDK's)")
	fs.String("tracing-protocol", "", "OTLP `protocol`: grpc or http (default: OTEL_EXPORTER_OTLP_PROTOCOL, then grpc)")
	fs.Float64("tracing-sampling-ratio", 1, "share of new traces sampled, 0 to 1; a request's own trace context decides for it (parent-based)")
	fs.StringToString("tracing-resource-attributes", nil, "resource attributes of every span, `key=value,...`")
	fs.String("log-level", d.LogLevel, "log `level`: debug, info, warn or error")
	fs.String("log-format", d.LogFormat, "log `format`: text or json")
}

// loadConfig builds the effective configuration: defaults, then the --config
// file, then the flags the user set. It validates the result.
func loadConfig(fs *pflag.FlagSet) (Config, error) {
	path, _ := fs.GetString("config")
	return readConfig(path, fs)
}

// readConfig is the defaults, then the config file at path (none when
// ""), then the flags of fs that were set (none when fs is nil), validated.
// Every command that reads a config file reads it here.
func readConfig(path string, fs *pflag.FlagSet) (Config, error) {
	cfg := defaultConfig()
	if path != "" {
		if err := loadConfigFile(path, &cfg); err != nil {
			return cfg, err
		}
	}
	if fs != nil {
		if err := applyFlags(fs, &cfg); err != nil {
			return cfg, err
		}
	}
	return cfg, cfg.Validate()
}

// applyFlags copies the flags the user set into cfg.
func applyFlags(fs *pflag.FlagSet, cfg *Config) error {
	var errs []error
	str := func(name string, dst *string) {
		if f := fs.Lookup(name); f != nil && f.Changed {
			*dst = f.Value.String()
		}
	}
	list := func(name string, dst *[]string) {
		if f := fs.Lookup(name); f != nil && f.Changed {
			v, err := fs.GetStringSlice(name)
			errs = append(errs, err)
			*dst = v
		}
	}
	dur := func(name string, dst *config.Duration) {
		if f := fs.Lookup(name); f != nil && f.Changed {
			v, err := fs.GetDuration(name)
			errs = append(errs, err)
			*dst = config.Duration(v)
		}
	}
	num := func(name string, dst *int64) {
		if f := fs.Lookup(name); f != nil && f.Changed {
			v, err := fs.GetInt64(name)
			errs = append(errs, err)
			*dst = v
		}
	}
	str("portal", &cfg.Portal)
	str("listen", &cfg.Listen)
	str("node-id", &cfg.NodeID)
	str("extproc-listen", &cfg.ExtProcListen)
	str("notifications-listen", &cfg.NotificationsListen)
	str("xds-listen", &cfg.XDSListen)
	str("envoy-listen", &cfg.EnvoyListen)
	str("admin-listen", &cfg.AdminListen)
	if f := fs.Lookup("admin-token-file"); f != nil && f.Changed {
		cfg.AdminToken = &config.CredentialSource{File: f.Value.String()}
	}
	str("server-name", &cfg.ServerName)
	str("redis", &cfg.Redis)
	str("log-level", &cfg.LogLevel)
	str("log-format", &cfg.LogFormat)
	list("allowed-origins", &cfg.AllowedOrigins)
	list("allowed-hosts", &cfg.AllowedHosts)
	dur("refresh-interval", &cfg.RefreshInterval)
	dur("fetch-timeout", &cfg.FetchTimeout)
	dur("message-timeout", &cfg.MessageTimeout)
	dur("grpc-keepalive-min-time", &cfg.GRPCKeepaliveMinTime)
	dur("grpc-keepalive-time", &cfg.GRPCKeepaliveTime)
	dur("grpc-keepalive-timeout", &cfg.GRPCKeepaliveTimeout)
	dur("drain-delay", &cfg.DrainDelay)
	num("max-body-bytes", &cfg.MaxBodyBytes)
	num("max-response-bytes", &cfg.MaxResponseBytes)
	num("gc-heap-floor-bytes", &cfg.GCHeapFloorBytes)
	errs = append(errs, applyControlTLSFlags(fs, cfg))
	errs = append(errs, applyTracingFlags(fs, cfg))
	return errors.Join(errs...)
}

// applyControlTLSFlags copies the --control-tls-* and --insecure-listeners
// flags the user set into cfg; each overrides its key of controlTLS.
func applyControlTLSFlags(fs *pflag.FlagSet, cfg *Config) error {
	var errs []error
	set := func(name string, f func(*mtls.Config, *pflag.Flag)) {
		fl := fs.Lookup(name)
		if fl == nil || !fl.Changed {
			return
		}
		if cfg.ControlTLS == nil {
			cfg.ControlTLS = &mtls.Config{}
		}
		f(cfg.ControlTLS, fl)
	}
	set("control-tls-cert", func(c *mtls.Config, f *pflag.Flag) { c.CertFile = f.Value.String() })
	set("control-tls-key", func(c *mtls.Config, f *pflag.Flag) { c.KeyFile = f.Value.String() })
	set("control-tls-client-ca", func(c *mtls.Config, f *pflag.Flag) { c.ClientCAFile = f.Value.String() })
	set("control-tls-allowed-sans", func(c *mtls.Config, f *pflag.Flag) {
		v, err := fs.GetStringSlice(f.Name)
		errs = append(errs, err)
		c.AllowedSANs = v
	})
	if f := fs.Lookup("insecure-listeners"); f != nil && f.Changed {
		v, err := fs.GetBool("insecure-listeners")
		errs = append(errs, err)
		cfg.InsecureListeners = v
	}
	return errors.Join(errs...)
}

// checkAddress accepts host:port with a numeric port (0 picks a free one).
func checkAddress(addr string) error {
	host, port, err := net.SplitHostPort(addr)
	if err != nil {
		example := "127.0.0.1:8380"
		if p, perr := strconv.ParseUint(addr, 10, 16); perr == nil {
			// A bare port: the host is what is missing.
			example = "127.0.0.1:" + strconv.FormatUint(p, 10)
		}
		return fmt.Errorf("%q: want host:port, e.g. %s (0.0.0.0 for every interface)", addr, example)
	}
	if host == "" {
		return fmt.Errorf("%q has no host (use 0.0.0.0 to listen on every interface)", addr)
	}
	if p, err := strconv.ParseUint(port, 10, 16); err != nil || port != strconv.FormatUint(p, 10) {
		return fmt.Errorf("%q: port must be a number from 0 to 65535", addr)
	}
	return nil
}

// parseLevel parses a log level name.
func parseLevel(s string) (slog.Level, error) {
	var l slog.Level
	if err := l.UnmarshalText([]byte(s)); err != nil {
		return 0, fmt.Errorf("%q is not debug, info, warn or error", s)
	}
	return l, nil
}
