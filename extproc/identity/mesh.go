package identity

import (
	"net/url"
	"strings"

	"google.golang.org/protobuf/types/known/structpb"
)

// Mesh identity (docs/decisions/0010-caller-identity-and-upstream-credentials.md).
// Behind mTLS Envoy hands the downstream peer certificate's first URI SAN
// to ext_proc as a request attribute: the ext_proc filter's
// request_attributes lists AttrPeerURISAN (xds/listener.go), and Envoy
// puts the evaluated attributes on the first message of the request
// direction (the request_headers message here) in
// ProcessingRequest.attributes, keyed by the filter's name
// (Filter::addAttributes in source/extensions/filters/http/ext_proc/ext_proc.cc),
// as a Struct of expression → value (a string for this attribute,
// ExpressionManager::evaluateAttributes in matching_utils.cc). Without a
// TLS peer certificate the attribute is absent. The attribute never comes
// from a client header, so a client cannot forge it.
const (
	// AttrNamespace is the key Envoy files the ext_proc filter's
	// attributes under (ext_proc.cc FilterName), whatever the filter's
	// configured name.
	AttrNamespace = "envoy.filters.http.ext_proc"
	// AttrPeerURISAN is the attribute of the downstream peer certificate's
	// first URI SAN (source/extensions/filters/common/expr/context.h
	// Connection, URISanPeerCertificate).
	AttrPeerURISAN = "connection.uri_san_peer_certificate"
	// maxMeshIDBytes bounds a SPIFFE ID (the SPIFFE ID specification
	// limits one to 2048 bytes).
	maxMeshIDBytes = 2048
)

// MeshID returns the SPIFFE ID in Envoy's request attributes
// (ProcessingRequest.attributes), "" when there is none or the URI SAN is
// not a well-formed spiffe:// ID.
func MeshID(attrs map[string]*structpb.Struct) string {
	if len(attrs) == 0 { // a listener without mTLS: the usual case, answered without a lookup
		return ""
	}
	s := attrs[AttrNamespace].GetFields()[AttrPeerURISAN].GetStringValue()
	if !validSPIFFEID(s) {
		return ""
	}
	return s
}

// validSPIFFEID applies the SPIFFE ID format: scheme spiffe, a trust
// domain of lowercase letters, digits, '.', '-' and '_', no port, user,
// query or fragment, and a path of non-empty segments other than . and ..
func validSPIFFEID(s string) bool {
	if s == "" || len(s) > maxMeshIDBytes || !strings.HasPrefix(s, "spiffe://") {
		return false
	}
	u, err := url.Parse(s)
	if err != nil || u.Scheme != "spiffe" || u.User != nil || u.RawQuery != "" || u.Fragment != "" ||
		strings.Contains(s, "#") || strings.Contains(s, "?") || u.Port() != "" {
		return false
	}
	return validTrustDomain(u.Host) && validSPIFFEPath(u.Path)
}

// validTrustDomain: not empty, of lowercase letters, digits, '.', '-' and '_'.
func validTrustDomain(td string) bool {
	if td == "" {
		return false
	}
	for _, c := range td {
		if !(c >= 'a' && c <= 'z' || c >= '0' && c <= '9' || c == '.' || c == '-' || c == '_') {
			return false
		}
	}
	return true
}

// validSPIFFEPath: empty, or non-empty segments other than . and .. of
// letters, digits, '.', '-' and '_', without a trailing slash.
func validSPIFFEPath(path string) bool {
	if path == "" {
		return true
	}
	if strings.HasSuffix(path, "/") {
		return false
	}
	for _, seg := range strings.Split(path[1:], "/") {
		if seg == "" || seg == "." || seg == ".." {
			return false
		}
		for _, c := range seg {
			if !(c >= 'a' && c <= 'z' || c >= 'A' && c <= 'Z' || c >= '0' && c <= '9' || c == '.' || c == '-' || c == '_') {
				return false
			}
		}
	}
	return true
}
