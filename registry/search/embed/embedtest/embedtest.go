// Package embedtest is a real HTTP server on 127.0.0.1 that implements the
// OpenAI embeddings API with a deterministic test model, for tests and for
// checking the mechanics of semantic re-ranking without a real model. Its
// vectors carry no quality: they are hashed bags of character trigrams of
// words, after mapping each word through a small synonym table.
package embedtest

import (
	"encoding/json"
	"hash/fnv"
	"net"
	"net/http"
	"strings"
	"sync"
	"time"
	"unicode"
)

// Dims is the length of the test model's vectors.
const Dims = 256

// Server is a running test embeddings service.
type Server struct {
	URL string // the /v1/embeddings endpoint

	srv *http.Server
	ln  net.Listener

	mu       sync.Mutex
	requests []Request
	fail     int           // status to answer with (0: answer)
	delay    time.Duration // wait before answering (the request context ends it early)
	token    string        // required bearer token ("": none)
	hold     chan struct{} // requests wait until it is closed (nil: none)
	synonyms map[string]string
}

// Request is one request the server received.
type Request struct {
	Model  string
	Inputs []string
	Auth   string
}

// Start starts a server on 127.0.0.1. synonyms maps a word to the word it
// is embedded as ("purge" → "delete"); nil uses none.
func Start(synonyms map[string]string) (*Server, error) {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		return nil, err
	}
	s := &Server{ln: ln, URL: "http://" + ln.Addr().String() + "/v1/embeddings", synonyms: synonyms}
	mux := http.NewServeMux()
	mux.HandleFunc("POST /v1/embeddings", s.handle)
	s.srv = &http.Server{Handler: mux, ReadHeaderTimeout: 5 * time.Second}
	go func() { _ = s.srv.Serve(ln) }()
	return s, nil
}

// Close stops the server.
func (s *Server) Close() error { return s.srv.Close() }

// Requests returns what the server received so far.
func (s *Server) Requests() []Request {
	s.mu.Lock()
	defer s.mu.Unlock()
	return append([]Request(nil), s.requests...)
}

// Inputs returns the number of texts embedded so far.
func (s *Server) Inputs() int {
	n := 0
	for _, r := range s.Requests() {
		n += len(r.Inputs)
	}
	return n
}

// Fail makes the server answer every request with status (0: answer).
func (s *Server) Fail(status int) { s.mu.Lock(); s.fail = status; s.mu.Unlock() }

// Delay makes the server wait d before answering.
func (s *Server) Delay(d time.Duration) { s.mu.Lock(); s.delay = d; s.mu.Unlock() }

// Hold makes requests wait until Release (or until their client gives up).
func (s *Server) Hold() { s.mu.Lock(); s.hold = make(chan struct{}); s.mu.Unlock() }

// Release lets held requests, and later ones, be answered.
func (s *Server) Release() {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.hold != nil {
		close(s.hold)
		s.hold = nil
	}
}

// RequireToken makes the server answer 401 unless Authorization is
// "Bearer "+tok.
func (s *Server) RequireToken(tok string) { s.mu.Lock(); s.token = tok; s.mu.Unlock() }

func (s *Server) handle(w http.ResponseWriter, r *http.Request) {
	var req struct {
		Model string          `json:"model"`
		Input json.RawMessage `json:"input"`
	}
	if err := json.NewDecoder(r.Body).Decode(&req); err != nil {
		writeError(w, http.StatusBadRequest, "invalid JSON: "+err.Error())
		return
	}
	var inputs []string
	if err := json.Unmarshal(req.Input, &inputs); err != nil {
		var one string
		if err := json.Unmarshal(req.Input, &one); err != nil {
			writeError(w, http.StatusBadRequest, "input must be a string or an array of strings")
			return
		}
		inputs = []string{one}
	}
	s.mu.Lock()
	s.requests = append(s.requests, Request{Model: req.Model, Inputs: inputs, Auth: r.Header.Get("Authorization")})
	fail, delay, token, hold := s.fail, s.delay, s.token, s.hold
	s.mu.Unlock()
	if hold != nil {
		select {
		case <-hold:
		case <-r.Context().Done():
			return
		}
	}
	if delay > 0 {
		select {
		case <-time.After(delay):
		case <-r.Context().Done():
			return
		}
	}
	if token != "" && r.Header.Get("Authorization") != "Bearer "+token {
		writeError(w, http.StatusUnauthorized, "invalid api key")
		return
	}
	if fail != 0 {
		writeError(w, fail, "test server told to fail")
		return
	}
	type item struct {
		Object    string    `json:"object"`
		Index     int       `json:"index"`
		Embedding []float64 `json:"embedding"`
	}
	out := struct {
		Object string `json:"object"`
		Data   []item `json:"data"`
		Model  string `json:"model"`
	}{Object: "list", Model: req.Model}
	// Answer in reverse order: clients must place entries by index.
	for i := len(inputs) - 1; i >= 0; i-- {
		out.Data = append(out.Data, item{Object: "embedding", Index: i, Embedding: Vector(req.Model, inputs[i], s.synonyms)})
	}
	w.Header().Set("Content-Type", "application/json")
	_ = json.NewEncoder(w).Encode(out)
}

func writeError(w http.ResponseWriter, status int, msg string) {
	w.Header().Set("Content-Type", "application/json")
	w.WriteHeader(status)
	_ = json.NewEncoder(w).Encode(map[string]any{"error": map[string]string{"message": msg, "type": "invalid_request_error"}})
}

// Vector is the test model's embedding of text: each word (after synonyms)
// adds its character trigrams ("#wo", "wor", "ord", "rd#") to hashed
// dimensions. The model name seeds the hash, so another model gives other
// vectors. The vector is not normalized (clients must do it).
func Vector(model, text string, synonyms map[string]string) []float64 {
	v := make([]float64, Dims)
	for _, w := range strings.FieldsFunc(strings.ToLower(text), func(r rune) bool { return !unicode.IsLetter(r) && !unicode.IsDigit(r) }) {
		if s, ok := synonyms[w]; ok {
			w = s
		}
		if len(w) < 3 || stop[w] {
			continue
		}
		g := "#" + w + "#"
		for i := 0; i+3 <= len(g); i++ {
			h := fnv.New32a()
			h.Write([]byte(model))
			h.Write([]byte{0})
			h.Write([]byte(g[i : i+3]))
			v[h.Sum32()%Dims]++
		}
	}
	// A constant component keeps the vector non-zero for any text.
	v[0] += 0.01
	return v
}

var stop = map[string]bool{"the": true, "and": true, "for": true, "with": true, "from": true, "that": true, "this": true, "all": true, "query": true, "passage": true}
