package oauthclient

import (
	"io"
	"net/http"
)

// Transport sends each request with a Bearer token of Client for Request.
// When the upstream answers 401, the token is evicted from the cache and
// the request is sent once more with a new one (a request whose body
// cannot be replayed is not retried).
type Transport struct {
	Base    http.RoundTripper // nil: http.DefaultTransport
	Client  *Client
	Request Request
}

func (t *Transport) base() http.RoundTripper {
	if t.Base != nil {
		return t.Base
	}
	return http.DefaultTransport
}

// RoundTrip implements http.RoundTripper.
func (t *Transport) RoundTrip(req *http.Request) (*http.Response, error) {
	resp, err := t.send(req, req.Body)
	if err != nil || resp.StatusCode != http.StatusUnauthorized || (req.Body != nil && req.GetBody == nil) {
		return resp, err
	}
	t.Client.Evict(t.Request)
	var body io.ReadCloser
	if req.GetBody != nil {
		if body, err = req.GetBody(); err != nil {
			return resp, nil
		}
	}
	_, _ = io.Copy(io.Discard, io.LimitReader(resp.Body, 64<<10))
	resp.Body.Close()
	return t.send(req, body)
}

func (t *Transport) send(req *http.Request, body io.ReadCloser) (*http.Response, error) {
	tok, err := t.Client.Token(req.Context(), t.Request)
	if err != nil {
		if body != nil {
			body.Close()
		}
		return nil, err
	}
	r := req.Clone(req.Context())
	r.Body = body
	r.Header.Set("Authorization", "Bearer "+tok.AccessToken)
	return t.base().RoundTrip(r)
}
