package registry

import (
	"crypto/tls"
	"errors"
	"fmt"
	"net"
	"net/url"
	"strconv"
	"strings"

	"github.com/redis/go-redis/v9"
)

// Redis URLs (RedisOptions.URL). One URL names a single server, a Redis
// Cluster or a Sentinel-managed master; it maps onto go-redis's
// UniversalOptions, which picks the client:
//
//	redis://[user[:password]@]host[:port][/db]            one server
//	rediss://...                                          the same over TLS
//	redis://[user:password@]h1:p1,h2:p2[,...]             Redis Cluster (two or more seed addresses)
//	redis+cluster://[user:password@]host[:port][,...]     Redis Cluster, even with one seed address
//	redis+sentinel://[user:password@]s1[:port][,s2...][/db]?master=NAME
//	                                                      the master NAME, found through the sentinels
//	redis://s1,s2?master=NAME                             the same: ?master= always means Sentinel
//	rediss+cluster://, rediss+sentinel://                 over TLS
//
// The port defaults to 6379, and to 26379 for the sentinels of a
// redis+sentinel URL. User and password (percent-encoded) authenticate to
// the Redis servers; the sentinels' own credentials, when they have any, go
// in the query: ?sentinel_username=...&sentinel_password=... . The database
// number (default 0) must be 0 for a cluster. Over TLS the certificate must
// name the first host unless RedisOptions.TLSConfig says otherwise. Any other
// query parameter is an error, so a typo cannot silently change the setup.

// redisTarget is a parsed Redis URL.
type redisTarget struct {
	opts *redis.UniversalOptions
	// display is the URL without credentials, for health and logs.
	display string
}

// Redis URL schemes.
var redisSchemes = map[string]struct {
	tls              bool
	cluster          bool
	sentinel         bool
	defaultPort      string
	canBeMultiServer bool
}{
	"redis":           {defaultPort: "6379", canBeMultiServer: true},
	"rediss":          {tls: true, defaultPort: "6379", canBeMultiServer: true},
	"redis+cluster":   {cluster: true, defaultPort: "6379"},
	"rediss+cluster":  {tls: true, cluster: true, defaultPort: "6379"},
	"redis+sentinel":  {sentinel: true, defaultPort: "26379"},
	"rediss+sentinel": {tls: true, sentinel: true, defaultPort: "26379"},
}

// parseRedisURL maps a Redis URL onto UniversalOptions (addresses, mode,
// credentials, database and TLS; no timeouts). base, when not nil, is the
// TLS configuration to start from for TLS schemes.
func parseRedisURL(raw string, base *tls.Config) (*redisTarget, error) {
	fail := func(format string, args ...any) (*redisTarget, error) {
		return nil, fmt.Errorf("redis url %q: %s", redactRedisURL(raw), fmt.Sprintf(format, args...))
	}
	scheme, rest, ok := strings.Cut(raw, "://")
	if !ok {
		return fail("want scheme://host")
	}
	mode, known := redisSchemes[strings.ToLower(scheme)]
	if !known {
		return fail("scheme must be redis, rediss, redis+cluster, rediss+cluster, redis+sentinel or rediss+sentinel")
	}
	scheme = strings.ToLower(scheme)
	if i := strings.IndexByte(rest, '#'); i >= 0 {
		return fail("a fragment is not allowed")
	}
	authority, tail := rest, ""
	if i := strings.IndexAny(rest, "/?"); i >= 0 {
		authority, tail = rest[:i], rest[i:]
	}
	userinfo, hostlist := "", authority
	if i := strings.LastIndexByte(authority, '@'); i >= 0 {
		userinfo, hostlist = authority[:i], authority[i+1:]
	}
	// Parse everything but the host list as an ordinary URL.
	u, err := url.Parse("x://" + userinfo + "@h" + tail)
	if userinfo == "" {
		u, err = url.Parse("x://h" + tail)
	}
	if err != nil {
		return fail("%v", redactErr(err, raw))
	}

	o := &redis.UniversalOptions{}
	var hosts []string
	for h := range strings.SplitSeq(hostlist, ",") {
		addr, err := redisAddr(h, mode.defaultPort)
		if err != nil {
			return fail("%v", err)
		}
		hosts = append(hosts, addr)
	}
	o.Addrs = hosts
	if u.User != nil {
		o.Username = u.User.Username()
		o.Password, _ = u.User.Password()
	}

	q := u.Query()
	for k := range q {
		switch k {
		case "master", "sentinel_username", "sentinel_password":
			if len(q[k]) != 1 {
				return fail("query parameter %q given %d times", k, len(q[k]))
			}
		default:
			return fail("unknown query parameter %q (known: master, sentinel_username, sentinel_password)", k)
		}
	}
	o.MasterName = q.Get("master")
	o.SentinelUsername, o.SentinelPassword = q.Get("sentinel_username"), q.Get("sentinel_password")
	sentinel := mode.sentinel || o.MasterName != ""
	cluster := mode.cluster || (!sentinel && mode.canBeMultiServer && len(hosts) > 1)
	switch {
	case mode.sentinel && o.MasterName == "":
		return fail("a sentinel URL needs ?master=NAME")
	case mode.cluster && o.MasterName != "":
		return fail("?master= names a sentinel master; a cluster URL cannot have it")
	case !sentinel && (o.SentinelUsername != "" || o.SentinelPassword != ""):
		return fail("sentinel credentials without ?master=")
	}
	o.IsClusterMode = cluster && len(hosts) == 1 // two or more addresses already mean a cluster

	switch path := strings.Trim(u.Path, "/"); {
	case path == "":
	case strings.Contains(path, "/"):
		return fail("path must be /db")
	default:
		db, err := strconv.Atoi(path)
		if err != nil || db < 0 {
			return fail("database %q is not a number", path)
		}
		if cluster && db != 0 {
			return fail("a cluster has only database 0")
		}
		o.DB = db
	}

	if mode.tls {
		cfg := &tls.Config{MinVersion: tls.VersionTLS12}
		if base != nil {
			cfg = base.Clone()
		}
		if cfg.ServerName == "" {
			cfg.ServerName, _, _ = net.SplitHostPort(hosts[0])
		}
		o.TLSConfig = cfg
	}

	display := scheme + "://" + hostlist
	if d := strings.Trim(u.Path, "/"); d != "" {
		display += "/" + d
	}
	if o.MasterName != "" {
		display += "?master=" + url.QueryEscape(o.MasterName)
	}
	return &redisTarget{opts: o, display: display}, nil
}

// redisAddr checks one host[:port] of a Redis URL and adds the default port.
func redisAddr(h, defaultPort string) (string, error) {
	if h == "" {
		return "", errors.New("empty host")
	}
	host, port := h, defaultPort
	if strings.HasPrefix(h, "[") || strings.Count(h, ":") == 1 {
		var err error
		if host, port, err = net.SplitHostPort(h); err != nil {
			if !strings.HasSuffix(h, "]") {
				return "", fmt.Errorf("host %q: %v", h, err)
			}
			host, port = strings.Trim(h, "[]"), defaultPort
		}
	} else if strings.Contains(h, ":") {
		return "", fmt.Errorf("host %q: an IPv6 address needs brackets", h)
	}
	if host == "" {
		return "", fmt.Errorf("host %q: empty host", h)
	}
	if strings.ContainsAny(host, " \t\r\n/\\%") {
		return "", fmt.Errorf("host %q: invalid characters", h)
	}
	if n, err := strconv.ParseUint(port, 10, 16); err != nil || n == 0 {
		return "", fmt.Errorf("host %q: invalid port %q", h, port)
	}
	return net.JoinHostPort(host, port), nil
}

// redactRedisURL hides the password of a Redis URL (and of its sentinels),
// so errors and logs can quote the rest.
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
	if i := strings.Index(out, "sentinel_password="); i >= 0 {
		end := strings.IndexAny(out[i:], "&#")
		if end < 0 {
			end = len(out) - i
		}
		out = out[:i] + "sentinel_password=xxxxx" + out[i+end:]
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
