package redisstore

import (
	"cmp"
	"crypto/tls"
	"errors"
	"fmt"
	"math"
	"net"
	"net/url"
	"strconv"
	"strings"
	"time"

	"github.com/redis/go-redis/v9"
)

// Redis URLs (RedisOptions.URL, the --redis flag, the redis: config key).
// The scheme picks the client; the rest is go-redis's own URL syntax, parsed
// by redis.ParseURL, redis.ParseClusterURL or redis.ParseFailoverURL:
//
//	redis://[user[:password]@]host[:port][/db]                 one server (ParseURL)
//	redis+cluster://[user[:password]@]host[:port][?addr=host:port...]
//	                                                           Redis Cluster: seed nodes (ParseClusterURL)
//	redis+sentinel://[suser[:spassword]@]host:port[/db]?master_name=NAME[&addr=host:port...][&username=U&password=P]
//	                                                           the master NAME, found through the sentinels (ParseFailoverURL)
//	rediss://, rediss+cluster://, rediss+sentinel://           the same over TLS
//
// The port defaults to 6379; a sentinel's port must be written (sentinels
// usually listen on 26379). In a redis+sentinel URL the user info
// authenticates to the sentinels and ?username=&password= to the master and
// its replicas. A cluster has only database 0. Over TLS the certificate must
// name the first host unless RedisOptions.TLSConfig says otherwise.
//
// go-redis's other query parameters (pool_size, protocol, skip_verify, ...)
// pass through; unknown ones are errors, so a typo cannot silently change
// the setup. The parameters that toolmesh sets itself (timeouts, retries,
// client name) are refused instead of being silently overridden.
//
// toolmesh releases before go-redis's parsers took over had their own
// syntax; the forms that changed are refused with the new spelling:
// comma-separated hosts (now ?addr=), ?master= (now ?master_name= in a
// redis+sentinel URL), and ?sentinel_username=/?sentinel_password= (now the
// user info of the redis+sentinel URL).

// redisURLSetting names where a person fixes a bad URL.
const redisURLSetting = "--redis, config key redis"

// redisTarget is a parsed Redis URL: exactly one of single, cluster and
// failover is set.
type redisTarget struct {
	single   *redis.Options
	cluster  *redis.ClusterOptions
	failover *redis.FailoverOptions
	// display is the URL without credentials, for health and logs.
	display string
}

// redisOwnedParams are go-redis query parameters that toolmesh sets itself
// (see redisTarget.client): accepting them would silently drop them.
var redisOwnedParams = map[string]string{
	"dial_timeout":            "the config key redisTimeout bounds every operation",
	"read_timeout":            "the config key redisTimeout bounds every operation",
	"write_timeout":           "the config key redisTimeout bounds every operation",
	"pool_timeout":            "the config key redisTimeout bounds every operation",
	"context_timeout_enabled": "toolmesh always bounds operations by their context",
	"dialer_retries":          "toolmesh dials once per operation",
	"dialer_retry_timeout":    "toolmesh dials once per operation",
	"max_retries":             "toolmesh retries once, on a stale pooled connection",
	"client_name":             "toolmesh names its connections toolmesh",
	"disableIdentity":         "toolmesh sends no client identity",
	"identitySuffix":          "toolmesh sends no client identity",
	"replica_only":            "the store writes, so it needs the master",
}

// parseRedisURL maps a Redis URL onto go-redis options (addresses,
// credentials, database, TLS and go-redis query parameters; no timeouts).
// base, when not nil, is the TLS configuration to start from for TLS
// schemes.
func parseRedisURL(raw string, base *tls.Config) (*redisTarget, error) {
	t, err := parseRedisTarget(raw, base)
	if err != nil {
		return nil, fmt.Errorf("redis URL %q (%s): %s", redactRedisURL(raw), redisURLSetting, err)
	}
	return t, nil
}

// redisURLParts are the parts of a Redis URL that parseRedisURL checks
// before go-redis parses it.
type redisURLParts struct {
	scheme     string // lower case, e.g. rediss+sentinel
	baseScheme string // redis or rediss
	kind       string // "", cluster or sentinel
	rest       string // after ://
	host       string // the first host, without user info
	tail       string // path and query
}

// parseRedisTarget is parseRedisURL; its errors do not name the URL.
func parseRedisTarget(raw string, base *tls.Config) (*redisTarget, error) {
	u, err := splitRedisURL(raw)
	if err != nil {
		return nil, err
	}
	q, err := checkRedisQuery(u, raw)
	if err != nil {
		return nil, err
	}
	t, tlsCfg, db, err := goRedisOptions(u, q)
	if err != nil {
		return nil, err
	}
	if db < 0 {
		return nil, fmt.Errorf("database %d is negative", db)
	}
	if t.failover != nil && (t.failover.RouteByLatency || t.failover.RouteRandomly) {
		// NewFailoverClient panics on them: they need go-redis's failover
		// cluster client, and the store writes to the master anyway.
		return nil, errors.New("route_by_latency and route_randomly read from replicas; the store needs the master")
	}
	if *tlsCfg != nil {
		*tlsCfg = redisTLS(*tlsCfg, base)
	}
	t.display = redisDisplay(u.scheme, u.host, u.tail, q)
	return t, nil
}

// splitRedisURL checks the scheme and the first host.
func splitRedisURL(raw string) (redisURLParts, error) {
	var u redisURLParts
	scheme, rest, ok := strings.Cut(raw, "://")
	if !ok {
		return u, errors.New("want scheme://host[:port]")
	}
	u.scheme, u.rest = strings.ToLower(scheme), rest
	u.baseScheme, u.kind, _ = strings.Cut(u.scheme, "+")
	if (u.baseScheme != "redis" && u.baseScheme != "rediss") || (u.kind != "" && u.kind != "cluster" && u.kind != "sentinel") {
		return u, errors.New("scheme must be redis, rediss, redis+cluster, rediss+cluster, redis+sentinel or rediss+sentinel")
	}
	if strings.Contains(rest, "#") {
		return u, errors.New("a fragment (#...) is not allowed")
	}
	authority := rest
	if i := strings.IndexAny(rest, "/?"); i >= 0 {
		authority, u.tail = rest[:i], rest[i:]
	}
	u.host = authority
	if i := strings.LastIndexByte(authority, '@'); i >= 0 {
		u.host = authority[i+1:]
	}
	if u.host == "" {
		return u, errors.New("empty host")
	}
	if strings.Contains(u.host, ",") {
		return u, fmt.Errorf("comma-separated hosts are no longer accepted: %s", moreHostsHint(u.kind))
	}
	if u.kind == "sentinel" {
		if _, port, err := net.SplitHostPort(u.host); err != nil || port == "" {
			return u, fmt.Errorf("sentinel host %q needs its port (sentinels usually listen on 26379)", u.host)
		}
	}
	if err := checkRedisAddr(u.host, "6379"); err != nil {
		return u, err
	}
	return u, nil
}

// checkRedisQuery checks the query before go-redis does, to say what to
// write instead.
func checkRedisQuery(u redisURLParts, raw string) (url.Values, error) {
	rawQuery := ""
	if _, q, found := strings.Cut(u.tail, "?"); found {
		rawQuery = q
	}
	q, err := url.ParseQuery(rawQuery)
	if err != nil {
		return nil, fmt.Errorf("query: %v", redactErr(err, raw))
	}
	for k, vs := range q {
		if err := checkRedisParam(u.kind, k, vs); err != nil {
			return nil, err
		}
	}
	return q, nil
}

// checkRedisParam checks one query parameter of a URL of kind.
func checkRedisParam(kind, k string, vs []string) error {
	switch {
	case k == "master":
		return errors.New("?master= is now ?master_name=, in a redis+sentinel:// URL")
	case k == "sentinel_username" || k == "sentinel_password":
		return fmt.Errorf("?%s= is no longer accepted: the user info of a redis+sentinel:// URL authenticates to the sentinels, ?username=&password= to the master", k)
	case redisOwnedParams[k] != "":
		return fmt.Errorf("query parameter %q is set by toolmesh: %s", k, redisOwnedParams[k])
	case k == "addr":
		if kind == "" {
			return errors.New("?addr= adds cluster nodes or sentinels: use redis+cluster:// or redis+sentinel://")
		}
		for _, a := range vs {
			if err := checkRedisAddr(a, ""); err != nil {
				return fmt.Errorf("addr: %v", err)
			}
		}
	case len(vs) != 1:
		return fmt.Errorf("query parameter %q given %d times", k, len(vs))
	case outOfInt32(vs[0]):
		// go-redis panics on a pool size beyond int32.
		return fmt.Errorf("query parameter %q: %s is out of range", k, vs[0])
	case k == "master_name" && kind != "sentinel":
		return errors.New("?master_name= names a sentinel master: use redis+sentinel://")
	}
	return nil
}

// goRedisOptions has go-redis parse the URL with the plain scheme. It
// returns where the options keep their TLS configuration, and the database.
func goRedisOptions(u redisURLParts, q url.Values) (t *redisTarget, tlsCfg **tls.Config, db int, err error) {
	goURL := u.baseScheme + "://" + u.rest
	t = &redisTarget{}
	switch u.kind {
	case "":
		t.single, err = redis.ParseURL(goURL)
		if err == nil {
			tlsCfg, db = &t.single.TLSConfig, t.single.DB
		}
	case "cluster":
		// ParseClusterURL ignores the path; a cluster has only database 0.
		if path := strings.Trim(pathOf(u.tail), "/"); path != "" && path != "0" {
			return nil, nil, 0, errors.New("a cluster has only database 0")
		}
		t.cluster, err = redis.ParseClusterURL(goURL)
		if err == nil {
			tlsCfg = &t.cluster.TLSConfig
		}
	case "sentinel":
		if q.Get("master_name") == "" {
			return nil, nil, 0, errors.New("a redis+sentinel URL needs ?master_name=NAME")
		}
		t.failover, err = redis.ParseFailoverURL(goURL)
		if err == nil {
			tlsCfg, db = &t.failover.TLSConfig, t.failover.DB
		}
	}
	if err != nil {
		return nil, nil, 0, errors.New(strings.TrimPrefix(redactErr(err, goURL).Error(), "redis: "))
	}
	return t, tlsCfg, db, nil
}

// moreHostsHint says how a URL of kind names more than one host.
func moreHostsHint(kind string) string {
	switch kind {
	case "sentinel":
		return "write redis+sentinel://s1:26379?master_name=NAME&addr=s2:26379&addr=s3:26379"
	default:
		return "for a Redis Cluster write redis+cluster://h1:6379?addr=h2:6379&addr=h3:6379; for sentinels redis+sentinel://s1:26379?master_name=NAME&addr=s2:26379"
	}
}

// checkRedisAddr checks one host[:port] of a Redis URL; defaultPort ""
// means the port is required.
func checkRedisAddr(h, defaultPort string) error {
	host, port := h, defaultPort
	if strings.HasPrefix(h, "[") || strings.Count(h, ":") == 1 {
		var err error
		if host, port, err = net.SplitHostPort(h); err != nil {
			if !strings.HasSuffix(h, "]") || defaultPort == "" {
				return fmt.Errorf("host %q: %v", h, err)
			}
			host, port = strings.Trim(h, "[]"), defaultPort
		}
	} else if strings.Contains(h, ":") {
		return fmt.Errorf("host %q: an IPv6 address needs brackets", h)
	}
	if host == "" {
		return fmt.Errorf("host %q: empty host", h)
	}
	if port == "" && defaultPort == "" {
		return fmt.Errorf("host %q: needs a port", h)
	}
	if strings.ContainsAny(host, " \t\r\n/\\%@") {
		return fmt.Errorf("host %q: invalid characters", h)
	}
	if n, err := strconv.ParseUint(port, 10, 16); err != nil || n == 0 {
		return fmt.Errorf("host %q: invalid port %q", h, port)
	}
	return nil
}

// outOfInt32 reports whether v is an integer beyond int32.
func outOfInt32(v string) bool {
	n, err := strconv.ParseInt(v, 10, 64)
	return err == nil && (n > math.MaxInt32 || n < math.MinInt32)
}

// pathOf is the path part of tail ("/db?query").
func pathOf(tail string) string {
	p, _, _ := strings.Cut(tail, "?")
	return p
}

// redisTLS is the TLS configuration of a rediss URL: parsed is what go-redis
// made of the URL (server name, skip_verify), base the caller's own.
func redisTLS(parsed, base *tls.Config) *tls.Config {
	cfg := &tls.Config{MinVersion: tls.VersionTLS12}
	if base != nil {
		cfg = base.Clone()
	}
	if cfg.MinVersion == 0 {
		cfg.MinVersion = tls.VersionTLS12 // ParseClusterURL sets none
	}
	cfg.ServerName = cmp.Or(cfg.ServerName, parsed.ServerName)
	cfg.InsecureSkipVerify = cfg.InsecureSkipVerify || parsed.InsecureSkipVerify
	return cfg
}

// redisDisplay is the URL without user info and without any query parameter
// but the master name, the extra addresses and the database.
func redisDisplay(scheme, host, tail string, q url.Values) string {
	d := scheme + "://" + host
	if p := strings.Trim(pathOf(tail), "/"); p != "" {
		d += "/" + p
	}
	var shown []string
	for _, v := range q["master_name"] {
		shown = append(shown, "master_name="+url.QueryEscape(v))
	}
	for _, v := range q["addr"] {
		shown = append(shown, "addr="+v) // checked host:port, nothing to escape
	}
	for _, v := range q["db"] {
		shown = append(shown, "db="+url.QueryEscape(v))
	}
	if len(shown) > 0 {
		d += "?" + strings.Join(shown, "&")
	}
	return d
}

// client builds the go-redis client with toolmesh's bounds: one timeout
// bounds each operation end to end (go-redis honours the context deadline
// for dial, pool wait, write and read), a failed dial is not retried in a
// loop of its own, and a stale pooled connection (after a Redis restart or
// a failover) is retried once.
func (t *redisTarget) client(timeout time.Duration) (c redis.UniversalClient, err error) {
	// go-redis's constructors panic on some option values; parseRedisURL
	// refuses those it knows of, and this turns any other into an error.
	defer func() {
		if p := recover(); p != nil {
			c, err = nil, fmt.Errorf("redis URL %q (%s): go-redis refused the options: %v", t.display, redisURLSetting, p)
		}
	}()
	switch {
	case t.cluster != nil:
		o := t.cluster
		o.ClientName, o.ContextTimeoutEnabled, o.DisableIdentity = "toolmesh", true, true
		o.DialTimeout, o.ReadTimeout, o.WriteTimeout, o.PoolTimeout = timeout, timeout, timeout, timeout
		o.DialerRetries, o.MaxRetries = 1, 1
		return redis.NewClusterClient(o), nil
	case t.failover != nil:
		o := t.failover
		o.ClientName, o.ContextTimeoutEnabled, o.DisableIdentity = "toolmesh", true, true
		o.DialTimeout, o.ReadTimeout, o.WriteTimeout, o.PoolTimeout = timeout, timeout, timeout, timeout
		o.DialerRetries, o.MaxRetries = 1, 1
		return redis.NewFailoverClient(o), nil
	default:
		o := t.single
		o.ClientName, o.ContextTimeoutEnabled, o.DisableIdentity = "toolmesh", true, true
		o.DialTimeout, o.ReadTimeout, o.WriteTimeout, o.PoolTimeout = timeout, timeout, timeout, timeout
		o.DialerRetries, o.MaxRetries = 1, 1
		return redis.NewClient(o), nil
	}
}

// redactRedisURL hides the passwords of a Redis URL (the user info's and
// any ?password= or ?sentinel_password=), so errors and logs can quote the
// rest.
func redactRedisURL(raw string) string {
	out := raw
	if scheme, rest, ok := strings.Cut(raw, "://"); ok {
		authority := rest
		if i := strings.IndexAny(rest, "/?#"); i >= 0 {
			authority = rest[:i]
		}
		if i := strings.LastIndexByte(authority, '@'); i >= 0 {
			user, _, hasPass := strings.Cut(authority[:i], ":")
			if hasPass {
				user += ":xxxxx"
			}
			out = scheme + "://" + user + authority[i:] + rest[len(authority):]
		}
	}
	head, query, ok := strings.Cut(out, "?")
	if !ok {
		return out
	}
	query, frag, hasFrag := strings.Cut(query, "#")
	parts := strings.Split(query, "&")
	for i, p := range parts {
		k, _, hasValue := strings.Cut(p, "=")
		if uk, err := url.QueryUnescape(k); err == nil {
			k = uk
		}
		if hasValue && strings.HasSuffix(strings.ToLower(k), "password") {
			parts[i] = p[:strings.IndexByte(p, '=')] + "=xxxxx"
		}
	}
	out = head + "?" + strings.Join(parts, "&")
	if hasFrag {
		out += "#" + frag
	}
	return out
}

// redactErr keeps url.Parse errors, which quote their input, free of the
// password by dropping the quoted URL.
func redactErr(err error, raw string) error {
	var ue *url.Error
	if errors.As(err, &ue) {
		return ue.Err
	}
	return errors.New(strings.ReplaceAll(err.Error(), raw, redactRedisURL(raw)))
}

// ValidateRedisURL reports whether raw is a Redis URL NewRedisStore accepts,
// so a configuration can be checked before anything starts.
func ValidateRedisURL(raw string) error {
	_, err := parseRedisURL(raw, nil)
	return err
}
