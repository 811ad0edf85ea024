package main

import (
	"log/slog"
)

// reloadAuthFile reads the config file again for reloadAuth. A file that
// does not load or validate is logged, naming the key at fault, and the
// configuration in force stays.
func (a *app) reloadAuthFile() {
	if a.auth == nil || a.cfg.ConfigFile == "" {
		return
	}
	cfg := defaultConfig()
	if err := loadConfigFile(a.cfg.ConfigFile, &cfg); err != nil {
		a.log.Error("auth reload failed; the configuration in force stays", slog.Any("error", err))
		return
	}
	if err := cfg.Validate(); err != nil {
		a.log.Error("auth reload failed; the configuration in force stays", slog.Any("error", err))
		return
	}
	a.reloadAuth(cfg)
}

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
