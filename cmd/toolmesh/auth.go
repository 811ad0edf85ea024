package main

import (
	"log/slog"
)

// reloadAuth reads the config file again and puts its resourceBase and auth
// keys in force. A file or block that does not load or validate is logged
// with the key at fault and the configuration in force stays.
func (a *app) reloadAuth() {
	if a.auth == nil || a.cfg.ConfigFile == "" {
		return
	}
	cfg := defaultConfig()
	if err := loadConfigFile(a.cfg.ConfigFile, &cfg); err != nil {
		a.log.Error("auth reload failed; the configuration in force stays", slog.Any("error", err))
		return
	}
	if err := a.auth.Apply(cfg.ResourceBase, cfg.Auth); err != nil {
		a.log.Error("auth reload failed; the configuration in force stays", slog.Any("error", err))
		return
	}
	a.log.Info("auth configuration reloaded")
}
