package xds

import (
	"fmt"
	"maps"
	"slices"
	"strings"
	"sync"
	"time"

	corev3 "github.com/envoyproxy/go-control-plane/envoy/config/core/v3"
	"github.com/prometheus/client_golang/prometheus"
)

// NodeStatus is what the server knows about one Envoy node, for /health:
// which group it is in, what it was last sent, what it last accepted and
// whether it rejected something.
type NodeStatus struct {
	// NodeID and Cluster are the node's id and cluster as Envoy sent them.
	NodeID  string `json:"nodeId"`
	Cluster string `json:"cluster,omitempty"`
	// Group is the key of the node group (snapshot) the node is served.
	Group string `json:"group"`
	// Version is the version of the last response sent to the node.
	Version string `json:"version,omitempty"`
	// GroupVersion is the version currently set for the node's group; the
	// node is up to date when LastACKVersion equals it.
	GroupVersion string `json:"groupVersion,omitempty"`
	// LastACKVersion is the version of the last response the node accepted.
	LastACKVersion string `json:"lastAckVersion,omitempty"`
	// LastNACK is Envoy's error for each resource type whose latest response
	// the node rejected ("Cluster version v: message"; several joined by
	// "; "). A later ACK of that type clears it.
	LastNACK string `json:"lastNack,omitempty"`
	// Connected is true while the node has an open xDS stream.
	Connected bool `json:"connected"`
	// LastSeen is when the node last opened, used or closed a stream.
	LastSeen time.Time `json:"lastSeen"`
}

// maxRememberedNodes bounds how many disconnected nodes NodeStatus keeps
// (sidecars come and go with pods); the least recently seen go first.
const maxRememberedNodes = 256

// nodeTracker follows every stream's node, responses, ACKs and NACKs. xDS
// traffic is small (a few messages per push), so a mutex is fine here.
type nodeTracker struct {
	groupOf   func(*corev3.Node) string
	connected *prometheus.GaugeVec // by group
	now       func() time.Time

	mu      sync.Mutex
	streams map[int64]*streamState
	nodes   map[string]*nodeState
}

type streamState struct {
	node string              // "" until a request names the node
	sent map[string]sentResp // type URL → last response sent
}

type sentResp struct{ nonce, version string }

type nodeState struct {
	cluster, group string
	version        string
	ackVersion     string
	nacks          map[string]string // type label → error
	streams        int
	lastSeen       time.Time
}

// requestInfo is what the callbacks log about a request.
type requestInfo struct {
	node, group string
	version     string // the version ACKed or NACKed, when known
	ack         bool
}

func newNodeTracker(groupOf func(*corev3.Node) string, connected *prometheus.GaugeVec) *nodeTracker {
	return &nodeTracker{
		groupOf:   groupOf,
		connected: connected,
		now:       time.Now,
		streams:   map[int64]*streamState{},
		nodes:     map[string]*nodeState{},
	}
}

func (t *nodeTracker) open(stream int64) {
	t.mu.Lock()
	defer t.mu.Unlock()
	t.streams[stream] = &streamState{sent: map[string]sentResp{}}
}

// request records a discovery request: binds the stream to its node (Envoy
// names it on the first request only) and classifies the request as an ACK
// or NACK of the last response of its type. A request whose nonce is not
// the latest is neither (go-control-plane ignores it too).
func (t *nodeTracker) request(stream int64, node *corev3.Node, typeURL, nonce, nackDetail string) requestInfo {
	t.mu.Lock()
	defer t.mu.Unlock()
	st := t.streams[stream]
	if st == nil { // a callback for a stream we never saw open
		st = &streamState{sent: map[string]sentResp{}}
		t.streams[stream] = st
	}
	if st.node == "" && node.GetId() != "" {
		t.bind(st, node)
	}
	info := requestInfo{node: st.node}
	ns := t.nodes[st.node]
	if ns == nil {
		return info
	}
	info.group = ns.group
	ns.lastSeen = t.now()
	last, ok := st.sent[typeURL]
	if nonce == "" || !ok || nonce != last.nonce {
		if nackDetail != "" {
			// A NACK we cannot tie to a response still gets recorded.
			ns.nacks[typeLabel(typeURL)] = typeLabel(typeURL) + ": " + nackDetail
		}
		return info
	}
	info.version = last.version
	if nackDetail != "" {
		ns.nacks[typeLabel(typeURL)] = fmt.Sprintf("%s version %s: %s", typeLabel(typeURL), last.version, nackDetail)
		return info
	}
	info.ack = true
	ns.ackVersion = last.version
	delete(ns.nacks, typeLabel(typeURL))
	return info
}

// bind ties a stream to its node; the node is connected while it has a
// bound stream.
func (t *nodeTracker) bind(st *streamState, node *corev3.Node) {
	id := node.GetId()
	st.node = id
	ns := t.nodes[id]
	if ns == nil {
		ns = &nodeState{nacks: map[string]string{}}
		t.nodes[id] = ns
	}
	if ns.streams == 0 {
		ns.cluster, ns.group = node.GetCluster(), t.groupOf(node)
		t.connected.WithLabelValues(ns.group).Inc()
	}
	ns.streams++
	ns.lastSeen = t.now()
}

func (t *nodeTracker) response(stream int64, typeURL, nonce, version string) {
	t.mu.Lock()
	defer t.mu.Unlock()
	st := t.streams[stream]
	if st == nil {
		return
	}
	st.sent[typeURL] = sentResp{nonce: nonce, version: version}
	if ns := t.nodes[st.node]; ns != nil {
		ns.version = version
	}
}

func (t *nodeTracker) close(stream int64) {
	t.mu.Lock()
	defer t.mu.Unlock()
	st := t.streams[stream]
	delete(t.streams, stream)
	if st == nil {
		return
	}
	ns := t.nodes[st.node]
	if ns == nil {
		return
	}
	ns.streams--
	ns.lastSeen = t.now()
	if ns.streams == 0 {
		t.connected.WithLabelValues(ns.group).Dec()
		t.prune()
	}
}

// prune forgets the least recently seen disconnected nodes beyond
// maxRememberedNodes.
func (t *nodeTracker) prune() {
	var gone []string
	for id, ns := range t.nodes {
		if ns.streams == 0 {
			gone = append(gone, id)
		}
	}
	if len(gone) <= maxRememberedNodes {
		return
	}
	slices.SortFunc(gone, func(a, b string) int { return t.nodes[a].lastSeen.Compare(t.nodes[b].lastSeen) })
	for _, id := range gone[:len(gone)-maxRememberedNodes] {
		delete(t.nodes, id)
	}
}

// status returns every known node, sorted by id; groupVersion maps a group
// key to its current version.
func (t *nodeTracker) status(groupVersion func(string) string) []NodeStatus {
	t.mu.Lock()
	defer t.mu.Unlock()
	out := make([]NodeStatus, 0, len(t.nodes))
	for _, id := range slices.Sorted(maps.Keys(t.nodes)) {
		ns := t.nodes[id]
		var nacks []string
		for _, k := range slices.Sorted(maps.Keys(ns.nacks)) {
			nacks = append(nacks, ns.nacks[k])
		}
		out = append(out, NodeStatus{
			NodeID:         id,
			Cluster:        ns.cluster,
			Group:          ns.group,
			Version:        ns.version,
			GroupVersion:   groupVersion(ns.group),
			LastACKVersion: ns.ackVersion,
			LastNACK:       strings.Join(nacks, "; "),
			Connected:      ns.streams > 0,
			LastSeen:       ns.lastSeen,
		})
	}
	return out
}
