package app

import (
	"errors"
	"fmt"
	"net/url"
	"os"
	"strings"
	"time"

	"github.com/toolmesh/toolmesh/extproc/authn"
	"github.com/toolmesh/toolmesh/extproc/authz"
	"github.com/toolmesh/toolmesh/extproc/upstreamcred"
	"github.com/toolmesh/toolmesh/internal/config"
	"github.com/toolmesh/toolmesh/registry"
	"github.com/toolmesh/toolmesh/registry/redisstore"
	"github.com/toolmesh/toolmesh/xds"
)

// fieldErrors collects a block's problems, each naming the field, as it is
// spelled in the config file, that a person must change.
type fieldErrors []error

// bad records a problem of field.
func (e *fieldErrors) bad(field, format string, args ...any) {
	*e = append(*e, fmt.Errorf("%s: %s", field, fmt.Sprintf(format, args...)))
}

// check records err, if any, as a problem of field.
func (e *fieldErrors) check(field string, err error) {
	if err != nil {
		e.bad(field, "%v", err)
	}
}

// add records err, which names its field itself.
func (e *fieldErrors) add(err error) {
	if err != nil {
		*e = append(*e, err)
	}
}

func (e fieldErrors) join() error { return errors.Join(e...) }

// Validate reports every invalid field at once, each naming the field as it
// is spelled in the config file. Each block checks itself; the checks that
// span blocks (credentials named by embeddings and upstreamAuth, catalogs
// naming embeddings) follow.
func (c *Config) Validate() error {
	var errs fieldErrors
	for _, block := range []interface{ Validate() error }{
		&c.PortalConfig, &c.ListenConfig, &c.EndpointConfig, &c.RedisConfig, &c.SearchConfig,
		&c.UpstreamConfig, &c.AccessConfig, &c.XDSConfig, &c.GRPCConfig, &c.NotificationsConfig, &c.LogConfig,
	} {
		errs.add(block.Validate())
	}
	if c.Filters != nil {
		errs.check("filters", c.Filters.Validate())
	}
	errs.add(c.Surface.Validate()) // each error names its entry
	errs.add(c.Tracing.validate())
	errs.add((upstreamcred.Auth{Services: c.UpstreamAuth, Credentials: c.Credentials}).Validate())
	errs.add(registry.CheckEmbeddings(c.Embeddings, c.DefaultEmbedding, c.Credentials))
	errs.add(c.checkRLSTimeout())
	return errs.join()
}

// Validate checks the Portal and its refresh timing.
func (c *PortalConfig) Validate() error {
	var errs fieldErrors
	if c.Portal != "" {
		errs.check("portal", checkPortal(c.Portal))
	}
	if d := c.RefreshInterval.D(); d < minRefreshInterval {
		errs.bad("refreshInterval", "%s is shorter than %s", d, minRefreshInterval)
	}
	if d := c.FetchTimeout.D(); d < 10*time.Millisecond || d > 10*time.Minute {
		errs.bad("fetchTimeout", "%s is not between 10ms and 10m", d)
	}
	if d := c.RetryBackoff.D(); d != 0 && d < minRetryBackoff {
		errs.bad("retryBackoff", "%s is shorter than %s", d, minRetryBackoff)
	}
	if d, m := c.RetryBackoff.D(), c.RetryBackoffMax.D(); m != 0 && m < max(d, minRetryBackoff) {
		errs.bad("retryBackoffMax", "%s is shorter than retryBackoff (%s) or %s", m, d, minRetryBackoff)
	}
	return errs.join()
}

// checkPortal accepts an http(s) URL with a host or a file that exists.
func checkPortal(portal string) error {
	if strings.Contains(portal, "://") {
		u, err := url.Parse(portal)
		if err != nil || (u.Scheme != "http" && u.Scheme != "https") || u.Host == "" {
			return fmt.Errorf("%q is neither a file nor an http(s):// URL with a host", portal)
		}
		return nil
	}
	st, err := os.Stat(portal)
	if err != nil {
		return err
	}
	if st.IsDir() {
		return fmt.Errorf("%s is a directory, not a Portal file", portal)
	}
	return nil
}

// Validate checks the listen addresses, the admin token and the node id.
func (c *ListenConfig) Validate() error {
	var errs fieldErrors
	for _, a := range []struct{ field, addr string }{
		{"listen", c.Listen},
		{"extprocListen", c.ExtProcListen},
		{"xdsListen", c.XDSListen},
		{"adminListen", c.AdminListen},
		{"envoyListen", c.EnvoyListen},
	} {
		errs.check(a.field+" (--"+listenFlags[a.field]+")", checkAddress(a.addr))
	}
	if c.AdminToken != nil {
		errs.check("adminToken", c.AdminToken.Check())
	}
	if c.NodeID == "" {
		errs.bad("nodeId", "must not be empty")
	}
	if err := c.ControlTLS.Validate(); err != nil {
		// Each error starts with its key within the block.
		all := []error{err}
		if j, ok := err.(interface{ Unwrap() []error }); ok {
			all = j.Unwrap()
		}
		for _, e := range all {
			errs.add(fmt.Errorf("controlTLS.%w", e))
		}
	}
	return errs.join()
}

// Validate checks the MCP endpoint's limits and answers.
func (c *EndpointConfig) Validate() error {
	var errs fieldErrors
	if d := c.FederatedStreamTimeout.D(); d < 0 || d > maxFederatedStreamTimeout {
		errs.bad("federatedStreamTimeout", "%s is not between 0 and %s", d, maxFederatedStreamTimeout)
	}
	if v := c.FederatedStreamDeadline; v != "route" && v != "off" {
		errs.bad("federatedStreamDeadline", "%q is neither route nor off", v)
	}
	if d := c.MessageTimeout.D(); d <= 0 || d > maxMessageTimeout {
		errs.bad("messageTimeout", "%s is not between 0 and %s", d, maxMessageTimeout)
	}
	if c.MaxBodyBytes <= 0 || c.MaxBodyBytes > maxBodyLimit {
		errs.bad("maxBodyBytes", "%d is not between 1 and %d", c.MaxBodyBytes, maxBodyLimit)
	}
	if c.ToolLabelsPerRoute < 1 || c.ToolLabelsPerRoute > maxToolLabels {
		errs.bad("toolLabelsPerRoute", "%d is not between 1 and %d", c.ToolLabelsPerRoute, maxToolLabels)
	}
	if c.MaxResponseBytes <= 0 || c.MaxResponseBytes > maxBodyLimit {
		errs.bad("maxResponseBytes", "%d is not between 1 and %d", c.MaxResponseBytes, maxBodyLimit)
	}
	if c.GCHeapFloorBytes < 0 || c.GCHeapFloorBytes > 1<<40 {
		errs.bad("gcHeapFloorBytes", "%d is not between 0 (GOGC alone) and %d", c.GCHeapFloorBytes, int64(1)<<40)
	}
	for _, l := range []struct {
		field  string
		values []string
	}{{"allowedOrigins", c.AllowedOrigins}, {"allowedHosts", c.AllowedHosts}} {
		for i, v := range l.values {
			if strings.TrimSpace(v) == "" {
				errs.bad(fmt.Sprintf("%s[%d]", l.field, i), "must not be empty")
			}
		}
	}
	if c.ServerName == "" {
		errs.bad("serverName", "must not be empty")
	}
	if c.ListTTL < 0 {
		errs.bad("listTTL", "must not be negative")
	}
	return errs.join()
}

// Validate checks the Redis URL and timeout.
func (c *RedisConfig) Validate() error {
	var errs fieldErrors
	if c.Redis != "" {
		errs.check("redis", redisstore.ValidateRedisURL(c.Redis))
	}
	if d := c.RedisTimeout.D(); d < 0 || d > time.Minute {
		errs.bad("redisTimeout", "%s is not between 0 and 1m", d)
	}
	return errs.join()
}

// Validate checks the catalog overrides and that each names an embedding
// service there is. The services themselves are checked with the
// credentials they name (Config.Validate).
func (c *SearchConfig) Validate() error {
	var errs fieldErrors
	for key, cat := range c.Catalogs {
		errs.check("catalogs."+key, cat.Validate())
	}
	for key, cat := range c.Catalogs {
		if _, ok := c.Embeddings[cat.Embedding]; !ok && cat.Embedding != "" && cat.Embedding != registry.EmbeddingNone {
			errs.bad("catalogs."+key+".embedding", "%q is not a key of embeddings", cat.Embedding)
		}
	}
	return errs.join()
}

// Validate checks the credentials' sources and the listing bounds;
// upstreamAuth is checked with them (Config.Validate).
func (c *UpstreamConfig) Validate() error {
	errs := fieldErrors(c.ListingBounds.Check("listingBounds"))
	errs.add(config.CheckCredentials(c.Credentials))
	return errs.join()
}

// Validate checks approval, relay keys, authentication and policies; each
// error names its key.
func (c *AccessConfig) Validate() error {
	var errs fieldErrors
	_, err := c.Approval.build(nil)
	errs.add(err)
	_, err = buildRelayKeys(c.RelayKeys)
	errs.add(err)
	errs.add(c.RateLimits.Validate()) // each error names its entry
	errs.add(authn.Validate(c.ResourceBase, c.Auth))
	_, err = authz.Compile(c.Policies)
	errs.check("policies", err)
	return errs.join()
}

// Validate checks the override file, the node selectors and downstream TLS.
func (c *XDSConfig) Validate() error {
	var errs fieldErrors
	if c.Overrides != "" {
		_, err := xds.LoadOverrides(c.Overrides)
		errs.check("overrides", err)
	}
	errs.check("nodes", (xds.Options{Nodes: c.Nodes}).Validate())
	errs.check("downstreamTLS", (xds.Options{DownstreamTLS: c.DownstreamTLS}).Validate())
	errs.check("envoyControlTLS", (xds.Options{ControlTLS: c.EnvoyControlTLS}).Validate())
	return errs.join()
}

// Validate checks the keepalive against Envoy's and the drain delay.
func (c *GRPCConfig) Validate() error {
	var errs fieldErrors
	if d := c.GRPCKeepaliveMinTime.D(); d <= 0 || d >= envoyKeepaliveInterval {
		// 0 would mean grpc-go's default, 5m, which rejects Envoy's pings.
		errs.bad("grpcKeepaliveMinTime", "%s is not between 0 and %s, the connection_keepalive interval of the Envoy bootstraps: "+
			"Envoy's pings would get GOAWAY too_many_pings", d, envoyKeepaliveInterval)
	}
	if d := c.GRPCKeepaliveTime.D(); d < time.Second {
		errs.bad("grpcKeepaliveTime", "%s is shorter than 1s, the least grpc-go accepts", d)
	}
	if d := c.GRPCKeepaliveTimeout.D(); d <= 0 {
		errs.bad("grpcKeepaliveTimeout", "%s is not positive", d)
	}
	if d := c.DrainDelay.D(); d < 0 || d > maxDrainDelay {
		errs.bad("drainDelay", "%s is not between 0 and %s", d, maxDrainDelay)
	}
	return errs.join()
}

// Validate checks the notifications server's address and bounds.
func (c *NotificationsConfig) Validate() error {
	var errs fieldErrors
	if c.NotificationsListen != "" {
		errs.check("notificationsListen (--notifications-listen)", checkAddress(c.NotificationsListen))
	}
	if len(c.NotificationsAddresses) > 0 {
		errs.check("notificationsAddresses", (&xds.Notifications{Addresses: c.NotificationsAddresses}).Check())
	}
	if d := c.NotificationsKeepAlive.D(); d < 10*time.Millisecond || d > maxNotificationsKeepAlive {
		errs.bad("notificationsKeepAlive", "%s is not between 10ms and %s (Envoy's stream_idle_timeout would cut idle streams)", d, maxNotificationsKeepAlive)
	}
	if c.NotificationsMaxStreams < 1 || c.NotificationsMaxStreams > maxNotificationStreams {
		errs.bad("notificationsMaxStreams", "%d is not between 1 and %d", c.NotificationsMaxStreams, maxNotificationStreams)
	}
	if n := c.NotificationsMaxStreamsPerClient; n < 1 || n > c.NotificationsMaxStreams {
		errs.bad("notificationsMaxStreamsPerClient", "%d is not between 1 and notificationsMaxStreams (%d)", n, c.NotificationsMaxStreams)
	}
	return errs.join()
}

// Validate checks the log level and format.
func (c *LogConfig) Validate() error {
	var errs fieldErrors
	if _, err := parseLevel(c.LogLevel); err != nil {
		errs.bad("logLevel", "%v", err)
	}
	if c.LogFormat != "text" && c.LogFormat != "json" {
		errs.bad("logFormat", "%q is not text or json", c.LogFormat)
	}
	return errs.join()
}
