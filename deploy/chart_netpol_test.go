package deploy_test

import (
	"maps"
	"slices"
	"strings"

	corev1 "k8s.io/api/core/v1"
	networkingv1 "k8s.io/api/networking/v1"
)

// controlPort names the container ports whoever reaches can act as Envoy.
func controlPort(name string) bool {
	return strings.HasPrefix(name, "grpc-") || name == "notifications"
}

// networkPolicies: with networkPolicy.enabled, every Deployment's pods are
// selected by one NetworkPolicy that lists the ports others must reach
// (MCP, stats, admin, and in gateway mode the control ports), names only
// ports the pods have, and admits only the release's Envoy pods to a
// control port. Ports it does not list are closed.
func (c *chartCheck) networkPolicies() {
	c.t.Helper()
	if enabled, _ := c.o.value("networkPolicy.enabled").(bool); !enabled {
		if len(c.o.netPolicies) != 0 {
			c.t.Errorf("networkPolicy.enabled is false, yet %d NetworkPolicies", len(c.o.netPolicies))
		}
		return
	}
	gateway := c.o.str("mode") == "gateway"
	var envoyLabels map[string]string
	for _, d := range c.o.deployments {
		if slices.ContainsFunc(d.Spec.Template.Spec.Containers, func(ct corev1.Container) bool { return ct.Name == "envoy" }) {
			envoyLabels = d.Spec.Template.Labels
		}
	}
	selects := func(sel map[string]string, labels map[string]string) bool {
		for k, v := range sel {
			if labels[k] != v {
				return false
			}
		}
		return len(sel) > 0
	}
	for name, d := range c.o.deployments {
		var pols []*networkingv1.NetworkPolicy
		for _, p := range c.o.netPolicies {
			if selects(p.Spec.PodSelector.MatchLabels, d.Spec.Template.Labels) {
				pols = append(pols, p)
			}
		}
		if len(pols) != 1 {
			c.t.Errorf("Deployment %s: selected by %d NetworkPolicies, want 1", name, len(pols))
			continue
		}
		p := pols[0]
		podPorts := map[string]bool{}
		for _, ct := range d.Spec.Template.Spec.Containers {
			for _, cp := range ct.Ports {
				podPorts[cp.Name] = true
			}
		}
		listed := map[string][]networkingv1.NetworkPolicyPeer{}
		for _, r := range p.Spec.Ingress {
			for _, pp := range r.Ports {
				if pp.Port == nil {
					c.t.Errorf("NetworkPolicy %s: a rule without a port admits every port", p.Name)
					continue
				}
				n := pp.Port.String()
				if !podPorts[n] {
					c.t.Errorf("NetworkPolicy %s: port %s is not a port of Deployment %s (%v)", p.Name, n, name, slices.Sorted(maps.Keys(podPorts)))
				}
				listed[n] = r.From
			}
		}
		for port := range podPorts {
			_, ok := listed[port]
			// Other ports (a sidecar's Tool Service, which Envoy reaches on
			// loopback) stay closed: clients go through Envoy.
			needed := map[string]bool{"mcp": true, "stats": true, "admin": true, "admin-xds": true}[port] || (gateway && controlPort(port))
			if needed {
				if !ok {
					c.t.Errorf("NetworkPolicy %s: Deployment %s's port %s is not admitted", p.Name, name, port)
				}
			}
			if !controlPort(port) || !ok {
				continue
			}
			from := listed[port]
			if len(from) != 1 || from[0].PodSelector == nil || from[0].NamespaceSelector != nil || from[0].IPBlock != nil ||
				!selects(from[0].PodSelector.MatchLabels, envoyLabels) {
				c.t.Errorf("NetworkPolicy %s: control port %s admits %v, want only the Envoy pods (%v)", p.Name, port, from, envoyLabels)
			}
		}
	}
}

// controlTLS: with controlTLS set, no toolmesh container accepts plaintext
// (--insecure-listeners), the config names the mounted files, and Envoy's
// bootstrap gives toolmesh_xds and toolmesh_extproc a TLS transport
// socket; without it, gateway mode passes --insecure-listeners.
func (c *chartCheck) controlTLS() {
	c.t.Helper()
	on := c.o.str("controlTLS.existingSecret") != "" && c.o.str("mode") == "gateway"
	for name, d := range c.o.deployments {
		for _, ct := range d.Spec.Template.Spec.Containers {
			if ct.Name != "extproc" && ct.Name != "xds" {
				continue
			}
			insecure := slices.Contains(ct.Args, "--insecure-listeners=true")
			if want := !on && c.o.str("mode") == "gateway"; insecure != want {
				c.t.Errorf("Deployment %s container %s: --insecure-listeners=true %v, want %v", name, ct.Name, insecure, want)
			}
		}
	}
	for name, cm := range c.o.configMaps {
		if cfg, ok := cm.Data["config.yaml"]; ok && strings.Contains(cfg, "controlTLS:") != on {
			c.t.Errorf("ConfigMap %s: controlTLS in config.yaml %v, want %v", name, !on, on)
		}
		if boot, ok := cm.Data["envoy.yaml"]; ok {
			if n := strings.Count(boot, "envoy.transport_sockets.tls"); on && n != 2 {
				c.t.Errorf("ConfigMap %s: %d TLS transport sockets, want 2 (toolmesh_xds, toolmesh_extproc)", name, n)
			}
		}
	}
}
