package mcp

// methodHandler answers one method. offered is false when the route does
// not offer the method (a federated method without a server that serves
// it, change notifications not served): the request is then answered as a
// method that does not exist.
type methodHandler func(s *Server, q *request, cat Catalog) (out Outcome, offered bool)

// methods are the methods of each era, after the era's own rules
// (negotiate, and statelessRules) have passed. Adding a method is an entry
// here and its handler; docs/architecture.md shows an example. tools/list
// and tools/call, every era's, are answered by dispatch before the table.
var methods = map[Era]map[string]methodHandler{
	EraLegacy: withFederated(map[string]methodHandler{
		"initialize": (*Server).initializeMethod,
		"ping":       (*Server).ping,
		// Per-client state on federated servers (ADR 0022).
		"logging/setLevel":      (*Server).loggingSetLevel,
		"resources/subscribe":   (*Server).resourcesSubscribe,
		"resources/unsubscribe": (*Server).resourcesSubscribe,
	}),
	EraStateless: withFederated(map[string]methodHandler{
		"server/discover":      (*Server).discoverMethod,
		"subscriptions/listen": (*Server).listenMethod,
	}),
}

// withFederated adds the methods of federated items, the same in both
// eras (federation.go), to an era's table.
func withFederated(m map[string]methodHandler) map[string]methodHandler {
	m["resources/list"] = itemsListMethod(ItemResources)
	m["resources/templates/list"] = itemsListMethod(ItemResourceTemplates)
	m["prompts/list"] = itemsListMethod(ItemPrompts)
	m["resources/read"] = (*Server).resourcesRead
	m["prompts/get"] = (*Server).promptsGet
	m["completion/complete"] = (*Server).completionComplete
	return m
}

// notFoundStatus is the HTTP status of -32601 in each era.
var notFoundStatus = map[Era]int{EraLegacy: 200, EraStateless: 404}

// dispatch answers q: tools/list and tools/call, which every era and
// route offer, directly, and the other methods from its era's table. A
// handler called through the table gets a copy of q: a function value's
// argument goes to the heap, and the common methods should not pay for it.
func (s *Server) dispatch(q *request, cat Catalog) Outcome {
	switch q.method {
	case "tools/list":
		return s.toolsList(q, cat)
	case "tools/call":
		return s.toolsCall(q, cat)
	}
	if h, ok := methods[q.era][q.method]; ok {
		hq := *q
		if out, offered := h(s, &hq, cat); offered {
			return out
		}
	}
	return fail(notFoundStatus[q.era], q.id, CodeMethodNotFound, "Method not found: "+clip(q.method))
}

func (s *Server) initializeMethod(q *request, cat Catalog) (Outcome, bool) {
	v := LatestLegacyVersion
	if pv, ok := stringValue(q.p.protocolVersion); ok && legacyVersion(pv) {
		v = pv
	}
	return reply(resultReply(q.id, s.initializeFor(v, cat))), true
}

func (s *Server) ping(q *request, _ Catalog) (Outcome, bool) {
	return reply(resultReply(q.id, []byte("{}"))), true
}

func (s *Server) discoverMethod(q *request, cat Catalog) (Outcome, bool) {
	return reply(resultReply(q.id, s.discoverFor(cat))), true
}

// listenMethod is subscriptions/listen, offered when the gateway serves
// change notifications (Config.ListChanged).
func (s *Server) listenMethod(q *request, cat Catalog) (Outcome, bool) {
	if !s.cfg.ListChanged {
		return Outcome{}, false
	}
	return s.listen(q, cat), true
}
