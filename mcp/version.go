package mcp

import "strings"

// supportedVersions lists the protocol versions the gateway speaks, newest
// first (server/discover and UnsupportedProtocolVersion errors list them in
// this order).
var supportedVersions = []string{Version20260728, Version20251125, Version20250618, Version20250326}

// MetaProtocolVersion and MetaServerInfo are the _meta keys of the
// stateless era that the gateway reads and writes.
const (
	MetaProtocolVersion = "io.modelcontextprotocol/protocolVersion"
	MetaServerInfo      = "io.modelcontextprotocol/serverInfo"
	// MetaClientCapabilities is the per-request client capabilities key.
	MetaClientCapabilities = "io.modelcontextprotocol/clientCapabilities"
)

// LatestLegacyVersion is what initialize answers when the client asks for a
// version the legacy era does not speak.
const LatestLegacyVersion = Version20251125

// SupportedVersions returns the protocol versions the gateway speaks,
// newest first.
func SupportedVersions() []string {
	return append([]string(nil), supportedVersions...)
}

// IsSupportedVersion reports whether v is one of SupportedVersions.
func IsSupportedVersion(v string) bool {
	switch v {
	case Version20260728, Version20251125, Version20250618, Version20250326:
		return true
	}
	return false
}

// EraOf returns the era a supported protocol version belongs to.
func EraOf(version string) Era {
	if version == Version20260728 {
		return EraStateless
	}
	return EraLegacy
}

// An era has two names, and only these: String, the kind that
// authorization policies and approval rules read (era_kind) and filters
// see (filters.EraStateless, filters.EraLegacy), and Label,
// the value of metric labels and of the dynamic metadata an era is
// reported in (docs/metrics.md). Both are contracts; nothing else names an
// era.

// String returns "stateless" or "legacy": the era's kind.
func (e Era) String() string {
	switch e {
	case EraStateless:
		return "stateless"
	case EraLegacy:
		return "legacy"
	}
	return "unknown"
}

// Label returns "2026-07-28" or "legacy": the era as metrics and dynamic
// metadata name it.
func (e Era) Label() string {
	if e == EraStateless {
		return Version20260728
	}
	return "legacy"
}

// EraOfHeader is the era a request's MCP-Protocol-Version header names,
// for a request answered before its body was classified.
func EraOfHeader(r *HTTPRequest) Era {
	if r.HasProtocolVersion {
		return EraOf(strings.TrimSpace(r.ProtocolVersion))
	}
	return EraLegacy
}

// legacyVersion reports whether v is a supported legacy-era version.
func legacyVersion(v string) bool { return IsSupportedVersion(v) && v != Version20260728 }
