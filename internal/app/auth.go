package app

import (
	"log/slog"
)

// reloadAuth puts the resourceBase and auth keys of cfg in force for the
// requests that start from now on; on error the configuration in force
// stays.
func (a *app) reloadAuth(cfg Config) {
	if a.auth == nil {
		return
	}
	if err := a.auth.Apply(cfg.ResourceBase, cfg.Auth); err != nil {
		a.log.Error("auth reload failed; the configuration in force stays", slog.Any("error", err))
		return
	}
	a.log.Info("auth configuration reloaded")
}
