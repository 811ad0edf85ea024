// Package demo holds sample Tool Services and the demo Portal that
// `toolmesh run` serves when no Portal is configured, so a newcomer can curl
// MCP at once. The services implement the Tool Service wire contract
// (docs/contracts/toolservice.md) over real HTTP on 127.0.0.1:
//
//   - clock: time.now (a JSON object reply) and time.sleep (the slow tool);
//   - calc: math.add (a CallToolResult reply) and math.multiply (a JSON number);
//   - text: text.echo and text.upper (text/plain replies), text.fail (500)
//     and text.forbidden (403).
//
// The demo Portal has two routes: core (clock + calc) and process
// (calc + text); calc is shared by both.
package demo

import (
	"bytes"
	"context"
	_ "embed"
	"errors"
	"fmt"
	"log/slog"
	"net"
	"net/http"
	"sync"
	"text/template"
	"time"
)

// Names of the demo Tool Services, as they appear in the demo Portal.
const (
	ClockService = "clock"
	CalcService  = "calc"
	TextService  = "text"
)

//go:embed demo/portal.yaml
var portalTemplate string

var portal = template.Must(template.New("portal.yaml").Option("missingkey=error").Parse(portalTemplate))

// shutdownTimeout bounds how long Close waits for calls in flight.
const shutdownTimeout = 5 * time.Second

// Services are the running demo Tool Services.
type Services struct {
	// Clock, Calc and Text are the base URLs (http://127.0.0.1:port) of the
	// clock, calc and text services.
	Clock, Calc, Text string

	servers   []*http.Server
	stop      func() bool // detaches the ctx watcher
	closeOnce sync.Once
	closeErr  error
}

// Start starts the three demo services, each on its own 127.0.0.1 port
// chosen by the kernel. They stop when ctx is done or Close is called. log
// may be nil.
func Start(ctx context.Context, log *slog.Logger) (*Services, error) {
	if log == nil {
		log = slog.New(slog.DiscardHandler)
	}
	s := &Services{}
	for _, def := range []struct {
		name string
		url  *string
	}{
		{ClockService, &s.Clock},
		{CalcService, &s.Calc},
		{TextService, &s.Text},
	} {
		var lc net.ListenConfig
		ln, err := lc.Listen(ctx, "tcp", "127.0.0.1:0")
		if err != nil {
			_ = s.Close()
			return nil, fmt.Errorf("start demo service %s: %w", def.name, err)
		}
		*def.url = "http://" + ln.Addr().String()
		svcLog := log.With(slog.String("demo_service", def.name))
		srv := &http.Server{
			Handler:           newService(def.name).handler(svcLog),
			ReadHeaderTimeout: 10 * time.Second,
			ErrorLog:          slog.NewLogLogger(svcLog.Handler(), slog.LevelWarn),
		}
		s.servers = append(s.servers, srv)
		go func() {
			if err := srv.Serve(ln); err != nil && !errors.Is(err, http.ErrServerClosed) {
				svcLog.Error("demo service stopped", slog.Any("error", err))
			}
		}()
		svcLog.Debug("demo service listening", slog.String("url", *def.url))
	}
	s.stop = context.AfterFunc(ctx, func() { _ = s.close() })
	return s, nil
}

// Close stops the services, letting calls in flight finish for a few
// seconds. It is safe to call more than once.
func (s *Services) Close() error {
	if s.stop != nil {
		s.stop()
	}
	return s.close()
}

func (s *Services) close() error {
	s.closeOnce.Do(func() {
		ctx, cancel := context.WithTimeout(context.Background(), shutdownTimeout)
		defer cancel()
		var errs []error
		for _, srv := range s.servers {
			if err := srv.Shutdown(ctx); err != nil {
				// A call such as time.sleep may outlive the grace period.
				errs = append(errs, srv.Close())
			}
		}
		s.closeErr = errors.Join(errs...)
	})
	return s.closeErr
}

// Portal renders the demo Portal (YAML, docs/contracts/portal.md) with the URLs of s.
func Portal(s *Services) []byte {
	var b bytes.Buffer
	if err := portal.Execute(&b, struct{ Clock, Calc, Text string }{s.Clock, s.Calc, s.Text}); err != nil {
		// The template is embedded and its data is three strings: this is a bug.
		panic(fmt.Sprintf("demo: render portal: %v", err))
	}
	return b.Bytes()
}

// Handler returns the HTTP handler of the named demo service (ClockService,
// CalcService or TextService), for tests; nil for any other name.
func Handler(name string) http.Handler {
	svc := newService(name)
	if svc == nil {
		return nil
	}
	return svc.handler(slog.New(slog.DiscardHandler))
}

// newService builds the named service; nil when there is none.
func newService(name string) *service {
	switch name {
	case ClockService:
		return clockService(time.Now)
	case CalcService:
		return calcService()
	case TextService:
		return textService()
	}
	return nil
}
