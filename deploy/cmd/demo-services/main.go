// Command demo-services serves toolmesh's demo Tool Services (clock, calc
// and text, from package demo) on fixed addresses, for the Docker Compose
// setup in deploy/compose, where toolmesh and Envoy reach them over the
// network. `toolmesh run` starts the same services in-process on loopback.
//
//	demo-services [-clock :8081] [-calc :8082] [-text :8083]
package main

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"io"
	"log/slog"
	"net"
	"net/http"
	"os"
	"os/signal"
	"sync"
	"syscall"
	"time"

	"github.com/toolmesh/toolmesh/demo"
)

func main() {
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	err := run(ctx, os.Args[1:], os.Stderr, nil)
	stop()
	if err != nil {
		fmt.Fprintf(os.Stderr, "demo-services: %v\n", err)
		os.Exit(1)
	}
}

// run serves the demo services until ctx is done. listening, when set, is
// called with each service's name and bound address.
func run(ctx context.Context, args []string, logOut io.Writer, listening func(name, addr string)) error {
	fs := flag.NewFlagSet("demo-services", flag.ContinueOnError)
	fs.SetOutput(logOut)
	addrs := map[string]*string{
		demo.ClockService: fs.String("clock", ":8081", "clock service `address`"),
		demo.CalcService:  fs.String("calc", ":8082", "calc service `address`"),
		demo.TextService:  fs.String("text", ":8083", "text service `address`"),
	}
	if err := fs.Parse(args); err != nil {
		return err
	}
	log := slog.New(slog.NewJSONHandler(logOut, nil))

	var servers []*http.Server
	errc := make(chan error, len(addrs))
	for _, name := range []string{demo.ClockService, demo.CalcService, demo.TextService} {
		var lc net.ListenConfig
		ln, err := lc.Listen(ctx, "tcp", *addrs[name])
		if err != nil {
			for _, s := range servers {
				_ = s.Close()
			}
			return fmt.Errorf("listen %s: %w", name, err)
		}
		log.Info("listening", slog.String("service", name), slog.String("addr", ln.Addr().String()))
		if listening != nil {
			listening(name, ln.Addr().String())
		}
		srv := &http.Server{
			Handler:           demo.Handler(name),
			ReadHeaderTimeout: 10 * time.Second,
			ErrorLog:          slog.NewLogLogger(log.Handler(), slog.LevelWarn),
		}
		servers = append(servers, srv)
		go func() {
			if err := srv.Serve(ln); err != nil && !errors.Is(err, http.ErrServerClosed) {
				errc <- fmt.Errorf("%s: %w", name, err)
			}
		}()
	}

	var err error
	select {
	case <-ctx.Done():
	case err = <-errc:
	}
	// time.sleep may run for a minute; give calls in flight a few seconds.
	shutdown, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	var wg sync.WaitGroup
	for _, s := range servers {
		wg.Go(func() {
			if s.Shutdown(shutdown) != nil {
				_ = s.Close()
			}
		})
	}
	wg.Wait()
	return err
}
