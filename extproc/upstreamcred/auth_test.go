package upstreamcred

import (
	"strings"
	"testing"

	"github.com/toolmesh/toolmesh/internal/config"
)

func TestUpstreamAuthValidate(t *testing.T) {
	creds := map[string]config.CredentialSource{"tok": {Env: "TOK"}}
	for _, tc := range []struct {
		name string
		a    ServiceAuth
		want string // "" valid; else a part of the error
	}{
		{"credential", ServiceAuth{Credential: "tok", Prefix: "Bearer "}, ""},
		{"claims", ServiceAuth{ForwardClaims: map[string]string{"x-caller-sub": "sub"}}, ""},
		{"token and claims", ServiceAuth{ForwardToken: true, ForwardClaims: map[string]string{"x-caller-sub": "sub"}}, ""},
		{"credential in another header", ServiceAuth{Credential: "tok", Header: "X-Api-Key"}, ""},
		{"empty", ServiceAuth{}, "upstreamAuth.svc.credential: the entry sends nothing"},
		{"unknown credential", ServiceAuth{Credential: "nope"}, `upstreamAuth.svc.credential: "nope" is not defined in credentials`},
		{"credential and token", ServiceAuth{Credential: "tok", ForwardToken: true}, "upstreamAuth.svc.forwardToken: exclusive with credential"},
		{"reserved header", ServiceAuth{Credential: "tok", Header: "Host"}, "upstreamAuth.svc.header"},
		{"toolmesh header", ServiceAuth{ForwardClaims: map[string]string{"x-toolmesh-cluster": "sub"}}, "upstreamAuth.svc.forwardClaims.x-toolmesh-cluster"},
		{"bad header name", ServiceAuth{ForwardClaims: map[string]string{"x caller": "sub"}}, "not a valid HTTP header name"},
		{"claim into the credential header", ServiceAuth{Credential: "tok", ForwardClaims: map[string]string{"Authorization": "sub"}}, "already carries the credential"},
		{"prefix without credential", ServiceAuth{ForwardToken: true, Prefix: "Bearer "}, "upstreamAuth.svc.prefix"},
		{"prefix with a line break", ServiceAuth{Credential: "tok", Prefix: "Bearer\r\n"}, "control characters"},
		{"empty claim", ServiceAuth{ForwardClaims: map[string]string{"x-caller-sub": ""}}, "the claim name is empty"},
		{"oauth exchange", ServiceAuth{OAuth: &OAuth{Mode: ModeTokenExchange, Issuer: "https://as.example.com", ClientID: "gw", ClientSecret: "tok", Audience: []string{"x"}}}, ""},
		{"oauth client credentials, private key", ServiceAuth{OAuth: &OAuth{Mode: ModeClientCredentials, TokenURL: "https://as.example.com/t", ClientID: "gw", AuthMethod: "private_key_jwt", PrivateKey: "tok"}}, ""},
		{"oauth bad mode", ServiceAuth{OAuth: &OAuth{Mode: "password", Issuer: "https://as", ClientID: "gw", ClientSecret: "tok"}}, `upstreamAuth.svc.oauth.mode: "password"`},
		{"oauth http issuer", ServiceAuth{OAuth: &OAuth{Mode: ModeClientCredentials, Issuer: "http://as.example.com", ClientID: "gw", ClientSecret: "tok"}}, "upstreamAuth.svc.oauth.issuer"},
		{"oauth undefined secret", ServiceAuth{OAuth: &OAuth{Mode: ModeClientCredentials, Issuer: "https://as", ClientID: "gw", ClientSecret: "nope"}}, `upstreamAuth.svc.oauth.clientSecret: "nope" is not defined`},
		{"oauth no client id", ServiceAuth{OAuth: &OAuth{Mode: ModeClientCredentials, Issuer: "https://as", ClientSecret: "tok"}}, "upstreamAuth.svc.oauth.clientId is required"},
		{"oauth actor without exchange", ServiceAuth{OAuth: &OAuth{Mode: ModeClientCredentials, Issuer: "https://as", ClientID: "gw", ClientSecret: "tok", Actor: true}}, "upstreamAuth.svc.oauth.actor"},
		{"oauth and credential", ServiceAuth{Credential: "tok", OAuth: &OAuth{Mode: ModeClientCredentials, Issuer: "https://as", ClientID: "gw", ClientSecret: "tok"}}, "upstreamAuth.svc.oauth: exclusive with credential"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			err := Auth{Services: map[string]ServiceAuth{"svc": tc.a}, Credentials: creds}.Validate()
			switch {
			case tc.want == "" && err != nil:
				t.Errorf("unexpected error: %v", err)
			case tc.want != "" && (err == nil || !strings.Contains(err.Error(), tc.want)):
				t.Errorf("error %v, want one containing %q", err, tc.want)
			}
		})
	}
}
