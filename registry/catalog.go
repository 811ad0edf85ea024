package registry

import "errors"

// Validate reports the problems of a catalog setting, each naming its field,
// for catalog objects that come from somewhere other than a Portal listing
// (the toolmesh config file's per-route overrides).
func (c Catalog) Validate() error { return errors.Join(c.check()...) }
