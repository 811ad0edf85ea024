package app

import (
	"os"
	"path/filepath"
	"reflect"
	"strings"
	"testing"
	"time"

	"github.com/spf13/pflag"

	"github.com/toolmesh/toolmesh/extproc/authz"
	"github.com/toolmesh/toolmesh/internal/config"
	"github.com/toolmesh/toolmesh/registry"
)

func TestLoadConfig(t *testing.T) {
	dir := t.TempDir()
	portal := filepath.Join(dir, "portal.yaml")
	if err := os.WriteFile(portal, []byte("routes: []\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	write := func(name, body string) string {
		p := filepath.Join(dir, name)
		if err := os.WriteFile(p, []byte(body), 0o600); err != nil {
			t.Fatal(err)
		}
		return p
	}
	good := write("good.yaml", `
portal: `+portal+`
listen: 127.0.0.1:18080
extprocListen: 127.0.0.1:19002
xdsListen: 127.0.0.1:28000
adminListen: 127.0.0.1:19090
refreshInterval: 10s
retryBackoff: 500ms
retryBackoffMax: 5s
allowedOrigins: ["https://app.example.com", "http://localhost:*"]
allowedHosts: [gateway.example.com]
maxBodyBytes: 2097152
maxResponseBytes: 8388608
messageTimeout: 3s
serverName: acme-tools
grpcKeepaliveMinTime: 20s
grpcKeepaliveTime: 2m
grpcKeepaliveTimeout: 10s
drainDelay: 0s
logLevel: debug
logFormat: json
`)
	goodJSON := write("good.json", `{"listen": "127.0.0.1:18081", "refreshInterval": "1m"}`)

	withDefaults := func(f func(*Config)) Config {
		c := defaultConfig()
		f(&c)
		return c
	}
	tests := []struct {
		name    string
		args    []string
		want    Config
		wantErr []string // substrings of the error
	}{
		{name: "defaults", args: nil, want: defaultConfig()},
		{name: "empty file", args: []string{"--config", write("empty.yaml", "\n")}, want: defaultConfig()},
		{name: "good file", args: []string{"--config", good}, want: withDefaults(func(c *Config) {
			c.Portal = portal
			c.Listen = "127.0.0.1:18080"
			c.ExtProcListen = "127.0.0.1:19002"
			c.XDSListen = "127.0.0.1:28000"
			c.AdminListen = "127.0.0.1:19090"
			c.RefreshInterval = config.Duration(10 * time.Second)
			c.RetryBackoff = config.Duration(500 * time.Millisecond)
			c.RetryBackoffMax = config.Duration(5 * time.Second)
			c.AllowedOrigins = []string{"https://app.example.com", "http://localhost:*"}
			c.AllowedHosts = []string{"gateway.example.com"}
			c.MaxBodyBytes = 2 << 20
			c.MaxResponseBytes = 8 << 20
			c.MessageTimeout = config.Duration(3 * time.Second)
			c.ServerName = "acme-tools"
			c.GRPCKeepaliveMinTime = config.Duration(20 * time.Second)
			c.GRPCKeepaliveTime = config.Duration(2 * time.Minute)
			c.GRPCKeepaliveTimeout = config.Duration(10 * time.Second)
			c.DrainDelay = 0
			c.LogLevel = "debug"
			c.LogFormat = "json"
		})},
		{name: "json file", args: []string{"--config", goodJSON}, want: withDefaults(func(c *Config) {
			c.Listen = "127.0.0.1:18081"
			c.RefreshInterval = config.Duration(time.Minute)
		})},
		{name: "flags override the file", args: []string{"--config", good,
			"--listen", "127.0.0.1:0", "--refresh-interval", "2s", "--allowed-origins", "https://a.example,https://b.example",
			"--log-level", "warn", "--max-body-bytes", "1024", "--message-timeout", "9s",
			"--grpc-keepalive-min-time", "5s", "--grpc-keepalive-time", "30s", "--grpc-keepalive-timeout", "3s", "--drain-delay", "15s"},
			want: withDefaults(func(c *Config) {
				c.Portal = portal
				c.Listen = "127.0.0.1:0"
				c.ExtProcListen = "127.0.0.1:19002"
				c.XDSListen = "127.0.0.1:28000"
				c.AdminListen = "127.0.0.1:19090"
				c.RefreshInterval = config.Duration(2 * time.Second)
				c.RetryBackoff = config.Duration(500 * time.Millisecond)
				c.RetryBackoffMax = config.Duration(5 * time.Second)
				c.AllowedOrigins = []string{"https://a.example", "https://b.example"}
				c.AllowedHosts = []string{"gateway.example.com"}
				c.MaxBodyBytes = 1024
				c.MaxResponseBytes = 8 << 20
				c.MessageTimeout = config.Duration(9 * time.Second)
				c.ServerName = "acme-tools"
				c.GRPCKeepaliveMinTime = config.Duration(5 * time.Second)
				c.GRPCKeepaliveTime = config.Duration(30 * time.Second)
				c.GRPCKeepaliveTimeout = config.Duration(3 * time.Second)
				c.DrainDelay = config.Duration(15 * time.Second)
				c.LogLevel = "warn"
				c.LogFormat = "json"
			})},
		// YAML 1.1 reads an unquoted off as false.
		{name: "deadline off, unquoted", args: []string{"--config", write("off.yaml", "federatedStreamDeadline: off\n")},
			want: withDefaults(func(c *Config) { c.FederatedStreamDeadline = "off" })},
		{name: "deadline off, quoted", args: []string{"--config", write("offq.yaml", "federatedStreamDeadline: \"off\"\n")},
			want: withDefaults(func(c *Config) { c.FederatedStreamDeadline = "off" })},
		{name: "deadline on", args: []string{"--config", write("on.yaml", "federatedStreamDeadline: on\n")},
			wantErr: []string{"federatedStreamDeadline must be route or off"}},
		{name: "unknown field", args: []string{"--config", write("unknown.yaml", "listen: 127.0.0.1:1\nrefreshIntervall: 5s\n")},
			wantErr: []string{`unknown field "refreshIntervall"`}},
		{name: "bad duration", args: []string{"--config", write("dur.yaml", "refreshInterval: soon\n")},
			wantErr: []string{`invalid duration "soon"`}},
		{name: "bare number duration", args: []string{"--config", write("num.yaml", "messageTimeout: 5\n")},
			wantErr: []string{"duration must be a string"}},
		{name: "not YAML", args: []string{"--config", write("bad.yaml", "listen: [\n")}, wantErr: []string{"bad.yaml"}},
		{name: "missing file", args: []string{"--config", filepath.Join(dir, "nope.yaml")}, wantErr: []string{"read config"}},
		{name: "every invalid field at once", args: []string{"--config", write("invalid.yaml", `
portal: `+filepath.Join(dir, "missing-portal.yaml")+`
listen: "8080"
adminListen: ":9090"
xdsListen: 127.0.0.1:99999
refreshInterval: 1ms
retryBackoff: 1ms
retryBackoffMax: 5ms
messageTimeout: 2h
federatedStreamTimeout: 48h
federatedStreamDeadline: never
maxBodyBytes: -1
allowedOrigins: [""]
logLevel: loud
logFormat: xml
grpcKeepaliveTime: 10ms
grpcKeepaliveTimeout: 0s
drainDelay: 10m
`)}, wantErr: []string{"portal:", "listen (--listen):", "adminListen (--admin-listen):", "xdsListen (--xds-listen):", "refreshInterval:", "retryBackoff:", "retryBackoffMax:", "messageTimeout:",
			"federatedStreamTimeout:", "federatedStreamDeadline:", "maxBodyBytes:", "allowedOrigins[0]:", "logLevel:", "logFormat:", "grpcKeepaliveTime:", "grpcKeepaliveTimeout:", "drainDelay:"}},
		// Envoy pings every 30s (envoy/*.yaml connection_keepalive); a MinTime
		// at or above it, or 0 (grpc-go's 5m default), closes its connections.
		{name: "keepalive min time at the bootstrap interval", args: []string{"--grpc-keepalive-min-time", "30s"},
			wantErr: []string{"grpcKeepaliveMinTime: 30s", "too_many_pings"}},
		{name: "keepalive min time zero", args: []string{"--config", write("ka0.yaml", "grpcKeepaliveMinTime: 0s\n")},
			wantErr: []string{"grpcKeepaliveMinTime: 0s"}},
		{name: "drain delay zero", args: []string{"--drain-delay", "0s"}, want: withDefaults(func(c *Config) { c.DrainDelay = 0 })},
		{name: "credentials", args: []string{"--config", write("creds.yaml", "credentials:\n  gh: {file: /run/secrets/gh}\n  docs: {env: DOCS_KEY}\n")},
			want: withDefaults(func(c *Config) {
				c.Credentials = map[string]config.CredentialSource{"gh": {File: "/run/secrets/gh"}, "docs": {Env: "DOCS_KEY"}}
			})},
		{name: "bad credentials", args: []string{"--config", write("badcreds.yaml", "credentials:\n  both: {file: f, env: E}\n  none: {}\n")},
			wantErr: []string{"credentials.both: file and env are exclusive", "credentials.none: one of file and env is required"}},
		{name: "listingBounds", args: []string{"--config", write("lb.yaml", "listingBounds: {tools: 500, bytes: 1048576}\n")},
			want: withDefaults(func(c *Config) {
				c.ListingBounds = &registry.ListingBounds{Tools: ptr(int64(500)), Bytes: ptr(int64(1 << 20))}
			})},
		{name: "bad listingBounds", args: []string{"--config", write("badlb.yaml", "listingBounds: {tools: 0, prompts: 100001, bytes: 300000000}\n")},
			wantErr: []string{"listingBounds.tools: 0 is not between 1 and 100000", "listingBounds.prompts: 100001 is not between 1 and 100000",
				"listingBounds.bytes: 300000000 is not between 1 and 268435456"}},
		{name: "embeddings", args: []string{"--config", write("emb.yaml", "credentials:\n  tei: {env: TEI_TOKEN}\n"+
			"embeddings:\n  e5: {url: \"http://tei:8080/v1/embeddings\", model: e5-small, credential: tei, timeout: 200ms, batchSize: 16, queryPrefix: \"query: \", documentPrefix: \"passage: \"}\n"+
			"defaultEmbedding: e5\ncatalogs:\n  small: {mode: search, embedding: none}\n")},
			want: withDefaults(func(c *Config) {
				c.Credentials = map[string]config.CredentialSource{"tei": {Env: "TEI_TOKEN"}}
				c.Embeddings = map[string]registry.EmbeddingService{"e5": {URL: "http://tei:8080/v1/embeddings", Model: "e5-small", Credential: "tei",
					Timeout: config.Duration(200 * time.Millisecond), BatchSize: 16, QueryPrefix: "query: ", DocumentPrefix: "passage: "}}
				c.DefaultEmbedding = "e5"
				c.Catalogs = map[string]registry.Catalog{"small": {Mode: "search", Embedding: "none"}}
			})},
		{name: "bad embeddings", args: []string{"--config", write("bademb.yaml",
			"embeddings:\n  e5: {url: \"tei:8080\", model: m, credential: nope}\n  x: {url: \"http://x/v1/embeddings\", minSimilarity: 2}\n"+
				"defaultEmbedding: e6\ncatalogs:\n  big: {mode: search, embedding: other}\n")},
			wantErr: []string{`embeddings.e5.credential: "nope" is not defined`, `embeddings.x.minSimilarity: 2 is not in 0..1`,
				`defaultEmbedding: "e6" is not a key of embeddings`, `catalogs.big.embedding: "other" is not a key of embeddings`}},
		{name: "inline credential value", args: []string{"--config", write("inline.yaml", "credentials:\n  gh: {value: ghp_x}\n")},
			wantErr: []string{`unknown field "value"`}},
		{name: "policies", args: []string{"--config", write("pol.yaml", "policies:\n  routes:\n    core:\n"+
			"      - {name: admins-only-destructive, effect: deny, when: 'tool.annotations.destructiveHint && !(\"admin\" in caller.claims.roles)'}\n"+
			"  default: []\n")},
			want: withDefaults(func(c *Config) {
				c.Policies = &authz.Config{Routes: map[string][]authz.Policy{"core": {{Name: "admins-only-destructive", Effect: "deny",
					When: `tool.annotations.destructiveHint && !("admin" in caller.claims.roles)`}}}, Default: []authz.Policy{}}
			})},
		{name: "bad policies", args: []string{"--config", write("badpol.yaml", "policies:\n  routes:\n    core:\n"+
			"      - {name: typo, effect: deny, when: 'caller.claim.roles == []'}\n      - {name: int, effect: allow, when: '1'}\n")},
			wantErr: []string{`policies: routes.core policy "typo": `, "undefined field 'claim'", `routes.core policy "int": when is of type int, not bool`}},
		{name: "portal URL", args: []string{"--portal", "https://portal.example.com/base"}, want: withDefaults(func(c *Config) {
			c.Portal = "https://portal.example.com/base"
		})},
		{name: "portal bad URL", args: []string{"--portal", "ftp://portal.example.com"}, wantErr: []string{"portal:"}},
		{name: "portal directory", args: []string{"--portal", dir}, wantErr: []string{"is a directory"}},
		{name: "bad flag duration", args: []string{"--refresh-interval", "often"}, wantErr: []string{"often"}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			fs := pflag.NewFlagSet("test", pflag.ContinueOnError)
			bindFlags(fs, flagSet{portal: true, listen: true, extproc: true, xds: true})
			var got Config
			err := fs.Parse(tt.args)
			if err == nil {
				got, err = loadConfig(fs)
			}
			if len(tt.wantErr) > 0 {
				if err == nil {
					t.Fatalf("no error, want %q", tt.wantErr)
				}
				for _, w := range tt.wantErr {
					if !strings.Contains(err.Error(), w) {
						t.Errorf("error %q does not mention %q", err, w)
					}
				}
				return
			}
			if err != nil {
				t.Fatal(err)
			}
			if !reflect.DeepEqual(got, tt.want) {
				t.Errorf("config = %+v\nwant     %+v", got, tt.want)
			}
		})
	}
}

// TestConfigFieldsDocumented keeps every Config field commented, because
// the struct is the reference of the config file.
func TestConfigFieldsDocumented(t *testing.T) {
	src, err := os.ReadFile("config.go")
	if err != nil {
		t.Fatal(err)
	}
	for _, f := range configKeys() {
		tag := strings.Split(f.Tag.Get("json"), ",")[0]
		if tag == "" {
			t.Errorf("field %s has no json name", f.Name)
		}
		// The line before the field's declaration must be a comment.
		idx := strings.Index(string(src), "\t"+f.Name+" ")
		if idx < 0 {
			t.Fatalf("field %s not found in config.go", f.Name)
		}
		before := strings.TrimRight(string(src[:idx]), "\n\t ")
		last := before[strings.LastIndex(before, "\n")+1:]
		if !strings.HasPrefix(strings.TrimSpace(last), "//") {
			t.Errorf("field %s (%s) has no comment", f.Name, tag)
		}
	}
}

func ptr[T any](v T) *T { return &v }
