package app

import (
	"fmt"

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
