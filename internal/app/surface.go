package app

import (
	"cmp"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"net/http"
	"time"

	"github.com/toolmesh/toolmesh/registry"
	"github.com/toolmesh/toolmesh/registry/redisstore"
	"github.com/toolmesh/toolmesh/registry/surface"
)

// Pinned tool definitions and virtual tools (docs/surface.md): the config's
// surface block, the pin store, and the admin API that accepts or rejects
// a held-back definition.

// pinStore is where pins live: beside the snapshots in Redis when the
// snapshot store is Redis (every replica agrees, and pins survive a
// restart), else in this process.
func pinStore(cfg Config, store registry.Store) surface.Store {
	rs, ok := store.(*redisstore.RedisStore)
	if !ok {
		return surface.NewMemStore()
	}
	prefix := surface.DefaultRedisPrefix
	if cfg.RedisPrefix != "" {
		prefix = cfg.RedisPrefix + "_pin:" // "_" never starts a route key
	}
	return surface.NewRedisStore(rs.Client(), prefix, cfg.RedisTimeout.D())
}

// reloadSurface puts the reloaded surface block in force (SIGHUP), as a
// whole or not at all: on error the block in force stays and the error
// names the entry. The routes are rebuilt with it at the next refresh.
func (a *app) reloadSurface(cfg Config) {
	if a.reg == nil {
		return
	}
	if err := a.reg.SetSurface(cfg.Surface); err != nil {
		a.log.Error("surface reload failed; the surface block in force stays", slog.Any("error", err))
		return
	}
	a.log.Info("surface reloaded; routes are rebuilt with it at the next refresh")
}

// surfaceDecision is the body of an accept or reject.
type surfaceDecision struct {
	Route   string `json:"route"`
	Service string `json:"service"`
	Tool    string `json:"tool"` // the tool's name on its service
	// Hash is the held-back definition the operator reviewed: a decision
	// on another one (the upstream changed again since) is refused.
	Hash string `json:"hash"`
	// By names the operator in the pin and the audit event.
	By string `json:"by,omitempty"`
}

// surfacePending is one definition awaiting review.
type surfacePending struct {
	surface.Record
	// Quarantined: the route holds the tool back now (enforce); false for
	// a change served under warn.
	Quarantined bool `json:"quarantined"`
}

// maxDecisionBytes bounds an accept or reject body.
const maxDecisionBytes = 4096

// surfaceRoutes adds the admin API of pinned definitions to mux (behind
// the admin token, like every admin endpoint):
//
//	GET  /admin/surface/pending[?route=KEY]  definitions awaiting review
//	POST /admin/surface/accept               {route, service, tool, hash, by}
//	POST /admin/surface/reject               the same
func (a *app) surfaceRoutes(mux *http.ServeMux) {
	mux.HandleFunc("GET /admin/surface/pending", func(w http.ResponseWriter, r *http.Request) {
		ctx, cancel := context.WithTimeout(r.Context(), 5*time.Second)
		defer cancel()
		recs, err := a.reg.Pins().List(ctx, r.URL.Query().Get("route"))
		if err != nil {
			http.Error(w, "pin store: "+err.Error(), http.StatusServiceUnavailable)
			return
		}
		out := []surfacePending{}
		for _, rec := range recs {
			if rec.Candidate == nil || rec.Candidate.Rejected {
				continue
			}
			out = append(out, surfacePending{Record: rec, Quarantined: a.quarantined(rec.Key)})
		}
		writeJSON(w, http.StatusOK, map[string]any{"pending": out})
	})
	mux.HandleFunc("POST /admin/surface/accept", func(w http.ResponseWriter, r *http.Request) { a.surfaceDecide(w, r, true) })
	mux.HandleFunc("POST /admin/surface/reject", func(w http.ResponseWriter, r *http.Request) { a.surfaceDecide(w, r, false) })
}

// quarantined reports whether k's tool is held back in its route's snapshot.
func (a *app) quarantined(k surface.Key) bool {
	snap := a.reg.Snapshot(k.Route)
	if snap == nil {
		return false
	}
	for _, q := range snap.Quarantined {
		if q.Service == k.Service && q.Tool == k.Tool {
			return true
		}
	}
	return false
}

// surfaceDecide records an operator's accept or reject, as an audit event,
// and on accept rebuilds the route at once on this replica (the others
// follow at their next refresh).
func (a *app) surfaceDecide(w http.ResponseWriter, r *http.Request, accept bool) {
	var d surfaceDecision
	dec := json.NewDecoder(io.LimitReader(r.Body, maxDecisionBytes))
	dec.DisallowUnknownFields()
	if err := dec.Decode(&d); err != nil {
		http.Error(w, "body: want {route, service, tool, hash, by}: "+err.Error(), http.StatusBadRequest)
		return
	}
	if d.Route == "" || d.Service == "" || d.Tool == "" || d.Hash == "" {
		http.Error(w, "body: route, service, tool and hash are required", http.StatusBadRequest)
		return
	}
	d.By = cmp.Or(d.By, "admin")
	decision := "reject"
	if accept {
		decision = "accept"
	}
	k := surface.Key{Route: d.Route, Service: d.Service, Tool: d.Tool}
	ctx, cancel := context.WithTimeout(r.Context(), 5*time.Second)
	defer cancel()
	var err error
	if accept {
		_, err = a.reg.Pins().Accept(ctx, k, d.Hash, d.By, time.Now().UTC())
	} else {
		err = a.reg.Pins().Reject(ctx, k, d.Hash)
	}
	a.log.LogAttrs(r.Context(), slog.LevelInfo, "audit",
		slog.String("event", "surface"),
		slog.String("decision", decision),
		slog.String("route", d.Route),
		slog.String("service", d.Service),
		slog.String("tool", d.Tool),
		slog.String("hash", d.Hash),
		slog.String("by", d.By),
		slog.String("remote", r.RemoteAddr),
		slog.Bool("ok", err == nil),
		slog.String("err", errString(err)))
	switch {
	case errors.Is(err, surface.ErrNoCandidate):
		http.Error(w, fmt.Sprintf("%s of %s: %v (list /admin/surface/pending again: the upstream may have changed since)", decision, k, err), http.StatusConflict)
		return
	case err != nil:
		http.Error(w, "pin store: "+err.Error(), http.StatusServiceUnavailable)
		return
	}
	if accept {
		// Serve the accepted definition here now; a failed refresh is in
		// /health, and the next cycle tries again.
		_ = a.reg.RefreshRoutes(ctx, d.Route)
	}
	writeJSON(w, http.StatusOK, map[string]any{"decision": decision, "route": d.Route, "service": d.Service, "tool": d.Tool, "hash": d.Hash})
}

func errString(err error) string {
	if err == nil {
		return ""
	}
	return err.Error()
}

func writeJSON(w http.ResponseWriter, status int, v any) {
	w.Header().Set("Content-Type", "application/json")
	w.Header().Set("Cache-Control", "no-store")
	w.WriteHeader(status)
	enc := json.NewEncoder(w)
	enc.SetIndent("", "  ")
	_ = enc.Encode(v)
}

// consoleQuarantine is the console's list of a route's held-back tools,
// each with the accepted and the held-back definition for the diff.
func (a *app) consoleQuarantine(key string) []consoleQuarantined {
	snap := a.reg.Snapshot(key)
	if snap == nil || len(snap.Quarantined) == 0 {
		return nil
	}
	ctx, cancel := context.WithTimeout(context.Background(), time.Second)
	defer cancel()
	out := make([]consoleQuarantined, 0, len(snap.Quarantined))
	for _, q := range snap.Quarantined {
		cq := consoleQuarantined{Name: q.Name, Service: q.Service, Tool: q.Tool, Accepted: q.Accepted, Current: q.Hash}
		if rec, err := a.reg.Pins().Get(ctx, surface.Key{Route: key, Service: q.Service, Tool: q.Tool}); err == nil {
			if rec.Accepted != nil {
				cq.AcceptedDefinition = rec.Accepted.Definition
			}
			if rec.Candidate != nil && rec.Candidate.Hash == q.Hash {
				cq.CurrentDefinition = rec.Candidate.Definition
				cq.Rejected = rec.Candidate.Rejected
			}
		}
		out = append(out, cq)
	}
	return out
}
