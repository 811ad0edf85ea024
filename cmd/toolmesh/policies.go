package main

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

// reloadPolicies reads the configuration again (the --config file and the
// flags, as at start) and puts its policies in force. When the configuration
// does not load, validate or compile, the error (naming the key, route and
// policy) is logged and the policies in force stay: the last good set.
func (a *app) reloadPolicies() {
	if a.extprocServer == nil || a.reloadConfig == nil {
		return
	}
	cfg, err := a.reloadConfig()
	if err == nil {
		var set *authz.Set
		if set, err = authz.Compile(cfg.Policies); err == nil {
			a.extprocServer.SetPolicies(set)
			a.log.Info("SIGHUP: authorization policies reloaded")
			return
		}
		err = fmt.Errorf("policies: %w", err)
	}
	a.log.Error("policy reload failed; the policies in force stay", slog.Any("error", err))
}
