package app

import (
	"context"
	"errors"
	"fmt"
	"io"
	"time"

	"github.com/spf13/cobra"
	"github.com/spf13/pflag"
	"google.golang.org/grpc"
)

// version is the toolmesh version, set at build time with
// -ldflags "-X github.com/toolmesh/toolmesh/internal/app.version=v1.2.3".
var version = "dev"

// Exit codes.
const (
	exitOK    = 0
	exitError = 1 // a server failed to start or stopped with an error
	exitUsage = 2 // bad command line or configuration
)

// hooks let in-process tests observe a running toolmesh.
type hooks struct {
	// listening, when set, is called with each listener's name ("admin",
	// "extproc", "xds", "dataplane") and bound address, before serving
	// starts; it makes "127.0.0.1:0" addresses usable.
	listening func(name, addr string)
	// drainWait, when set, replaces the sleep of the drain delay, so a test
	// can look at the process while it waits and then let it go on.
	drainWait func(time.Duration)
	// reloadConfig, set by serveCmd (not a test hook), reads the
	// configuration again, file and flags, for the blocks SIGHUP reloads.
	reloadConfig func() (Config, error)
	// extProcStream, when set, intercepts every ext_proc stream, so a test
	// can count the messages a request costs.
	extProcStream grpc.StreamServerInterceptor
	// xdsGate, when set, is asked before each xDS push after the first;
	// false skips it, so a test can hold Envoy's routes behind the
	// registry's.
	xdsGate func() bool
	// idleTimeout, when set, replaces the idle timeout of the admin and
	// notifications servers (idle.go), so a test need not wait for it.
	idleTimeout time.Duration
}

// runtimeError marks an error of a running server, as opposed to a usage error.
type runtimeError struct{ error }

func (e runtimeError) Unwrap() error { return e.error }

// run runs toolmesh with the command-line arguments args (without the program
// name) until ctx is done and returns the process exit code.
func run(ctx context.Context, args []string, stdout, stderr io.Writer) int {
	return execute(ctx, args, stdout, stderr, hooks{})
}

// execute is run with hooks.
func execute(ctx context.Context, args []string, stdout, stderr io.Writer, h hooks) int {
	root := newRootCmd(stderr, h)
	root.SetArgs(args)
	root.SetOut(stdout)
	root.SetErr(stderr)
	err := root.ExecuteContext(ctx)
	if err == nil {
		return exitOK
	}
	fmt.Fprintf(stderr, "toolmesh: %v\n", err)
	if errors.As(err, new(runtimeError)) {
		return exitError
	}
	fmt.Fprintln(stderr, "Run 'toolmesh help' for usage.")
	return exitUsage
}

// newRootCmd builds the command tree. The root command is `run`, so plain
// `toolmesh` starts everything.
func newRootCmd(logOut io.Writer, h hooks) *cobra.Command {
	root := &cobra.Command{
		Use:   "toolmesh",
		Short: "MCP tool gateway for Envoy meshes",
		Long: `toolmesh serves the tools of the Tool Services that a Portal lists as MCP
endpoints, POST /mcp/{route}, through Envoy: an ext_proc server answers the
protocol and routes tool calls, an xDS control plane programs Envoy.

With no subcommand it runs everything in one process (see 'toolmesh run').`,
		Args:          cobra.NoArgs,
		SilenceUsage:  true,
		SilenceErrors: true,
		Version:       version,
	}
	runFlags := flagSet{portal: true, listen: true, extproc: true, xds: true}
	bindFlags(root.Flags(), runFlags)
	root.RunE = serveCmd(modeRun, logOut, h)
	root.SetFlagErrorFunc(func(_ *cobra.Command, err error) error { return err })

	runCmd := &cobra.Command{
		Use:   "run",
		Short: "Run the registry, ext_proc and xDS servers and a local data plane in one process",
		Long: `run starts the Portal registry, the ext_proc gRPC server, the xDS (ADS) gRPC
server, the admin HTTP server and a local data plane: a development stand-in
for Envoy that gets its listener, routes and clusters from the xDS server and
calls the ext_proc server the way Envoy does. MCP is then served on
http://{--listen}/mcp/{route}.

Without --portal it also starts the demo Tool Services (clock, calc, text) and
serves the demo Portal: routes core and process.`,
		Args: cobra.NoArgs,
		RunE: serveCmd(modeRun, logOut, h),
	}
	bindFlags(runCmd.Flags(), runFlags)

	extprocCmd := &cobra.Command{
		Use:   "extproc",
		Short: "Run the registry and the ext_proc gRPC server for Envoy",
		Args:  cobra.NoArgs,
		RunE:  serveCmd(modeExtProc, logOut, h),
	}
	bindFlags(extprocCmd.Flags(), flagSet{portal: true, extproc: true})

	xdsCmd := &cobra.Command{
		Use:   "xds",
		Short: "Run the registry and the xDS (ADS) control plane for Envoy",
		Args:  cobra.NoArgs,
		RunE:  serveCmd(modeXDS, logOut, h),
	}
	bindFlags(xdsCmd.Flags(), flagSet{portal: true, xds: true, envoyListen: true})

	versionCmd := &cobra.Command{
		Use:   "version",
		Short: "Print the toolmesh version",
		Args:  cobra.NoArgs,
		Run: func(cmd *cobra.Command, _ []string) {
			fmt.Fprintln(cmd.OutOrStdout(), version)
		},
	}

	for _, c := range []*cobra.Command{runCmd, extprocCmd, xdsCmd} {
		c.SetFlagErrorFunc(func(_ *cobra.Command, err error) error { return err })
	}
	root.AddCommand(runCmd, extprocCmd, xdsCmd, versionCmd, newEvalSearchCmd())
	return root
}

// serveCmd is the RunE of a serving command.
func serveCmd(m mode, logOut io.Writer, h hooks) func(*cobra.Command, []string) error {
	return func(cmd *cobra.Command, _ []string) error {
		cfg, err := commandConfig(cmd.Flags(), m)
		if err != nil {
			return err
		}
		log := newLogger(cfg, logOut)
		h.reloadConfig = func() (Config, error) { return loadConfig(cmd.Flags()) }
		if err := serve(cmd.Context(), m, cfg, log, h); err != nil {
			return runtimeError{err}
		}
		return nil
	}
}

// commandConfig loads the configuration and checks what mode needs of it.
func commandConfig(fs *pflag.FlagSet, m mode) (Config, error) {
	cfg, err := loadConfig(fs)
	if err != nil {
		return cfg, fmt.Errorf("invalid configuration:\n%w", err)
	}
	if m != modeRun && cfg.Portal == "" {
		return cfg, fmt.Errorf("%s needs --portal (the embedded demo is for run only)", m)
	}
	return cfg, nil
}
