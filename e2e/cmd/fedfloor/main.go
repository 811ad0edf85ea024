// Command fedfloor is the floor under e2e's BenchmarkFederatedToolsCall: a
// Go HTTP proxy in front of one upstream that, with --extproc, also makes
// for every request the ext_proc exchange the local data plane of
// `toolmesh run` makes for a federated tools/call (request headers, request
// body, response headers, each response body chunk FULL_DUPLEX_STREAMED and
// the empty last one), against a no-op ExternalProcessor served over
// grpc-go on loopback in the same process, as `toolmesh run` serves its
// extproc server beside its data plane. Without --extproc it is a bare
// reverse proxy (net/http/httputil). It runs as a process of its own so
// that its CPU time is read from /proc like toolmesh's.
//
//	fedfloor --upstream http://127.0.0.1:PORT [--extproc]
//
// It prints the URL it serves on, one line, and serves until killed.
//
// The ext_proc exchange is the least a data plane of this shape can do:
// one goroutine per request (the HTTP handler's) sends each message and
// waits for its reply in turn; the no-op server answers each message at
// once, echoing each body chunk as a streamed response. The gRPC options
// are those of the local data plane's ext_proc client and of toolmesh's
// extproc server (envoy/dataplane dataplane.go, extproc GRPCServerOptions).
package main

import (
	"bytes"
	"context"
	"errors"
	"flag"
	"fmt"
	"io"
	"log"
	"math"
	"net"
	"net/http"
	"net/http/httputil"
	"net/url"
	"os"
	"runtime"
	"strconv"
	"strings"
	"time"

	corev3 "github.com/envoyproxy/go-control-plane/envoy/config/core/v3"
	extprocv3 "github.com/envoyproxy/go-control-plane/envoy/service/ext_proc/v3"
	"google.golang.org/grpc"
	"google.golang.org/grpc/credentials/insecure"
)

func main() {
	upstream := flag.String("upstream", "", "the upstream's base `URL` (required)")
	withExtProc := flag.Bool("extproc", false, "make the ext_proc exchange of a federated call for every request")
	flag.Parse()
	u, err := url.Parse(*upstream)
	if *upstream == "" || err != nil {
		fmt.Fprintln(os.Stderr, "fedfloor: --upstream must be a URL")
		os.Exit(2)
	}
	tr := &http.Transport{MaxIdleConnsPerHost: 64}
	var h http.Handler = bareProxy(u, tr)
	if *withExtProc {
		client, err := startNoop()
		if err != nil {
			log.Fatalf("fedfloor: %v", err)
		}
		h = &floor{up: u, tr: tr, ep: client}
	}
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		log.Fatalf("fedfloor: %v", err)
	}
	fmt.Println("http://" + ln.Addr().String())
	srv := &http.Server{Handler: h, ReadHeaderTimeout: 10 * time.Second, ErrorLog: log.New(os.Stderr, "fedfloor: ", 0)}
	log.Fatal(srv.Serve(ln))
}

// bareProxy is a reverse proxy to u with events flushed as they come. The
// request body is read whole first: streamed from the client's connection,
// it made the transport close the upstream connection now and then while
// the answer was still being copied.
func bareProxy(u *url.URL, tr http.RoundTripper) http.Handler {
	return &httputil.ReverseProxy{
		Rewrite: func(r *httputil.ProxyRequest) {
			r.SetURL(u)
			if b, err := io.ReadAll(r.In.Body); err == nil {
				r.Out.Body, r.Out.ContentLength = io.NopCloser(bytes.NewReader(b)), int64(len(b))
			}
		},
		FlushInterval: -1,
		Transport:     tr,
		ErrorLog:      log.New(os.Stderr, "fedfloor proxy: ", 0),
	}
}

// The local data plane's ext_proc client: the windows of Envoy's HTTP/2
// codec (rules.EnvoyHTTP2StreamWindow and EnvoyHTTP2ConnWindow), no
// retries, no receive limit (xdsconfig.ExtProcCallOptions) and the
// filter's cluster as :authority.
const (
	clientStreamWindow = 16 << 20
	clientConnWindow   = 24 << 20
	extProcAuthority   = "toolmesh_extproc"
	// toolmesh's extproc server: its window is the larger of the body
	// and reply limits (1 and 4 MiB by default) plus 1 MiB of headroom,
	// its write buffer 128 KiB, 16 stream workers per core.
	serverWindow      = 5 << 20
	serverWriteBuffer = 128 << 10
)

// startNoop serves the no-op ExternalProcessor on loopback and returns a
// client of it.
func startNoop() (extprocv3.ExternalProcessorClient, error) {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		return nil, err
	}
	gs := grpc.NewServer(
		grpc.MaxRecvMsgSize(serverWindow),
		grpc.InitialWindowSize(serverWindow),
		grpc.InitialConnWindowSize(serverWindow),
		grpc.WriteBufferSize(serverWriteBuffer),
		grpc.NumStreamWorkers(uint32(16*runtime.GOMAXPROCS(0))),
	)
	extprocv3.RegisterExternalProcessorServer(gs, noop{})
	go func() {
		if err := gs.Serve(ln); err != nil {
			log.Fatalf("fedfloor: ext_proc server: %v", err)
		}
	}()
	cc, err := grpc.NewClient(ln.Addr().String(),
		grpc.WithTransportCredentials(insecure.NewCredentials()),
		grpc.WithInitialWindowSize(clientStreamWindow),
		grpc.WithInitialConnWindowSize(clientConnWindow),
		grpc.WithDisableRetry())
	if err != nil {
		return nil, fmt.Errorf("connect to the no-op ext_proc server: %w", err)
	}
	return extprocv3.NewExternalProcessorClient(cc), nil
}

// noop answers every message at once and changes nothing; a response body
// chunk comes back as the streamed response a FULL_DUPLEX_STREAMED body
// needs, with its end_of_stream.
type noop struct {
	extprocv3.UnimplementedExternalProcessorServer
}

func (noop) Process(stream extprocv3.ExternalProcessor_ProcessServer) error {
	for {
		req, err := stream.Recv()
		if err != nil {
			return nil
		}
		cr := &extprocv3.CommonResponse{}
		var resp *extprocv3.ProcessingResponse
		switch r := req.GetRequest().(type) {
		case *extprocv3.ProcessingRequest_RequestHeaders:
			resp = &extprocv3.ProcessingResponse{Response: &extprocv3.ProcessingResponse_RequestHeaders{
				RequestHeaders: &extprocv3.HeadersResponse{Response: cr}}}
		case *extprocv3.ProcessingRequest_RequestBody:
			resp = &extprocv3.ProcessingResponse{Response: &extprocv3.ProcessingResponse_RequestBody{
				RequestBody: &extprocv3.BodyResponse{Response: cr}}}
		case *extprocv3.ProcessingRequest_ResponseHeaders:
			resp = &extprocv3.ProcessingResponse{Response: &extprocv3.ProcessingResponse_ResponseHeaders{
				ResponseHeaders: &extprocv3.HeadersResponse{Response: cr}}}
		case *extprocv3.ProcessingRequest_ResponseBody:
			cr.BodyMutation = &extprocv3.BodyMutation{Mutation: &extprocv3.BodyMutation_StreamedResponse{
				StreamedResponse: &extprocv3.StreamedBodyResponse{Body: r.ResponseBody.GetBody(), EndOfStream: r.ResponseBody.GetEndOfStream()}}}
			resp = &extprocv3.ProcessingResponse{Response: &extprocv3.ProcessingResponse_ResponseBody{
				ResponseBody: &extprocv3.BodyResponse{Response: cr}}}
		default:
			return fmt.Errorf("unexpected message %T", r)
		}
		if err := stream.Send(resp); err != nil {
			return nil
		}
	}
}

// floor is the proxy with the ext_proc exchange.
type floor struct {
	up *url.URL
	tr http.RoundTripper
	ep extprocv3.ExternalProcessorClient
}

func (f *floor) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	if err := f.serve(w, r); err != nil {
		log.Printf("fedfloor: %s %s: %v", r.Method, r.URL.Path, err)
		panic(http.ErrAbortHandler)
	}
}

func (f *floor) serve(w http.ResponseWriter, r *http.Request) error {
	// The stream ends with the request: CloseSend and the context's cancel,
	// as the data plane's filter closes it.
	ctx, cancel := context.WithCancel(r.Context())
	defer cancel()
	st, err := f.ep.Process(ctx, grpc.MaxCallRecvMsgSize(math.MaxInt32), grpc.CallAuthority(extProcAuthority))
	if err != nil {
		return err
	}
	defer func() { _ = st.CloseSend() }()
	exchange := func(req *extprocv3.ProcessingRequest) error {
		if err := st.Send(req); err != nil {
			return err
		}
		_, err := st.Recv()
		return err
	}
	reqH := headerMap(r.Header, ":method", r.Method, ":path", r.URL.RequestURI(), ":authority", r.Host, ":scheme", "http")
	if err := exchange(&extprocv3.ProcessingRequest{Request: &extprocv3.ProcessingRequest_RequestHeaders{
		RequestHeaders: &extprocv3.HttpHeaders{Headers: reqH}}}); err != nil {
		return err
	}
	body, err := io.ReadAll(r.Body)
	if err != nil {
		return err
	}
	if err := exchange(&extprocv3.ProcessingRequest{Request: &extprocv3.ProcessingRequest_RequestBody{
		RequestBody: &extprocv3.HttpBody{Body: body, EndOfStream: true}}}); err != nil {
		return err
	}
	out, err := http.NewRequestWithContext(ctx, r.Method, f.up.JoinPath(r.URL.Path).String(), bytes.NewReader(body))
	if err != nil {
		return err
	}
	out.Header = r.Header.Clone()
	resp, err := f.tr.RoundTrip(out)
	if err != nil {
		return err
	}
	defer resp.Body.Close()
	// The response headers and the body chunks go as they come; the
	// headers reach the client once their reply came, each chunk once its
	// streamed response came.
	respH := headerMap(resp.Header, ":status", strconv.Itoa(resp.StatusCode))
	if err := exchange(&extprocv3.ProcessingRequest{Request: &extprocv3.ProcessingRequest_ResponseHeaders{
		ResponseHeaders: &extprocv3.HttpHeaders{Headers: respH}}}); err != nil {
		return err
	}
	for k, v := range resp.Header {
		if k != "Content-Length" {
			w.Header()[k] = v
		}
	}
	w.WriteHeader(resp.StatusCode)
	flusher := w.(http.Flusher)
	flusher.Flush()
	buf := make([]byte, 32<<10)
	for {
		n, rerr := resp.Body.Read(buf)
		eos := errors.Is(rerr, io.EOF)
		if rerr != nil && !eos {
			return rerr
		}
		if n == 0 && !eos {
			continue
		}
		if err := st.Send(&extprocv3.ProcessingRequest{Request: &extprocv3.ProcessingRequest_ResponseBody{
			ResponseBody: &extprocv3.HttpBody{Body: bytes.Clone(buf[:n]), EndOfStream: eos}}}); err != nil {
			return err
		}
		reply, err := st.Recv()
		if err != nil {
			return err
		}
		if b := reply.GetResponseBody().GetResponse().GetBodyMutation().GetStreamedResponse().GetBody(); len(b) > 0 {
			if _, err := w.Write(b); err != nil {
				return err
			}
			flusher.Flush()
		}
		if eos {
			return nil
		}
	}
}

// headerMap is h as an ext_proc header map with the given pseudo-headers
// first, the values as raw_value, as Envoy sends them.
func headerMap(h http.Header, pseudo ...string) *corev3.HeaderMap {
	m := &corev3.HeaderMap{}
	for i := 0; i+1 < len(pseudo); i += 2 {
		m.Headers = append(m.Headers, &corev3.HeaderValue{Key: pseudo[i], RawValue: []byte(pseudo[i+1])})
	}
	for k, vs := range h {
		for _, v := range vs {
			m.Headers = append(m.Headers, &corev3.HeaderValue{Key: strings.ToLower(k), RawValue: []byte(v)})
		}
	}
	return m
}
