package registry

import (
	"crypto/tls"
	"slices"
	"strings"
	"testing"

	"github.com/redis/go-redis/v9"
)

func TestParseRedisURL(t *testing.T) {
	type want struct {
		addrs              []string
		db                 int
		user, pass         string
		master             string
		sentUser, sentPass string
		clusterMode        bool   // IsClusterMode
		client             string // what NewUniversalClient builds: single, cluster, sentinel
		tlsName            string // "" for no TLS
		display            string
	}
	tests := []struct {
		url  string
		want want
	}{
		{"redis://127.0.0.1", want{addrs: []string{"127.0.0.1:6379"}, client: "single", display: "redis://127.0.0.1"}},
		{"redis://cache:6380/2", want{addrs: []string{"cache:6380"}, db: 2, client: "single", display: "redis://cache:6380/2"}},
		{"REDIS://cache", want{addrs: []string{"cache:6379"}, client: "single", display: "redis://cache"}},
		{"redis://:p%40ss@cache", want{addrs: []string{"cache:6379"}, pass: "p@ss", client: "single", display: "redis://cache"}},
		{"redis://user:pw@cache:1/0", want{addrs: []string{"cache:1"}, user: "user", pass: "pw", client: "single", display: "redis://cache:1/0"}},
		{"redis://[::1]:7000", want{addrs: []string{"[::1]:7000"}, client: "single", display: "redis://[::1]:7000"}},
		{"redis://[::1]", want{addrs: []string{"[::1]:6379"}, client: "single", display: "redis://[::1]"}},
		{"rediss://u:pw@cache.example:6380", want{addrs: []string{"cache.example:6380"}, user: "u", pass: "pw", client: "single",
			tlsName: "cache.example", display: "rediss://cache.example:6380"}},
		{"redis://a:7000,b:7001,c", want{addrs: []string{"a:7000", "b:7001", "c:6379"}, client: "cluster", display: "redis://a:7000,b:7001,c"}},
		{"rediss://:pw@a,b", want{addrs: []string{"a:6379", "b:6379"}, pass: "pw", client: "cluster", tlsName: "a", display: "rediss://a,b"}},
		{"redis+cluster://cfg.example:6379", want{addrs: []string{"cfg.example:6379"}, clusterMode: true, client: "cluster", display: "redis+cluster://cfg.example:6379"}},
		{"rediss+cluster://:pw@cfg", want{addrs: []string{"cfg:6379"}, pass: "pw", clusterMode: true, client: "cluster", tlsName: "cfg", display: "rediss+cluster://cfg"}},
		{"redis+sentinel://:pw@s1,s2:5000/1?master=mymaster", want{addrs: []string{"s1:26379", "s2:5000"}, db: 1, pass: "pw", master: "mymaster",
			client: "sentinel", display: "redis+sentinel://s1,s2:5000/1?master=mymaster"}},
		{"redis+sentinel://s1?master=m&sentinel_username=su&sentinel_password=sp", want{addrs: []string{"s1:26379"}, master: "m",
			sentUser: "su", sentPass: "sp", client: "sentinel", display: "redis+sentinel://s1?master=m"}},
		{"redis://s1:26379,s2:26379?master=m", want{addrs: []string{"s1:26379", "s2:26379"}, master: "m", client: "sentinel",
			display: "redis://s1:26379,s2:26379?master=m"}},
		{"rediss+sentinel://s1?master=m", want{addrs: []string{"s1:26379"}, master: "m", client: "sentinel", tlsName: "s1", display: "rediss+sentinel://s1?master=m"}},
	}
	for _, tc := range tests {
		t.Run(tc.url, func(t *testing.T) {
			got, err := parseRedisURL(tc.url, nil)
			if err != nil {
				t.Fatalf("parseRedisURL() = %v", err)
			}
			o, w := got.opts, tc.want
			if !slices.Equal(o.Addrs, w.addrs) || o.DB != w.db || o.Username != w.user || o.Password != w.pass ||
				o.MasterName != w.master || o.SentinelUsername != w.sentUser || o.SentinelPassword != w.sentPass || o.IsClusterMode != w.clusterMode {
				t.Errorf("options = addrs %q db %d user %q pass %q master %q sentinel %q/%q clusterMode %v",
					o.Addrs, o.DB, o.Username, o.Password, o.MasterName, o.SentinelUsername, o.SentinelPassword, o.IsClusterMode)
			}
			switch {
			case w.tlsName == "" && o.TLSConfig != nil:
				t.Errorf("TLS set for %s", tc.url)
			case w.tlsName != "" && (o.TLSConfig == nil || o.TLSConfig.ServerName != w.tlsName || o.TLSConfig.MinVersion != tls.VersionTLS12):
				t.Errorf("TLS config = %+v, want server name %q", o.TLSConfig, w.tlsName)
			}
			if got.display != w.display {
				t.Errorf("display = %q, want %q", got.display, w.display)
			}
			// NewUniversalClient does not connect; it only picks the client.
			c := redis.NewUniversalClient(o)
			defer c.Close()
			kind := "single"
			if _, ok := c.(*redis.ClusterClient); ok {
				kind = "cluster"
			} else if o.MasterName != "" {
				kind = "sentinel"
			}
			if kind != w.client {
				t.Errorf("client = %s (%T), want %s", kind, c, w.client)
			}
		})
	}
}

func TestParseRedisURLBaseTLS(t *testing.T) {
	base := &tls.Config{MinVersion: tls.VersionTLS13, ServerName: "pinned"}
	got, err := parseRedisURL("rediss://cache", base)
	if err != nil {
		t.Fatal(err)
	}
	if got.opts.TLSConfig == base || got.opts.TLSConfig.ServerName != "pinned" || got.opts.TLSConfig.MinVersion != tls.VersionTLS13 {
		t.Errorf("TLS config = %+v, want a copy of the base", got.opts.TLSConfig)
	}
	got, _ = parseRedisURL("rediss://cache", &tls.Config{})
	if got.opts.TLSConfig.ServerName != "cache" {
		t.Errorf("server name = %q, want the host", got.opts.TLSConfig.ServerName)
	}
	if got, _ := parseRedisURL("redis://cache", base); got.opts.TLSConfig != nil {
		t.Error("a redis:// URL must not use TLS")
	}
}

func TestParseRedisURLErrors(t *testing.T) {
	for _, tc := range []struct{ url, want string }{
		{"", "want scheme://host"},
		{"cache:6379", "want scheme://host"},
		{"http://cache", "scheme must be"},
		{"unix:///tmp/redis.sock", "scheme must be"},
		{"redis://", "empty host"},
		{"redis://a,,b", "empty host"},
		{"redis://cache:0", "invalid port"},
		{"redis://cache:99999", "invalid port"},
		{"redis://cache:x", "invalid port"},
		{"redis://cache:", "invalid port"},
		{"redis://::1", "needs brackets"},
		{"redis://cache/x", `database "x" is not a number`},
		{"redis://cache/1/2", "path must be /db"},
		{"redis://a,b/1", "a cluster has only database 0"},
		{"redis+cluster://a/2", "a cluster has only database 0"},
		{"redis+sentinel://s1", "needs ?master=NAME"},
		{"redis+cluster://a?master=m", "cannot have it"},
		{"redis://cache?sentinel_password=x", "sentinel credentials without ?master="},
		{"redis://cache?dial_timeout=1", `unknown query parameter "dial_timeout"`},
		{"redis://cache?master=a&master=b", "given 2 times"},
		{"redis://cache#frag", "fragment"},
		{"redis://:secret@cache:bad", "invalid port"},
	} {
		_, err := parseRedisURL(tc.url, nil)
		if err == nil || !strings.Contains(err.Error(), tc.want) {
			t.Errorf("parseRedisURL(%q) = %v, want %q", tc.url, err, tc.want)
			continue
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
		"redis+sentinel://s?master=m&sentinel_password=pw&x=1": "redis+sentinel://s?master=m&sentinel_password=xxxxx&x=1",
	} {
		if got := redactRedisURL(in); got != want {
			t.Errorf("redactRedisURL(%q) = %q, want %q", in, got, want)
		}
	}
}

func FuzzParseRedisURL(f *testing.F) {
	for _, seed := range []string{
		"redis://:pw@h:1/0", "rediss://a,b", "redis+sentinel://s?master=m&sentinel_password=pw",
		"redis://[::1]:7000", "redis+cluster://x", "redis://a:b@c:d@e", "redis://%zz@h",
	} {
		f.Add(seed)
	}
	f.Fuzz(func(t *testing.T, raw string) {
		got, err := parseRedisURL(raw, nil)
		if err != nil {
			return
		}
		if len(got.opts.Addrs) == 0 {
			t.Fatalf("%q: no address", raw)
		}
		if strings.Contains(got.display, "@") {
			t.Fatalf("%q: display %q shows user info", raw, got.display)
		}
	})
}
