package app

import (
	"fmt"
	"log/slog"

	"github.com/toolmesh/toolmesh/extproc/authz"
)

// startPolicies puts the configured authorization policies in force on the
// extproc server. Validate compiled them already, so an error here is a
// configuration that changed meaning between the two: reported all the same.
func (a *app) startPolicies() error {
	set, err := authz.Compile(a.cfg.Policies)
	if err != nil {
		return fmt.Errorf("policies: %w", err)
	}
	a.extprocServer.SetPolicies(set)
	return nil
}

// reloadPolicies puts the reloaded configuration's policies in force
// (SIGHUP); when they do not compile, the error (naming the route and
// policy) is logged and the policies in force stay: the last good set.
func (a *app) reloadPolicies(cfg Config) {
	if a.extprocServer == nil {
		return
	}
	set, err := authz.Compile(cfg.Policies)
	if err != nil {
		a.log.Error("policy reload failed; the policies in force stay", slog.Any("error", fmt.Errorf("policies: %w", err)))
		return
	}
	a.extprocServer.SetPolicies(set)
	a.log.Info("authorization policies reloaded")
}
