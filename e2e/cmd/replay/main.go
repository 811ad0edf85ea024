// Command replay sends the public MCP contract examples
// (docs/contracts/examples/mcp) to a running gateway and checks every answer
// (status, headers, body) with package contract, the runner of the e2e
// contract test. deploy/compose/smoke.sh uses it against real Envoy in the
// Compose stack.
//
//	replay [--base http://127.0.0.1:10000] [--examples docs/contracts/examples]
//	       [--portal deploy/compose/portal.yaml] [--contract-tools]
//	       [--probe ping,timeout,large-body,unreachable] [--dry-run]
//	replay --ads-before FILE --ads-after FILE [--xds-cluster toolmesh_xds]
//
// The Portal names the routes the gateway serves. Unless --contract-tools
// says the gateway serves the Tool Services of
// docs/contracts/examples/toolservice, the examples whose answer depends on
// them are skipped, each with its reason printed. --probe sends the named
// smoke probes instead of the examples. --dry-run loads and selects
// everything and checks the probes' preconditions against the Portal, but
// sends nothing. --ads-before and --ads-after compare two answers of Envoy's admin /stats
// (raw HTTP responses or bare bodies), taken before and after the ADS
// stream sat idle, and fails when the control plane connection dropped or
// the xDS cluster's connection or stream was replaced. The exit status is 1 when an answer breaks the contract or
// an input is wrong, 2 on a usage error.
package main

import (
	"errors"
	"flag"
	"fmt"
	"io"
	"net/http"
	"os"
	"strings"
	"time"

	"github.com/toolmesh/toolmesh/e2e/contract"
	"github.com/toolmesh/toolmesh/registry"
)

func main() {
	err := run(os.Args[1:], os.Stdout)
	var usage usageError
	switch {
	case errors.As(err, &usage):
		fmt.Fprintln(os.Stderr, "replay:", err)
		os.Exit(2)
	case err != nil:
		fmt.Fprintln(os.Stderr, "replay:", err)
		os.Exit(1)
	}
}

type usageError struct{ error }

type options struct {
	base, examples, portal string
	contractTools, dryRun  bool
	probes                 []string
	timeout                time.Duration
	adsBefore, adsAfter    string
	xdsCluster             string
}

func parse(args []string, out io.Writer) (options, error) {
	var o options
	fs := flag.NewFlagSet("replay", flag.ContinueOnError)
	fs.SetOutput(out)
	fs.StringVar(&o.base, "base", "http://127.0.0.1:10000", "the gateway's `URL` (scheme and authority) the example paths are sent to")
	fs.StringVar(&o.examples, "examples", "docs/contracts/examples", "the contract examples `directory` (mcp/ and toolservice/ below it)")
	fs.StringVar(&o.portal, "portal", "deploy/compose/portal.yaml", "the Portal `file` the gateway serves: its routes decide which examples can run")
	fs.BoolVar(&o.contractTools, "contract-tools", false, "the gateway serves the Tool Services of <examples>/toolservice on every route: run every example")
	probes := fs.String("probe", "", "comma-separated smoke `probes` to send instead of the examples: "+strings.Join(contract.ProbeNames, ", "))
	fs.BoolVar(&o.dryRun, "dry-run", false, "load, select and check the inputs; send nothing")
	fs.DurationVar(&o.timeout, "timeout", 30*time.Second, "bound on each request")
	fs.StringVar(&o.adsBefore, "ads-before", "", "a `file` with Envoy's admin /stats answer before the ADS stream sat idle; with --ads-after, check that the ADS connection survived")
	fs.StringVar(&o.adsAfter, "ads-after", "", "a `file` with Envoy's admin /stats answer after the ADS stream sat idle")
	fs.StringVar(&o.xdsCluster, "xds-cluster", "toolmesh_xds", "the `cluster` of Envoy's ADS stream, for --ads-before and --ads-after")
	if err := fs.Parse(args); err != nil {
		return o, usageError{err}
	}
	if fs.NArg() > 0 {
		return o, usageError{fmt.Errorf("unexpected arguments %q", fs.Args())}
	}
	if *probes != "" {
		o.probes = strings.Split(*probes, ",")
	}
	if (o.adsBefore == "") != (o.adsAfter == "") {
		return o, usageError{errors.New("--ads-before and --ads-after go together")}
	}
	if o.timeout <= 0 {
		return o, usageError{fmt.Errorf("--timeout must be positive, not %s", o.timeout)}
	}
	return o, nil
}

func run(args []string, out io.Writer) error {
	o, err := parse(args, out)
	if err != nil {
		return err
	}
	if o.adsBefore != "" {
		return compareADSStats(o.adsBefore, o.adsAfter, o.xdsCluster, out)
	}
	raw, err := os.ReadFile(o.portal)
	if err != nil {
		return fmt.Errorf("--portal: %w", err)
	}
	listing, err := registry.DecodeListing(raw)
	if err != nil {
		return fmt.Errorf("--portal %s: %w", o.portal, err)
	}
	target := contract.Target{ContractTools: o.contractTools}
	for _, r := range listing.Routes {
		target.Routes = append(target.Routes, strings.TrimPrefix(r.Path(), "/mcp/"))
	}
	client := &http.Client{Timeout: o.timeout}

	if len(o.probes) > 0 {
		return runProbes(o, listing, client, out)
	}

	examples, err := contract.Load(o.examples)
	if err != nil {
		return fmt.Errorf("--examples: %w", err)
	}
	tools, err := contract.ContractToolNames(o.examples)
	if err != nil {
		return fmt.Errorf("--examples: %w", err)
	}
	selected, skipped := contract.Select(examples, target, tools)
	for _, s := range skipped {
		fmt.Fprintf(out, "SKIP %s: %s\n", s.Example.Name, s.Reason)
	}
	if len(selected) == 0 {
		return fmt.Errorf("no example of %s can run against the routes %v of %s", o.examples, target.Routes, o.portal)
	}
	if o.dryRun {
		for _, ex := range selected {
			fmt.Fprintf(out, "WOULD RUN %s %s %s\n", ex.Name, ex.Exchange.Request.Method, ex.Exchange.Request.Path)
		}
		fmt.Fprintf(out, "dry run: %d examples selected, %d skipped, nothing sent\n", len(selected), len(skipped))
		return nil
	}
	failed := 0
	for _, ex := range selected {
		if !report(out, ex.Name, contract.Do(client, o.base, &ex.Exchange)) {
			failed++
		}
	}
	fmt.Fprintf(out, "%d examples passed, %d failed, %d skipped against %s\n", len(selected)-failed, failed, len(skipped), o.base)
	if failed > 0 {
		return fmt.Errorf("%d of %d examples broke the contract against %s", failed, len(selected), o.base)
	}
	return nil
}

// runProbes sends (or, in a dry run, checks the preconditions of) the named
// probes.
func runProbes(o options, listing *registry.Listing, client *http.Client, out io.Writer) error {
	var exchanges []*contract.Exchange
	for _, name := range o.probes {
		ex, err := contract.Probe(name)
		if err != nil {
			return usageError{fmt.Errorf("--probe: %w", err)}
		}
		exchanges = append(exchanges, ex)
	}
	if err := checkProbePortal(listing, o.probes); err != nil {
		return fmt.Errorf("--portal %s: %w", o.portal, err)
	}
	failed := 0
	for _, ex := range exchanges {
		if o.dryRun {
			fmt.Fprintf(out, "WOULD PROBE %s %s %s: %s\n", ex.Name, ex.Request.Method, ex.Request.Path, ex.Description)
			continue
		}
		if !report(out, "probe "+ex.Name, contract.Do(client, o.base, ex)) {
			failed++
		}
	}
	if failed > 0 {
		return fmt.Errorf("%d of %d probes failed against %s", failed, len(exchanges), o.base)
	}
	return nil
}

// checkProbePortal checks that the Portal has what the probes call: route
// contract.ProbeRoute, and for the timeout probe a time.sleep Tool Service
// whose requestTimeout is shorter than the sleep.
func checkProbePortal(l *registry.Listing, probes []string) error {
	for _, r := range l.Routes {
		if r.Key != contract.ProbeRoute {
			continue
		}
		for _, p := range probes {
			if p != "timeout" {
				continue
			}
			found := false
			for _, ts := range r.ToolServices {
				if ts.Name != contract.SleepService {
					continue
				}
				found = true
				var c registry.ClusterSettings
				if ts.Cluster != nil {
					c = *ts.Cluster
				}
				if rt := c.WithDefaults().RequestTimeout.D(); rt >= contract.SleepMillis*time.Millisecond {
					return fmt.Errorf("route %s: Tool Service %s: requestTimeout %s is not shorter than the timeout probe's %d ms sleep", r.Key, ts.Name, rt, contract.SleepMillis)
				}
			}
			if !found {
				return fmt.Errorf("route %s has no Tool Service %s, which the timeout probe calls", r.Key, contract.SleepService)
			}
		}
		return nil
	}
	return fmt.Errorf("no route %s, which the probes call", contract.ProbeRoute)
}

// report prints one PASS or FAIL line (with the mismatches) and says
// whether the check passed.
func report(out io.Writer, name string, errs []string) bool {
	if len(errs) == 0 {
		fmt.Fprintf(out, "PASS %s\n", name)
		return true
	}
	fmt.Fprintf(out, "FAIL %s\n", name)
	for _, e := range errs {
		fmt.Fprintf(out, "    %s\n", strings.ReplaceAll(e, "\n", "\n    "))
	}
	return false
}
