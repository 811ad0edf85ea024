package app

import (
	"errors"
	"fmt"
	"syscall"
)

// listenFlags maps the config key of each listen address to its flag, so a
// message names both ways to change it.
var listenFlags = map[string]string{
	"listen":        "listen",
	"extprocListen": "extproc-listen",
	"xdsListen":     "xds-listen",
	"adminListen":   "admin-listen",
	"envoyListen":   "envoy-listen",

	"notificationsListen": "notifications-listen",
}

// serverKeys maps a listener's name (as in the "listening" log line) to the
// config key of its address.
var serverKeys = map[string]string{
	"dataplane": "listen",
	"extproc":   "extprocListen",
	"xds":       "xdsListen",
	"admin":     "adminListen",

	"notifications": "notificationsListen",
}

// listenError explains why server could not listen on addr: the flag and
// config key that set the address, what went wrong and what to do.
func listenError(server, addr string, err error) error {
	key := serverKeys[server]
	var hint string
	switch {
	case errors.Is(err, syscall.EADDRINUSE):
		hint = "address already in use: another process (or another toolmesh) holds the port; stop it or choose a free port"
	case errors.Is(err, syscall.EACCES):
		hint = "permission denied: ports below 1024 need root or CAP_NET_BIND_SERVICE; choose a port from 1024 up"
	case errors.Is(err, syscall.EADDRNOTAVAIL):
		hint = "address not available: the host is not an address of this machine; use 127.0.0.1, 0.0.0.0 or one of its addresses"
	default:
		hint = err.Error()
	}
	return fmt.Errorf("%s server cannot listen on %s (set by --%s, config key %s): %s: %w",
		server, addr, listenFlags[key], key, hint, err)
}
