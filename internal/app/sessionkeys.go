package app

import (
	"fmt"

	"github.com/toolmesh/toolmesh/extproc/session"
)

// buildSessionKeys derives the keys of legacy clients' session tokens from
// relayKeys (docs/decisions/0022-legacy-client-sessions.md): the same
// rotation (the first seals, every one opens) and the same need for every
// replica to share them. nil for unset relayKeys: the extproc server then
// uses a key generated at start, valid on its replica only.
func buildSessionKeys(keys []ApprovalKey) (*session.Keys, error) {
	if len(keys) == 0 {
		return nil, nil
	}
	sk := make([]session.Key, 0, len(keys))
	for i, k := range keys {
		secret, err := k.read()
		if err != nil {
			return nil, fmt.Errorf("relayKeys[%d] (id %s): %w", i, k.ID, err)
		}
		sk = append(sk, session.Key{ID: k.ID, Secret: secret})
	}
	return session.New("relayKeys", sk, nil)
}
