package app

import (
	"fmt"
	"log/slog"

	"github.com/toolmesh/toolmesh/extproc/relay"
)

// buildRelayKeys reads relayKeys: the HMAC keys of the ids the gateway
// gives federated legacy servers' requests to the client
// (docs/decisions/0006-federated-mcp-servers.md). nil for an unset key: the
// extproc server then uses a key generated at start, valid on its replica
// only.
func buildRelayKeys(keys []ApprovalKey) (*relay.Keys, error) {
	if len(keys) == 0 {
		return nil, nil
	}
	rk := make([]relay.Key, 0, len(keys))
	for i, k := range keys {
		secret, err := k.read()
		if err != nil {
			return nil, fmt.Errorf("relayKeys[%d] (id %s): %w", i, k.ID, err)
		}
		rk = append(rk, relay.Key{ID: k.ID, Secret: secret})
	}
	return relay.New(rk, nil)
}

// reloadRelayKeys puts the reloaded relayKeys in force (SIGHUP); on error,
// or when the key was removed, the keys in force stay.
func (a *app) reloadRelayKeys(cfg Config) {
	if a.extprocServer == nil {
		return
	}
	k, err := buildRelayKeys(cfg.RelayKeys)
	if err != nil {
		a.log.Error("relayKeys reload failed; the keys in force stay", slog.Any("error", err))
		return
	}
	sk, err := buildSessionKeys(cfg.RelayKeys)
	if err != nil {
		a.log.Error("relayKeys reload failed; the keys in force stay", slog.Any("error", err))
		return
	}
	if k != nil {
		a.extprocServer.SetRelayKeys(k)
		a.extprocServer.SetSessionKeys(sk)
		a.log.Info("relayKeys reloaded")
	}
}
