#!/usr/bin/env bash
# run.sh BINARY [ARGS...]: `make run`'s runner. It runs `BINARY run ARGS...`
# so that Ctrl-C stops toolmesh alone and a clean stop exits 0 from make.
#
# Ctrl-C makes the terminal send SIGINT to its foreground process group.
# Started by make in the usual way, toolmesh shares that group with make,
# and make, interrupted, reports an error and exits 130 although toolmesh
# drained and exited 0. With job control (set -m), toolmesh runs in a
# process group of its own, and `fg` makes that group the terminal's
# foreground: Ctrl-C then reaches only toolmesh, and this script, and make,
# exit with toolmesh's status. Without a terminal there is no Ctrl-C to
# route, and toolmesh simply replaces this script.
set -u
bin=${1:?usage: run.sh BINARY [ARGS...]}
shift
if [ -t 0 ]; then
	set -m
	"$bin" run "$@" &
	fg %1 >/dev/null
	exit $?
fi
exec "$bin" run "$@"
