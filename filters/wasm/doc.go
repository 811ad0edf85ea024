// Package wasm hosts toolmesh filters written in WebAssembly, on wazero.
//
// A filter module is a WASI reactor built by Go's own toolchain
// (GOOS=wasip1 GOARCH=wasm go build -buildmode=c-shared) with the guest SDK
// in package filters/wasm/guest, or any module that implements the
// mcpfilter/v1 ABI documented in docs/wasm-abi.md: the guest exports
// abi_version, alloc and filter (and optionally configure); the host writes
// a JSON envelope describing one call into guest memory and reads a JSON
// decision back.
//
// A [Host] owns the compilation cache and the metrics. [Host.Load] compiles
// a module once, checks its exports and returns a [Module]: a bounded pool of
// warm instances. Each call borrows one instance; Go guests run a
// single-threaded runtime, so an instance serves one call at a time.
//
// Limits and isolation:
//   - each call runs under Options.CallTimeout (the guest is interrupted);
//   - each instance's linear memory is capped at Options.MemoryPages;
//   - inputs above Options.MaxEnvelopeBytes never reach the guest;
//   - an instance whose call traps, times out or breaks the ABI is closed
//     and replaced; a panic the guest SDK recovers is reported as ErrGuest
//     and the instance is kept;
//   - guests get no filesystem, arguments or environment; stdout and stderr
//     become rate-limited log lines.
//
// [Module.Reload] (wire it to SIGHUP) and Options.PollInterval swap in a
// changed module file without dropping calls: calls in flight finish on the
// old pool, new calls use the new one, and the old pool closes when the last
// call leaves it. A module that fails to load, compile or start keeps the
// previous version serving.
//
// Errors wrap ErrTimeout, ErrTrap, ErrGuest, ErrABI, ErrBusy, ErrTooLarge or
// ErrClosed. The caller applies its fail-open or fail-closed policy (package
// filters does).
//
// Metrics, labelled by filter: toolmesh_wasm_filter_calls_total,
// _denials_total, _errors_total{kind}, _call_duration_seconds, _instances,
// _instance_discards_total{reason} and _reloads_total{result}.
package wasm
