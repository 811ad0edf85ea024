package redisstore

import (
	"crypto/tls"
	"math"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"
)

// redisTargetSummary is what a test compares of a parsed URL.
type redisTargetSummary struct {
	kind               string // single, cluster, sentinel
	addrs              []string
	db                 int
	user, pass         string
	master             string
	sentUser, sentPass string
	poolSize           int
	tls                *tls.Config
}

func summarize(t *redisTarget) redisTargetSummary {
	switch {
	case t.cluster != nil:
		o := t.cluster
		return redisTargetSummary{kind: "cluster", addrs: o.Addrs, user: o.Username, pass: o.Password, poolSize: o.PoolSize, tls: o.TLSConfig}
	case t.failover != nil:
		o := t.failover
		return redisTargetSummary{kind: "sentinel", addrs: o.SentinelAddrs, db: o.DB, user: o.Username, pass: o.Password,
			master: o.MasterName, sentUser: o.SentinelUsername, sentPass: o.SentinelPassword, poolSize: o.PoolSize, tls: o.TLSConfig}
	default:
		o := t.single
		return redisTargetSummary{kind: "single", addrs: []string{o.Addr}, db: o.DB, user: o.Username, pass: o.Password, poolSize: o.PoolSize, tls: o.TLSConfig}
	}
}

func TestParseRedisURL(t *testing.T) {
	type want struct {
		redisTargetSummary
		tlsName string // "" for no TLS
		display string
	}
	type s = redisTargetSummary
	tests := []struct {
		url  string
		want want
	}{
		{"redis://127.0.0.1", want{s{kind: "single", addrs: []string{"127.0.0.1:6379"}}, "", "redis://127.0.0.1"}},
		{"redis://cache:6380/2", want{s{kind: "single", addrs: []string{"cache:6380"}, db: 2}, "", "redis://cache:6380/2"}},
		{"REDIS://cache", want{s{kind: "single", addrs: []string{"cache:6379"}}, "", "redis://cache"}},
		{"redis://:p%40ss@cache", want{s{kind: "single", addrs: []string{"cache:6379"}, pass: "p@ss"}, "", "redis://cache"}},
		{"redis://user:pw@cache:1/0", want{s{kind: "single", addrs: []string{"cache:1"}, user: "user", pass: "pw"}, "", "redis://cache:1/0"}},
		{"redis://[::1]:7000", want{s{kind: "single", addrs: []string{"[::1]:7000"}}, "", "redis://[::1]:7000"}},
		{"redis://[::1]", want{s{kind: "single", addrs: []string{"[::1]:6379"}}, "", "redis://[::1]"}},
		{"redis://cache?pool_size=4&db=3", want{s{kind: "single", addrs: []string{"cache:6379"}, db: 3, poolSize: 4}, "", "redis://cache?db=3"}},
		{"rediss://u:pw@cache.example:6380", want{s{kind: "single", addrs: []string{"cache.example:6380"}, user: "u", pass: "pw"},
			"cache.example", "rediss://cache.example:6380"}},
		{"redis+cluster://cfg.example:6379", want{s{kind: "cluster", addrs: []string{"cfg.example:6379"}}, "", "redis+cluster://cfg.example:6379"}},
		{"redis+cluster://a:7000?addr=b:7001&addr=c:7002", want{s{kind: "cluster", addrs: []string{"a:7000", "b:7001", "c:7002"}}, "",
			"redis+cluster://a:7000?addr=b:7001&addr=c:7002"}},
		{"redis+cluster://a/0", want{s{kind: "cluster", addrs: []string{"a:6379"}}, "", "redis+cluster://a/0"}},
		{"rediss+cluster://:pw@cfg", want{s{kind: "cluster", addrs: []string{"cfg:6379"}, pass: "pw"}, "cfg", "rediss+cluster://cfg"}},
		{"redis+sentinel://su:sp@s1:26379/1?master_name=mymaster&addr=s2:5000&username=u&password=pw",
			want{s{kind: "sentinel", addrs: []string{"s1:26379", "s2:5000"}, db: 1, user: "u", pass: "pw", master: "mymaster", sentUser: "su", sentPass: "sp"},
				"", "redis+sentinel://s1:26379/1?master_name=mymaster&addr=s2:5000"}},
		{"redis+sentinel://s1:26379?master_name=m%20x", want{s{kind: "sentinel", addrs: []string{"s1:26379"}, master: "m x"}, "",
			"redis+sentinel://s1:26379?master_name=m+x"}},
		{"rediss+sentinel://s1:26379?master_name=m", want{s{kind: "sentinel", addrs: []string{"s1:26379"}, master: "m"}, "s1",
			"rediss+sentinel://s1:26379?master_name=m"}},
	}
	for _, tc := range tests {
		t.Run(tc.url, func(t *testing.T) {
			target, err := parseRedisURL(tc.url, nil)
			if err != nil {
				t.Fatalf("parseRedisURL() = %v", err)
			}
			got, w := summarize(target), tc.want
			if got.kind != w.kind || !slices.Equal(got.addrs, w.addrs) || got.db != w.db || got.user != w.user || got.pass != w.pass ||
				got.master != w.master || got.sentUser != w.sentUser || got.sentPass != w.sentPass || got.poolSize != w.poolSize {
				t.Errorf("options = %+v, want %+v", got, w.redisTargetSummary)
			}
			switch {
			case w.tlsName == "" && got.tls != nil:
				t.Errorf("TLS set for %s", tc.url)
			case w.tlsName != "" && (got.tls == nil || got.tls.ServerName != w.tlsName || got.tls.MinVersion != tls.VersionTLS12):
				t.Errorf("TLS config = %+v, want server name %q", got.tls, w.tlsName)
			}
			if target.display != w.display {
				t.Errorf("display = %q, want %q", target.display, w.display)
			}
			// The client does not connect; check it is of the kind parsed,
			// with toolmesh's bounds.
			c, err := target.client(1500 * time.Millisecond)
			if err != nil {
				t.Fatal(err)
			}
			defer c.Close()
			var kind string
			var read time.Duration
			var ctxTimeout bool
			var name string
			switch c := c.(type) {
			case *redis.ClusterClient:
				o := c.Options()
				kind, read, ctxTimeout, name = "cluster", o.ReadTimeout, o.ContextTimeoutEnabled, o.ClientName
			case *redis.Client:
				o := c.Options()
				kind, read, ctxTimeout, name = "single", o.ReadTimeout, o.ContextTimeoutEnabled, o.ClientName
				if target.failover != nil {
					kind = "sentinel" // NewFailoverClient is a *redis.Client too
				}
			}
			if kind != w.kind {
				t.Errorf("client = %T, want %s", c, w.kind)
			}
			if read != 1500*time.Millisecond || !ctxTimeout || name != "toolmesh" {
				t.Errorf("client options: read timeout %v, context timeout %v, name %q", read, ctxTimeout, name)
			}
		})
	}
}

func TestParseRedisURLBaseTLS(t *testing.T) {
	base := &tls.Config{MinVersion: tls.VersionTLS13, ServerName: "pinned"}
	for _, u := range []string{"rediss://cache", "rediss+cluster://cache", "rediss+sentinel://cache:26379?master_name=m"} {
		got, err := parseRedisURL(u, base)
		if err != nil {
			t.Fatal(err)
		}
		cfg := summarize(got).tls
		if cfg == base || cfg.ServerName != "pinned" || cfg.MinVersion != tls.VersionTLS13 {
			t.Errorf("%s: TLS config = %+v, want a copy of the base", u, cfg)
		}
		got, _ = parseRedisURL(u, &tls.Config{})
		if cfg := summarize(got).tls; cfg.ServerName != "cache" || cfg.MinVersion != tls.VersionTLS12 {
			t.Errorf("%s: TLS config = %+v, want the host as server name, TLS 1.2 at least", u, cfg)
		}
	}
	got, _ := parseRedisURL("rediss://cache?skip_verify=true", base)
	if !got.single.TLSConfig.InsecureSkipVerify {
		t.Error("skip_verify=true lost on a base TLS config")
	}
	if got, _ := parseRedisURL("redis://cache", base); got.single.TLSConfig != nil {
		t.Error("a redis:// URL must not use TLS")
	}
}

func TestParseRedisURLErrors(t *testing.T) {
	for _, tc := range []struct{ url, want string }{
		{"", "want scheme://host"},
		{"cache:6379", "want scheme://host"},
		{"http://cache", "scheme must be"},
		{"redis+ring://cache", "scheme must be"},
		{"unix:///tmp/redis.sock", "scheme must be"},
		{"redis://", "empty host"},
		{"redis://u:p@/0", "empty host"},
		{"redis://cache:0", "invalid port"},
		{"redis://cache:99999", "invalid port"},
		{"redis://cache:x", "invalid port"},
		{"redis://cache:", "invalid port"},
		{"redis://::1", "needs brackets"},
		{"redis://cache/x", `invalid database number: "x"`},
		{"redis://cache/1/2", "invalid URL path"},
		{"redis://cache/-1", "database -1 is negative"},
		{"redis+cluster://a/2", "a cluster has only database 0"},
		{"redis+cluster://a?db=2", "unexpected option: db"},
		{"redis+cluster://a?addr=b", `addr: host "b": needs a port`},
		{"redis+cluster://a?addr=b:0", "invalid port"},
		{"redis+sentinel://s1:26379", "needs ?master_name=NAME"},
		{"redis+sentinel://s1?master_name=m", `sentinel host "s1" needs its port`},
		{"redis+sentinel://s1:26379?master_name=a&master_name=b", "given 2 times"},
		{"redis://cache?dial_timeout=1", `"dial_timeout" is set by toolmesh: the config key redisTimeout bounds every operation`},
		{"redis+cluster://cache?max_retries=3", `"max_retries" is set by toolmesh`},
		{"redis+sentinel://s:1?master_name=m&replica_only=true", `"replica_only" is set by toolmesh`},
		{"redis://cache?nope=1", "unexpected option: nope"},
		{"redis://cache?pool_size=x", "invalid pool_size number"},
		{"redis://cache#frag", "fragment"},
		{"redis://cache?pool_size=3000000000", `"pool_size": 3000000000 is out of range`},
		{"redis+cluster://cache?min_idle_conns=-3000000000", "out of range"},
		{"redis+sentinel://s:1?master_name=m&route_by_latency=true", "the store needs the master"},
		{"redis+sentinel://s:1?master_name=m&route_randomly=1", "the store needs the master"},
		{"redis://:secret@cache:bad", "invalid port"},
		{"redis://:secret@cache?password=secret", "unexpected option: password"},
		{"redis+sentinel://s:1?master_name=m&password=secret&x=1", "unexpected option: x"},
		{"redis://cache?addr=b:1", "use redis+cluster:// or redis+sentinel://"},
		{"redis://cache?master_name=m", "use redis+sentinel://"},
		// The forms of toolmesh's own parser, refused with the new spelling.
		{"redis://a:7000,b:7001", "comma-separated hosts are no longer accepted: for a Redis Cluster write redis+cluster://h1:6379?addr=h2:6379"},
		{"redis+cluster://a,b", "comma-separated hosts are no longer accepted"},
		{"redis+sentinel://s1,s2?master=m", "write redis+sentinel://s1:26379?master_name=NAME&addr=s2:26379"},
		{"redis+sentinel://s1:26379?master=m", "?master= is now ?master_name="},
		{"redis://s1:26379?master=m", "?master= is now ?master_name="},
		{"redis+sentinel://s1:26379?master_name=m&sentinel_password=secret", "the user info of a redis+sentinel:// URL authenticates to the sentinels"},
	} {
		_, err := parseRedisURL(tc.url, nil)
		if err == nil || !strings.Contains(err.Error(), tc.want) {
			t.Errorf("parseRedisURL(%q) = %v, want %q", tc.url, err, tc.want)
			continue
		}
		if !strings.Contains(err.Error(), "(--redis, config key redis)") {
			t.Errorf("parseRedisURL(%q) = %v: the error must name the flag and the config key", tc.url, err)
		}
		if strings.Contains(err.Error(), "secret") {
			t.Errorf("parseRedisURL(%q) error shows the password: %v", tc.url, err)
		}
	}
}

func TestRedactRedisURL(t *testing.T) {
	for in, want := range map[string]string{
		"redis://:pw@h":    "redis://:xxxxx@h",
		"redis://u:pw@h/1": "redis://u:xxxxx@h/1",
		"redis://u@h":      "redis://u@h",
		"redis://h":        "redis://h",
		"redis+sentinel://s?master=m&sentinel_password=pw&x=1":          "redis+sentinel://s?master=m&sentinel_password=xxxxx&x=1",
		"redis+sentinel://a:b@s:1?master_name=m&password=pw&username=u": "redis+sentinel://a:xxxxx@s:1?master_name=m&password=xxxxx&username=u",
		"redis://h?PASSWORD=pw#f":                                       "redis://h?PASSWORD=xxxxx#f",
	} {
		if got := redactRedisURL(in); got != want {
			t.Errorf("redactRedisURL(%q) = %q, want %q", in, got, want)
		}
	}
}

func FuzzParseRedisURL(f *testing.F) {
	for _, seed := range []string{
		"redis://:pw@h:1/0", "redis+cluster://a?addr=b:1", "redis+sentinel://s:1?master_name=m&password=pw",
		"redis://[::1]:7000", "redis+cluster://x", "redis://a:b@c:d@e", "redis://%zz@h",
	} {
		f.Add(seed)
	}
	f.Fuzz(func(t *testing.T, raw string) {
		got, err := parseRedisURL(raw, nil)
		if err != nil {
			return
		}
		if s := summarize(got); len(s.addrs) == 0 || s.addrs[0] == "" {
			t.Fatalf("%q: no address", raw)
		}
		if strings.Contains(got.display, "@") {
			t.Fatalf("%q: display %q shows user info", raw, got.display)
		}
	})
}

// TestRedisClientPanicIsError: an option go-redis's constructors panic on
// becomes an error naming the flag, not a crash.
func TestRedisClientPanicIsError(t *testing.T) {
	for _, target := range []*redisTarget{
		{single: &redis.Options{Addr: "127.0.0.1:1", PoolSize: math.MaxInt32 + 1}, display: "redis://127.0.0.1:1"},
		{failover: &redis.FailoverOptions{MasterName: "m", SentinelAddrs: []string{"127.0.0.1:1"}, RouteRandomly: true}, display: "redis+sentinel://127.0.0.1:1"},
	} {
		c, err := target.client(time.Second)
		if err == nil || c != nil || !strings.Contains(err.Error(), "(--redis, config key redis): go-redis refused the options") {
			t.Errorf("client(%s) = %v, %v", target.display, c, err)
		}
	}
}
