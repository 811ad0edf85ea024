// toolmesh operator console. Plain JavaScript, no framework, no build step.
// It polls api/state and renders it. Every value from the server goes into
// the page as text (textContent), never as HTML: tool names and upstream
// error messages come from outside.
'use strict';

(function () {
  const POLL_MS = 3000;
  const STATE_URL = 'api/state';

  // h builds an element: h('td', {class: 'num'}, 'text', childNode, ...).
  function h(tag, attrs, ...kids) {
    const e = document.createElement(tag);
    for (const [k, v] of Object.entries(attrs || {})) {
      if (v === undefined || v === null || v === false) continue;
      if (k === 'class') e.className = v;
      else if (k === 'text') e.textContent = v;
      else e.setAttribute(k, v === true ? '' : String(v));
    }
    for (const kid of kids.flat(Infinity)) {
      if (kid === undefined || kid === null || kid === false) continue;
      e.append(kid instanceof Node ? kid : document.createTextNode(String(kid)));
    }
    return e;
  }

  function badge(text, kind, title) {
    return h('span', {class: 'badge ' + (kind || ''), title: title}, text);
  }

  // skew is how far the browser's clock is ahead of the server's, so that
  // "ago" counts on the server's clock.
  let skew = 0;

  function when(iso) {
    if (!iso) return h('span', {class: 'dim'}, '—');
    const t = new Date(iso);
    const s = Math.round((Date.now() - skew - t.getTime()) / 1000);
    let rel;
    if (Math.abs(s) < 60) rel = s >= 0 ? s + 's ago' : 'in ' + -s + 's';
    else if (Math.abs(s) < 3600) rel = s >= 0 ? Math.round(s / 60) + 'm ago' : 'in ' + Math.round(-s / 60) + 'm';
    else rel = s >= 0 ? Math.round(s / 3600) + 'h ago' : 'in ' + Math.round(-s / 3600) + 'h';
    return h('span', {title: t.toISOString()}, rel);
  }

  // next is when() for a time something is due: a past one is due now.
  function next(iso) {
    if (iso && new Date(iso).getTime() < Date.now() - skew + 1000) return h('span', {title: new Date(iso).toISOString()}, 'now');
    return when(iso);
  }

  function shortVersion(v) {
    if (!v) return h('span', {class: 'dim'}, '—');
    return h('code', {title: v}, v.length > 14 ? v.slice(0, 12) + '…' : v);
  }

  // definitionDiff shows two tool definitions (JSON) line by line: removed
  // lines marked -, added ones +, from a longest-common-subsequence diff.
  function definitionDiff(before, after) {
    const lines = (d) => d === undefined || d === null ? [] : JSON.stringify(d, null, 2).split('\n');
    const a = lines(before), b = lines(after);
    if (a.length * b.length > 4000000) {
      return h('pre', {class: 'diff'}, b.join('\n'));
    }
    const n = a.length, m = b.length;
    const lcs = Array.from({length: n + 1}, () => new Uint32Array(m + 1));
    for (let i = n - 1; i >= 0; i--) {
      for (let j = m - 1; j >= 0; j--) {
        lcs[i][j] = a[i] === b[j] ? lcs[i + 1][j + 1] + 1 : Math.max(lcs[i + 1][j], lcs[i][j + 1]);
      }
    }
    const out = [];
    let i = 0, j = 0;
    while (i < n || j < m) {
      if (i < n && j < m && a[i] === b[j]) {
        out.push(h('span', {class: 'same'}, '  ' + a[i] + '\n')); i++; j++;
      } else if (j < m && (i === n || lcs[i][j + 1] >= lcs[i + 1][j])) {
        out.push(h('span', {class: 'added'}, '+ ' + b[j] + '\n')); j++;
      } else {
        out.push(h('span', {class: 'removed'}, '- ' + a[i] + '\n')); i++;
      }
    }
    return h('pre', {class: 'diff'}, out);
  }

  function table(headers, rows, attrs) {
    return h('div', {class: 'table-wrap'},
      h('table', attrs || {},
        h('thead', {}, h('tr', {}, headers.map((x) => h('th', {}, x)))),
        h('tbody', {}, rows)));
  }

  function kv(pairs) {
    const dl = h('dl', {class: 'kv'});
    for (const [k, v] of pairs) {
      if (v === undefined) continue;
      dl.append(h('dt', {}, k), h('dd', {}, v));
    }
    return dl;
  }

  function emptyNote(text) {
    return h('p', {class: 'empty'}, text);
  }

  // Header: status, version, mode, components.
  function renderTop(doc) {
    const st = document.getElementById('status');
    st.textContent = doc.status;
    st.className = 'badge ' + (doc.status === 'ready' ? 'ok' : doc.status === 'stopping' ? 'warn' : 'bad');
    st.setAttribute('data-status', doc.status);
    const meta = document.getElementById('meta');
    meta.replaceChildren('version ', h('code', {}, doc.version), ' · mode ', h('code', {}, doc.mode),
      ' · updated ', h('span', {title: doc.generatedAt}, new Date().toLocaleTimeString()));
  }

  function renderOverview(doc) {
    const reg = doc.registry || {};
    const comps = Object.entries(doc.components || {}).sort();
    const chips = h('div', {class: 'chips'}, comps.map(([name, state]) =>
      badge(name + ': ' + state, state === 'ready' || state === 'serving' ? 'ok' : 'bad')));
    const routes = reg.routes || [];
    const without = reg.routesWithoutSnapshot || [];
    const out = [kv([
      ['Components', chips],
      ['Routes', routes.length + ' listed' + (without.length ? ', ' + without.length + ' without a snapshot (' + without.join(', ') + ')' : '')],
      ['Last Portal listing', when(reg.lastListing)],
      ['Admin token', doc.adminToken ? 'required' : 'not configured (the admin listener is protected by its bind address only)'],
    ])];
    if (reg.listingRestored) {
      out.push(h('p', {class: 'warning'}, 'The routes come from the listing saved in the store: the Portal has not answered since start.'));
    }
    if (reg.portalError) {
      out.push(h('p', {class: 'error', 'data-portal-error': true},
        'Portal listing failed: ' + reg.portalError, ' (', when(reg.portalErrorAt), ')',
        reg.portalNextRetryAt ? h('span', {}, ' · next try ', next(reg.portalNextRetryAt)) : null));
    }
    document.getElementById('overview').replaceChildren(...out);
  }

  // Cluster settings: a one-line summary and a details table with where
  // each value comes from.
  function originBadge(origin) {
    if (!origin) return null;
    if (origin.startsWith('overrides')) return badge('SRE', 'sre', origin);
    return badge('Portal', 'portal', origin);
  }

  function fmtValue(v) {
    if (v === undefined || v === null) return 'off';
    if (Array.isArray(v)) return v.join(', ');
    if (typeof v === 'object') return Object.entries(v).map(([k, x]) => k + ' ' + x).join(', ') || 'on';
    return String(v);
  }

  function clusterCell(view, detailKey) {
    if (!view) return h('span', {class: 'dim'}, 'no cluster (no xDS server in this mode)');
    const s = view.settings;
    const o = view.origins || {};
    const item = (label, field, value) => h('span', {}, label + ' ', h('b', {}, value), originBadge(o[field]) ? ' ' : '', originBadge(o[field]));
    const line = h('div', {class: 'cluster-line'},
      item('connect', 'connectTimeout', s.connectTimeout),
      item('request', 'requestTimeout', s.requestTimeout === '0s' ? 'none' : s.requestTimeout),
      item('retries', 'maxRetries', String(s.maxRetries)),
      item('lb', 'lbPolicy', s.lbPolicy),
      item('max conn/pending/req', 'maxConnections', s.maxConnections + '/' + s.maxPendingRequests + '/' + s.maxRequests),
      item('outlier', 'outlierDetection', s.outlierDetection ? 'on' : 'off'),
      item('health check', 'healthCheck', s.healthCheck ? 'on' : 'off'),
      s.tls ? item('TLS sni', 'sni', s.sni || '(none)') : null);
    // Fields the server leaves out when they are unset or off.
    const absent = {idleTimeout: 'unset (the listener\'s stream idle timeout)', perTryTimeout: 'unset',
      outlierDetection: 'off', healthCheck: 'off', sni: 'none', caFile: 'none'};
    const fields = [...new Set([...Object.keys(s), ...Object.keys(absent)])].sort()
      .filter((k) => !((k === 'sni' || k === 'caFile') && !s.tls));
    const rows = fields.map((k) =>
      h('tr', {}, h('td', {}, h('code', {}, k)), h('td', {class: 'wrap'}, k in s ? fmtValue(s[k]) : absent[k]),
        h('td', {}, o[k] ? o[k] : h('span', {class: 'dim'}, 'built-in default'))));
    const details = h('details', {'data-key': detailKey},
      h('summary', {}, 'all settings (' + view.cluster + ', ' + view.endpoint + ')'),
      h('div', {class: 'settings'}, table(['field', 'effective value', 'set by'], rows)));
    if (o.error) line.append(h('span', {class: 'errtext'}, o.error));
    return h('div', {}, line, details);
  }

  function protocolCell(svc) {
    if (svc.protocol !== 'mcp') return h('span', {}, svc.protocol);
    const bits = [svc.era, svc.protocolVersion, svc.server].filter(Boolean).join(' · ');
    return h('span', {}, 'mcp', bits ? h('div', {class: 'dim'}, bits) : null);
  }

  function countsCell(svc) {
    const extra = [];
    if (svc.resources) extra.push(svc.resources + ' resources');
    if (svc.resourceTemplates) extra.push(svc.resourceTemplates + ' templates');
    if (svc.prompts) extra.push(svc.prompts + ' prompts');
    return h('span', {}, String(svc.tools), extra.length ? h('div', {class: 'dim'}, extra.join(', ')) : null);
  }

  function catalogBadge(cat) {
    if (!cat) return null;
    let text = cat.mode === 'search' ? 'search mode · shortlist ' + cat.shortlist : 'full catalog';
    text += cat.pageSize ? ' · page ' + cat.pageSize : ' · no paging';
    if (cat.synonyms) text += ' · ' + cat.synonyms + ' synonym groups';
    return badge(text, 'plain', 'catalog mode, tools/list page size and search shortlist');
  }

  function codeList(xs) {
    return (xs || []).map((x, i) => [i ? ', ' : '', h('code', {}, x)]);
  }

  // accessBadge is the one-line summary of a route's access rules.
  function accessBadge(acc) {
    if (!acc) return h('span', {class: 'dim'}, 'n/a');
    const bits = [acc.auth.mode === 'off' ? 'open' : 'auth ' + acc.auth.mode];
    if (acc.policies.length) bits.push(acc.policies.length + (acc.policies.length === 1 ? ' policy' : ' policies'));
    if (acc.approval) bits.push('approval');
    if ((acc.rateLimits || []).length) bits.push(acc.rateLimits.length + (acc.rateLimits.length === 1 ? ' limit' : ' limits'));
    if ((acc.quarantined || []).length) bits.push(acc.quarantined.length + ' quarantined');
    return badge(bits.join(' · '), acc.auth.mode === 'required' ? 'ok' : 'plain', 'authentication, policies and approval in force');
  }

  // renderAccess: who may call the route, under which policies, which
  // calls need a person's approval, and the limits in force. Values are
  // names, patterns and expressions; the server never sends a secret.
  function renderAccess(acc, key) {
    const out = [h('h4', {}, 'Access')];
    if (!acc) {
      out.push(emptyNote('n/a (no ext_proc server in this mode: authentication, policies and approval are enforced by the extproc process)'));
      return out;
    }
    const a = acc.auth;
    const authPairs = [['Authentication', h('span', {'data-auth-mode': a.mode},
      a.mode === 'required' ? badge('required', 'ok') : a.mode === 'optional' ? badge('optional', 'warn', 'a request without a token goes on anonymous') : badge('off: open route', 'plain'))]];
    if (a.mode !== 'off') {
      authPairs.push(['Issuers', h('span', {'data-auth-issuers': true}, codeList(a.issuers))],
        ['Audience', h('code', {}, a.audience || '—')],
        ['Required scopes', a.scopes && a.scopes.length ? h('span', {'data-auth-scopes': true}, codeList(a.scopes)) : h('span', {class: 'dim'}, 'none')]);
    }
    out.push(h('div', {'data-access': key}, kv(authPairs)));

    out.push(h('h5', {}, 'Authorization policies (' + acc.policies.length + ')'));
    if (!acc.policies.length) {
      out.push(emptyNote('None: every caller the route lets in may use every tool, resource and prompt.'));
    } else {
      out.push(table(['policy', 'effect', 'when', 'governs', 'methods'], acc.policies.map((p) => h('tr', {'data-policy': p.name},
        h('td', {class: 'name'}, h('b', {}, p.name)),
        h('td', {}, badge(p.effect, p.effect === 'deny' ? 'bad' : 'ok')),
        h('td', {class: 'wrap'}, h('code', {}, p.when)),
        h('td', {}, p.subjects.join(', ')),
        h('td', {class: 'wrap dim'}, p.methods.join(', '))))));
    }

    out.push(h('h5', {}, 'Approval'));
    const ap = acc.approval;
    if (!ap) {
      out.push(emptyNote('No call on this route needs approval.'));
    } else {
      const rule = [];
      if (ap.annotations && ap.annotations.length) rule.push('annotations ', codeList(ap.annotations), ' ');
      if (ap.tools && ap.tools.length) rule.push('tools ', codeList(ap.tools), ' ');
      if (ap.exempt && ap.exempt.length) rule.push('except ', codeList(ap.exempt), ' ');
      if (ap.notReadOnly) rule.push('every tool not declared read-only (', h('code', {}, 'readOnlyHint: true'), ') ');
      if (ap.when) rule.push('when ', h('code', {}, ap.when));
      out.push(kv([
        ['Rule', h('span', {class: 'wrap'}, rule)],
        ['Approval TTL', h('span', {'data-approval-ttl': ap.ttl}, ap.ttl)],
        ['Tools that need approval', ap.selected.length
          ? h('span', {}, ap.selected.map((t, i) => [i ? ', ' : '', h('code', {'data-approval-tool': t.name, title: t.why + (t.conditional ? ', then the when condition' : '')}, t.name),
            t.conditional ? h('span', {class: 'dim'}, ' (when)') : null]),
          ap.selectedTotal > ap.selected.length ? h('span', {class: 'dim'}, ' … ' + ap.selectedTotal + ' in all') : null)
          : h('span', {class: 'dim'}, 'none of the current tools')],
      ]));
    }

    out.push(h('h5', {}, 'Limits in force'));
    const limits = acc.rateLimits || [];
    out.push(limits.length
      ? table(['limit', 'tools', 'per', 'rate', 'in flight', 'from'], limits.map((l) => h('tr', {'data-route-limit': l.name},
        h('td', {}, h('code', {}, l.name)),
        h('td', {}, h('code', {}, l.tools)),
        h('td', {}, l.by || h('span', {class: 'dim'}, 'route')),
        h('td', {}, l.global ? badge('global (RLS)', 'ok') : (l.rate || '—')),
        h('td', {}, l.concurrency ? String(l.concurrency) : '—'),
        h('td', {}, l.scope ? 'the route\'s entry' : 'rateLimits.default'))))
      : emptyNote('No rate limit.'));

    const q = acc.quarantined || [];
    if (q.length) {
      out.push(h('h5', {}, 'Quarantined tools (' + q.length + ')'),
        table(['tool', 'service', 'accepted', 'current'], q.map((t) => h('tr', {'data-quarantined': t.name},
          h('td', {}, h('code', {}, t.name), t.rejected ? badge('rejected', 'bad') : null),
          h('td', {}, h('code', {}, t.service)),
          h('td', {}, t.accepted ? shortVersion(t.accepted) : badge('new tool', 'warn')),
          h('td', {}, shortVersion(t.current))))),
        q.map((t) => h('details', {class: 'definition-diff', 'data-diff': t.name, 'data-key': 'diff ' + key + ' ' + t.service + ' ' + t.tool},
          h('summary', {}, 'Definition of ' + t.name + ': accepted → held back'),
          definitionDiff(t.acceptedDefinition, t.currentDefinition))),
        h('p', {class: 'dim'}, 'Accept or reject with POST /admin/surface/accept or /admin/surface/reject (docs/surface.md).'));
    }
    return out;
  }

  function renderRoute(rt, extra, clusters) {
    const hasError = rt.lastError || (rt.services || []).some((s) => s.lastError) || !rt.snapshotVersion;
    const head = h('div', {class: 'route-head'},
      h('h3', {}, rt.key),
      h('code', {class: 'dim'}, rt.publicPath),
      rt.snapshotVersion ? badge(rt.tools + ' tools', 'ok') : badge('no snapshot', 'bad'),
      rt.restored ? badge('restored from the store', 'warn') : null,
      catalogBadge(extra && extra.catalog));
    const meta = h('div', {class: 'route-meta dim'},
      h('span', {}, 'snapshot ', shortVersion(rt.snapshotVersion)),
      h('span', {}, 'content age ', rt.snapshotAge || '—'),
      h('span', {}, 'last full refresh ', rt.lastSuccessAge ? rt.lastSuccessAge + ' ago' : '—'),
      h('span', {}, 'fetched ', when(rt.fetchedAt)),
      h('span', {}, 'confirmed ', when(rt.lastRefresh)),
      h('span', {}, 'filters ', extra && extra.filters ? (extra.filters.length ? extra.filters.join(' → ') : 'none') : 'n/a (no ext_proc server)'));
    const body = [head, meta];
    if (rt.lastError) {
      body.push(h('p', {class: 'error', 'data-route-error': rt.key},
        'Last refresh failed: ' + rt.lastError, ' (', when(rt.lastErrorAt), ')',
        rt.nextRetryAt ? h('span', {}, ' · next try ', next(rt.nextRetryAt)) : null));
    }
    if (rt.storeError) body.push(h('p', {class: 'warning'}, 'Store: ' + rt.storeError));

    const svcRows = (rt.services || []).map((svc) => h('tr', {'data-service': svc.name},
      h('td', {class: 'name'}, h('b', {}, svc.name)),
      h('td', {}, protocolCell(svc)),
      h('td', {class: 'num'}, countsCell(svc)),
      h('td', {class: 'wrap'}, clusterCell(clusters[svc.name], rt.key + '/' + svc.name)),
      h('td', {class: 'wrap'}, svc.lastError
        ? h('span', {class: 'errtext', 'data-service-error': svc.name}, svc.lastError, h('div', {class: 'dim'}, when(svc.lastErrorAt)))
        : h('span', {class: 'dim'}, 'none'))));
    body.push(h('h4', {}, 'Tool Services'),
      svcRows.length ? table(['service', 'protocol', 'tools', 'effective cluster settings', 'last error'], svcRows) : emptyNote('none'));

    body.push(...renderAccess(extra && extra.access && Object.assign({quarantined: extra.quarantined}, extra.access), rt.key));

    const rejected = rt.rejected || [];
    if (rejected.length) {
      body.push(h('h4', {}, 'Rejected tools (' + rejected.length + ')'),
        table(['service', 'tool', 'reason'], rejected.map((r) => h('tr', {'data-rejected': r.name},
          h('td', {}, r.service), h('td', {}, h('code', {}, r.name)), h('td', {class: 'wrap'}, r.reason)))));
    }
    const ambiguous = rt.ambiguous || [];
    const items = rt.ambiguousItems || [];
    if (ambiguous.length || items.length) {
      body.push(h('h4', {}, 'Ambiguous (left out: offered by two services)'));
      if (ambiguous.length) body.push(h('div', {}, 'tools: ', ambiguous.map((n, i) => [i ? ', ' : '', h('code', {'data-ambiguous': n}, n)])));
      if (items.length) body.push(h('div', {}, 'resources, templates and prompts: ', items.join(', ')));
    }
    return h('div', {class: 'route' + (hasError ? ' has-error' : ''), 'data-route': rt.key, id: 'route-' + rt.key}, body);
  }

  function renderRoutes(doc) {
    const routes = ((doc.registry || {}).routes || []).slice().sort((a, b) => a.key.localeCompare(b.key));
    const clusters = {};
    for (const c of doc.clusters || []) clusters[c.service] = c;
    if (!routes.length) {
      document.getElementById('routes').replaceChildren(emptyNote('No route is listed.'));
      return;
    }
    // A summary line per route, then a card per route.
    const summary = table(['route', 'snapshot', 'content age', 'last full refresh', 'tools', 'Tool Services', 'rejected', 'ambiguous', 'catalog', 'access'],
      routes.map((rt) => {
        const svcs = rt.services || [];
        const failing = svcs.filter((x) => x.lastError).length;
        const ext = (doc.routes || {})[rt.key] || {};
        const cat = ext.catalog;
        return h('tr', {'data-route-summary': rt.key},
          h('td', {class: 'name'}, h('a', {href: '#route-' + rt.key}, rt.key)),
          h('td', {}, rt.snapshotVersion ? shortVersion(rt.snapshotVersion) : badge('none', 'bad')),
          h('td', {}, rt.snapshotAge || '—'),
          h('td', {}, rt.lastSuccessAge ? rt.lastSuccessAge + ' ago' : '—'),
          h('td', {class: 'num'}, String(rt.tools)),
          h('td', {}, String(svcs.length), failing ? h('span', {}, ' ', badge(failing + ' failing', 'bad')) : null,
            rt.lastError ? h('span', {}, ' ', badge('refresh failed', 'bad')) : null),
          h('td', {class: 'num'}, String((rt.rejected || []).length)),
          h('td', {class: 'num'}, String((rt.ambiguous || []).length + (rt.ambiguousItems || []).length)),
          h('td', {}, cat ? (cat.mode === 'search' ? 'search · shortlist ' + cat.shortlist : 'full') + (cat.pageSize ? ' · page ' + cat.pageSize : '') : '—'),
          h('td', {}, accessBadge(ext.access && Object.assign({quarantined: ext.quarantined}, ext.access))));
      }));
    const cards = routes.map((rt) => renderRoute(rt, (doc.routes || {})[rt.key], clusters));
    document.getElementById('routes').replaceChildren(summary, ...cards);
  }

  function renderXDS(doc) {
    const x = doc.xds;
    const box = document.getElementById('xds');
    if (!x) {
      box.replaceChildren(emptyNote('No xDS server in this mode.'));
      return;
    }
    const out = [];
    const groups = x.groups || [];
    out.push(h('h4', {}, 'Node groups'),
      table(['group', 'routes', 'version'], groups.map((g) => h('tr', {},
        h('td', {}, h('code', {}, g.key)),
        h('td', {}, g.routes && g.routes.length ? g.routes.join(', ') : h('span', {class: 'dim'}, 'every route')),
        h('td', {}, shortVersion(g.version))))));
    const nodes = x.nodes || [];
    out.push(h('h4', {}, 'Envoy nodes (' + nodes.length + ')'));
    if (!nodes.length) {
      out.push(emptyNote('No Envoy node has connected yet.'));
    } else {
      out.push(table(['node', 'group', 'connection', 'pushed', 'ACKed', 'state', 'NACK', 'last seen'], nodes.map((n) => {
        let state;
        if (n.lastNack) state = badge('NACK', 'bad');
        else if (n.groupVersion && n.lastAckVersion === n.groupVersion) state = badge('up to date', 'ok');
        else state = badge('behind', 'warn', 'the node has not ACKed its group\'s version ' + (n.groupVersion || ''));
        return h('tr', {'data-node': n.nodeId},
          h('td', {class: 'name'}, h('b', {}, n.nodeId), n.cluster ? h('div', {class: 'dim'}, n.cluster) : null),
          h('td', {}, h('code', {}, n.group)),
          h('td', {}, n.connected ? badge('connected', 'ok') : badge('gone', 'plain')),
          h('td', {}, shortVersion(n.version)),
          h('td', {}, shortVersion(n.lastAckVersion)),
          h('td', {}, state),
          h('td', {class: 'wrap'}, n.lastNack ? h('span', {class: 'errtext', 'data-nack': n.nodeId}, n.lastNack) : h('span', {class: 'dim'}, 'none')),
          h('td', {}, when(n.lastSeen)));
      })));
    }
    const ov = x.overrides;
    out.push(h('h4', {}, 'SRE override file'));
    if (!ov) {
      out.push(emptyNote('None configured: every cluster runs on the Portal\'s settings and the built-in defaults.'));
    } else {
      out.push(kv([
        ['File', ov.path ? h('code', {}, ov.path) : h('span', {class: 'dim'}, 'not watched')],
        ['Version in force', shortVersion(ov.version)],
        ['Services overridden', String(ov.services)],
      ]));
      if (ov.lastError) out.push(h('p', {class: 'error'}, 'Newest file rejected (the last good one stays in force): ' + ov.lastError));
    }
    box.replaceChildren(...out);
  }

  function renderStore(doc) {
    const box = document.getElementById('store');
    const st = (doc.registry || {}).store;
    if (doc.store === 'memory' || !st) {
      box.replaceChildren(h('p', {}, 'In-memory store: snapshots are not kept across restarts (no Redis configured).'));
      return;
    }
    const out = [kv([
      ['Backend', st.backend],
      ['Target', h('code', {}, st.target || '—')],
      ['Reachable', st.reachable ? badge('yes', 'ok') : badge('no', 'bad')],
      ['Last operation', when(st.lastOpAt)],
      ['Last success', when(st.lastOkAt)],
    ])];
    if (st.lastError) out.push(h('p', {class: 'error', 'data-store-error': true}, 'Last error: ' + st.lastError, ' (', when(st.lastErrorAt), ')'));
    box.replaceChildren(...out);
  }

  // Rate and concurrency limits in force, one row per limit and scope.
  function renderRateLimits(doc) {
    const box = document.getElementById('ratelimits');
    const rows = (doc.rateLimits || []).map((l) => h('tr', {'data-limit': (l.scope || '*') + '/' + l.name},
      h('td', {}, l.scope ? h('code', {}, l.scope) : h('span', {class: 'dim'}, 'default')),
      h('td', {}, h('code', {}, l.name)),
      h('td', {}, h('code', {}, l.tools)),
      h('td', {}, l.by || h('span', {class: 'dim'}, 'route')),
      h('td', {}, l.global ? badge('global (RLS)', 'ok') : (l.rate || '—')),
      h('td', {}, l.concurrency ? String(l.concurrency) : '—'),
      h('td', {}, String(l.keys))));
    if (rows.length === 0) {
      box.replaceChildren(emptyNote('No rate limits configured (rateLimits).'));
      return;
    }
    box.replaceChildren(table(['Route', 'Limit', 'Tools', 'Per', 'Rate', 'In flight', 'Keys here'], rows));
  }

  function render(doc) {
    // Keep the <details> the operator opened open across refreshes.
    const open = new Set([...document.querySelectorAll('details[open][data-key]')].map((d) => d.getAttribute('data-key')));
    const gen = Date.parse(doc.generatedAt);
    skew = Number.isNaN(gen) ? 0 : Date.now() - gen;
    renderTop(doc);
    renderOverview(doc);
    renderRoutes(doc);
    renderRateLimits(doc);
    renderXDS(doc);
    renderStore(doc);
    for (const d of document.querySelectorAll('details[data-key]')) {
      if (open.has(d.getAttribute('data-key'))) d.open = true;
    }
    document.body.setAttribute('data-loaded', 'true');
  }

  let lastOK = null;
  function setConn(err) {
    const c = document.getElementById('conn');
    if (!err) {
      lastOK = new Date();
      c.replaceChildren();
      return;
    }
    c.replaceChildren('Cannot refresh: ' + err + (lastOK ? ' — showing the state of ' + lastOK.toLocaleTimeString() : ''));
  }

  async function poll() {
    try {
      const resp = await fetch(STATE_URL, {cache: 'no-store', credentials: 'same-origin', headers: {Accept: 'application/json'}});
      if (!resp.ok) {
        const text = (await resp.text()).slice(0, 300);
        throw new Error('HTTP ' + resp.status + (text ? ': ' + text : ''));
      }
      render(await resp.json());
      setConn(null);
    } catch (e) {
      setConn(e && e.message ? e.message : String(e));
    } finally {
      setTimeout(poll, POLL_MS);
    }
  }

  poll();
})();
