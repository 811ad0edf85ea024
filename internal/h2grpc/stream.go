package h2grpc

import (
	"context"
	"encoding/base64"
	"encoding/binary"
	"errors"
	"io"
	"math"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"golang.org/x/net/http2"
	"golang.org/x/net/http2/hpack"
	spb "google.golang.org/genproto/googleapis/rpc/status"
	"google.golang.org/grpc"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/encoding"
	grpcproto "google.golang.org/grpc/encoding/proto"
	"google.golang.org/grpc/mem"
	"google.golang.org/grpc/metadata"
	"google.golang.org/grpc/status"
	"google.golang.org/protobuf/proto"
)

// errDone is what RecvMsg returns after an OK status and SendMsg once the
// stream has ended, as grpc-go's io.EOF.
var errDone = io.EOF

// grpc-go's defaults (dialoptions.go).
const (
	defaultMaxRecv = 4 << 20
	defaultMaxSend = math.MaxInt32
)

var protoCodec = func() encoding.CodecV2 {
	c := encoding.GetCodecV2(grpcproto.Name)
	if c == nil {
		panic("h2grpc: grpc-go's proto codec is not registered")
	}
	return c
}()

// stream is one gRPC call: a client stream of grpc.ClientStream. SendMsg
// and CloseSend are for one goroutine, RecvMsg for one (possibly another),
// as with grpc-go.
type stream struct {
	c       *conn
	ctx     context.Context
	method  string
	codec   encoding.CodecV2
	maxRecv int
	maxSend int
	id      uint32
	// Set by whichever of Send and Recv comes first; the HEADERS written
	// by NewStream are then flushed.
	needFlush atomic.Bool

	// Sending goroutine only.
	sentEnd bool
	prefix  [prefixLen]byte
	parts   [][]byte // what is left to write of the message
	partBuf [4][]byte

	// RecvMsg's goroutine only: the message handed to the codec.
	one [1]mem.Buffer
	sb  mem.SliceBuffer

	// Reader goroutine only.
	asm        assembler
	unacked    uint32
	gotHeaders bool

	// Guarded by conn.mu.
	sendWindow int64
	localEnded bool // END_STREAM sent
	closed     bool // off the connection

	mu   sync.Mutex
	stop func() bool // stops the context's AfterFunc
	msgs []*[]byte   // received, not yet taken
	head int
	// Response header and trailer fields, made metadata only when asked
	// for (the data plane never does).
	header  []hpack.HeaderField
	trailer []hpack.HeaderField
	hdrDone bool
	hdrCh   chan struct{} // closed when hdrDone is set: Header's own wake-up
	done    bool
	err     error         // once done: errDone or a status error
	wake    chan struct{} // capacity 1: messages, headers or the end arrived
}

func (s *stream) applyOptions(opts []grpc.CallOption) {
	for _, o := range opts {
		switch o := o.(type) {
		case grpc.ForceCodecV2CallOption:
			s.codec = o.CodecV2
		case grpc.MaxRecvMsgSizeCallOption:
			s.maxRecv = o.MaxRecvMsgSize
		case grpc.MaxSendMsgSizeCallOption:
			s.maxSend = o.MaxSendMsgSize
		}
	}
	s.asm.max = s.maxRecv
	s.wake = make(chan struct{}, 1)
	s.hdrCh = make(chan struct{})
}

// headersDoneLocked sets hdrDone and wakes Header; s.mu is held.
func (s *stream) headersDoneLocked() {
	if !s.hdrDone {
		s.hdrDone = true
		close(s.hdrCh)
	}
}

func (s *stream) signal() {
	select {
	case s.wake <- struct{}{}:
	default:
	}
}

// push queues received messages; reader goroutine.
func (s *stream) push(msgs []*[]byte) {
	s.mu.Lock()
	if s.done {
		s.mu.Unlock()
		for _, b := range msgs {
			putBuf(b)
		}
		return
	}
	s.msgs = append(s.msgs, msgs...)
	s.mu.Unlock()
	s.signal()
}

func (s *stream) setHeader(fields []hpack.HeaderField) {
	s.mu.Lock()
	s.header = fields
	s.headersDoneLocked()
	s.mu.Unlock()
	s.signal()
}

func (s *stream) setTrailer(fields []hpack.HeaderField) {
	s.mu.Lock()
	s.trailer = fields
	s.mu.Unlock()
}

// finish records the stream's end; keep leaves the received messages to
// be read first.
func (s *stream) finish(err error, keep bool) {
	s.mu.Lock()
	if s.done {
		s.mu.Unlock()
		return
	}
	s.done, s.err = true, err
	s.headersDoneLocked()
	stop := s.stop
	var drop []*[]byte
	if !keep {
		drop = s.msgs[s.head:]
		s.msgs, s.head = nil, 0
	}
	s.mu.Unlock()
	for _, b := range drop {
		putBuf(b)
	}
	if stop != nil {
		stop()
	}
	s.signal()
}

// watchContext resets the stream when its context ends first, on a
// goroutine of its own: Header, SendMsg and RecvMsg only wait for the end.
func (s *stream) watchContext() {
	stop := context.AfterFunc(s.ctx, s.onCtxDone)
	s.mu.Lock()
	done := s.done
	s.stop = stop
	s.mu.Unlock()
	if done {
		stop()
	}
}

// onCtxDone cancels the stream: RST_STREAM(CANCEL), and Canceled or
// DeadlineExceeded for the caller.
func (s *stream) onCtxDone() {
	s.c.closeStream(s, status.FromContextError(s.ctx.Err()).Err(), false, true, http2.ErrCodeCancel)
}

func (s *stream) Context() context.Context { return s.ctx }

// Header waits for the response headers (or the end of the stream). It
// waits on hdrCh, not on wake, which a RecvMsg on another goroutine may
// take first.
func (s *stream) Header() (metadata.MD, error) {
	s.flushHeaders()
	<-s.hdrCh // a cancelled context ends the stream (watchContext)
	s.mu.Lock()
	fields, done, err := s.header, s.done, s.err
	s.mu.Unlock()
	if done && fields == nil && !errors.Is(err, errDone) {
		return nil, err
	}
	return fieldsMD(fields), nil
}

// Trailer is the trailer metadata, once RecvMsg has returned an error.
func (s *stream) Trailer() metadata.MD {
	s.mu.Lock()
	defer s.mu.Unlock()
	return fieldsMD(s.trailer)
}

func (s *stream) flushHeaders() {
	if s.needFlush.Load() && s.needFlush.Swap(false) {
		_ = s.c.flush()
	}
}

// SendMsg writes one message: one flush, DATA frames within the server's
// windows and SETTINGS_MAX_FRAME_SIZE.
func (s *stream) SendMsg(m any) error {
	if s.sentEnd {
		return status.Error(codes.Internal, "SendMsg called after CloseSend")
	}
	data, err := s.codec.Marshal(m)
	if err != nil {
		err = status.Errorf(codes.Internal, "grpc: error while marshaling: %v", err)
		s.c.closeStream(s, err, false, true, http2.ErrCodeCancel)
		return err
	}
	defer data.Free()
	size := data.Len()
	if size > s.maxSend {
		err = status.Errorf(codes.ResourceExhausted, "trying to send message larger than max (%d vs. %d)", size, s.maxSend)
		s.c.closeStream(s, err, false, true, http2.ErrCodeCancel)
		return err
	}
	s.prefix[0] = 0
	binary.BigEndian.PutUint32(s.prefix[1:], uint32(size))
	if s.parts == nil {
		s.parts = s.partBuf[:0]
	}
	s.parts = append(s.parts[:0], s.prefix[:])
	for _, b := range data {
		s.parts = append(s.parts, b.ReadOnlyData())
	}
	err = s.send(prefixLen+size, false)
	clear(s.parts)
	return err
}

// CloseSend half-closes the stream: an empty DATA frame with END_STREAM
// (AsyncStreamImpl::closeStream).
func (s *stream) CloseSend() error {
	if s.sentEnd {
		return nil
	}
	s.sentEnd = true
	_ = s.send(0, true)
	return nil
}

// CloseAndReset ends the stream as Envoy's ext_proc filter ends its own
// (ExternalProcessorStreamImpl::close: closeStream, then resetStream): an
// empty DATA frame with END_STREAM, unless one went out already, and
// RST_STREAM(CANCEL), written together with one flush on the caller's
// goroutine, as Envoy's codec sends both from one dispatcher iteration.
// CloseSend followed by a cancelled context does the same in two writes,
// the second on the context watcher's goroutine. RecvMsg then returns
// Canceled; the context is left to the caller.
func (s *stream) CloseAndReset() {
	c := s.c
	c.wmu.Lock()
	c.mu.Lock()
	if s.closed {
		c.mu.Unlock()
		c.wmu.Unlock()
		return
	}
	s.closed = true
	live := c.err == nil
	if live {
		delete(c.streams, s.id)
		c.active--
	}
	end := !s.localEnded
	s.localEnded, s.sentEnd = true, true
	c.broadcastLocked()
	idle := c.idleLocked()
	c.mu.Unlock()
	var err error
	if live {
		if end {
			err = c.wfr.WriteData(s.id, true, nil)
		}
		if err == nil {
			err = c.wfr.WriteRSTStream(s.id, http2.ErrCodeCancel)
		}
		if err == nil {
			err = c.bw.Flush()
		}
	}
	c.wmu.Unlock()
	s.needFlush.Store(false)
	s.finish(status.Error(codes.Canceled, "stream closed by the client"), false)
	if err != nil {
		c.fail(status.Errorf(codes.Unavailable, "write to %s: %v", c.cc.opts.Target, err))
	}
	if idle {
		c.closeDrained()
	}
}

// send writes n bytes of s.parts, waiting for window as needed. wmu is
// held from the check that s is open to the write: a stream reset
// meanwhile (its RST_STREAM written under wmu after s.closed is set) gets
// no DATA after the RST_STREAM (RFC 9113 §5.1, "closed").
func (s *stream) send(n int, end bool) error {
	c := s.c
	for {
		c.wmu.Lock()
		c.mu.Lock()
		var k int
		for {
			if s.closed {
				c.mu.Unlock()
				c.wmu.Unlock()
				s.flushHeaders()
				return errDone // RecvMsg tells how it ended
			}
			k = int(max(min(int64(n), c.sendWindow, s.sendWindow), 0))
			if k > 0 || n == 0 {
				break
			}
			ch := c.waiterLocked()
			c.mu.Unlock()
			s.needFlush.Store(false)
			err := c.bw.Flush()
			c.wmu.Unlock()
			if err != nil {
				err = status.Errorf(codes.Unavailable, "write to %s: %v", c.cc.opts.Target, err)
				c.fail(err)
				return err
			}
			select {
			case <-ch:
			case <-s.ctx.Done():
				// watchContext's goroutine resets the stream.
				return status.FromContextError(s.ctx.Err()).Err()
			}
			c.wmu.Lock()
			c.mu.Lock()
		}
		c.sendWindow -= int64(k)
		s.sendWindow -= int64(k)
		last := k == n
		if last && end {
			s.localEnded = true
		}
		maxFrame := c.maxFrame
		c.mu.Unlock()
		c.writeData(s, k, last && end, maxFrame)
		if !last {
			c.wmu.Unlock()
			n -= k
			continue
		}
		err := c.bw.Flush()
		c.wmu.Unlock()
		s.needFlush.Store(false)
		if err != nil {
			err = status.Errorf(codes.Unavailable, "write to %s: %v", c.cc.opts.Target, err)
			c.fail(err)
		}
		return err
	}
}

// RecvMsg decodes the next whole message into m; it returns io.EOF after
// an OK status, otherwise the stream's status error.
func (s *stream) RecvMsg(m any) error {
	s.flushHeaders()
	for {
		s.mu.Lock()
		if s.head < len(s.msgs) {
			b := s.msgs[s.head]
			s.msgs[s.head] = nil
			s.head++
			if s.head == len(s.msgs) {
				s.msgs, s.head = s.msgs[:0], 0
			}
			s.mu.Unlock()
			return s.decode(b, m)
		}
		if s.done {
			err := s.err
			s.mu.Unlock()
			return err
		}
		s.mu.Unlock()
		// A cancelled context ends the stream on watchContext's
		// goroutine, which wakes this one: the RST_STREAM it writes may
		// wait for the connection's writer, the caller does not.
		<-s.wake
	}
}

// decode hands b to the codec and returns it to the pool afterwards; a
// large buffer goes as a reference-counted mem.Buffer, so a codec keeping
// a reference keeps it out of the pool.
func (s *stream) decode(b *[]byte, m any) error {
	// The slice and a small message's SliceBuffer live in s: a codec
	// keeps nothing of data past Unmarshal but what it Refs.
	small := mem.IsBelowBufferPoolingThreshold(len(*b))
	if small {
		s.sb = *b
		s.one[0] = &s.sb
	} else {
		s.one[0] = mem.NewBuffer(b, recvPool{})
	}
	data := mem.BufferSlice(s.one[:])
	err := s.codec.Unmarshal(data, m)
	if small {
		s.sb = nil
		putBuf(b)
	} else {
		data.Free()
	}
	s.one[0] = nil
	if err != nil {
		err = status.Errorf(codes.Internal, "grpc: failed to unmarshal the received message: %v", err)
		s.c.closeStream(s, err, false, true, http2.ErrCodeCancel)
	}
	return err
}

// recvPool is the receive buffer pool as a mem.BufferPool.
type recvPool struct{}

func (recvPool) Get(n int) *[]byte { return getBuf(n) }
func (recvPool) Put(b *[]byte)     { putBuf(b) }

// encodeHeaders writes the request headers of s into the HPACK encoder;
// wmu is held. They are Envoy's gRPC client's: Grpc::Common::prepareHeaders
// (source/common/grpc/common.cc: :method POST, :path, :authority, te:
// trailers before grpc-timeout and content-type application/grpc), the
// :scheme of a cleartext upstream, x-envoy-internal and x-forwarded-for
// from Http::AsyncStreamImpl::sendHeaders
// (source/common/http/async_client_impl.cc, send_internal and send_xff),
// then the outgoing metadata, -bin values base64-encoded
// (source/common/grpc/async_client_impl.cc base64EscapeBinHeaders).
func (c *conn) encodeHeaders(s *stream) {
	w := func(k, v string) { _ = c.henc.WriteField(hpack.HeaderField{Name: k, Value: v}) }
	w(":method", "POST")
	w(":scheme", "http")
	w(":path", s.method)
	w(":authority", c.cc.opts.Authority)
	w("te", "trailers")
	if dl, ok := s.ctx.Deadline(); ok {
		w("grpc-timeout", grpcTimeout(time.Until(dl)))
	}
	w("content-type", "application/grpc")
	w("x-envoy-internal", "true")
	if c.xff != "" {
		w("x-forwarded-for", c.xff)
	}
	md, _ := metadata.FromOutgoingContext(s.ctx) // keys lowercased
	for k, vs := range md {
		if reserved(k) {
			continue
		}
		for _, v := range vs {
			w(k, binValue(k, v))
		}
	}
}

// reserved reports headers the client sets itself, which metadata does
// not override (grpc-go's isReservedHeader) [choice].
func reserved(k string) bool {
	switch k {
	case "content-type", "te", "grpc-timeout", "grpc-encoding", "grpc-message", "grpc-status",
		"grpc-status-details-bin", "grpc-message-type", "x-envoy-internal", "x-forwarded-for":
		return true
	}
	return strings.HasPrefix(k, ":")
}

func binValue(k, v string) string {
	if strings.HasSuffix(k, "-bin") {
		return base64.StdEncoding.EncodeToString([]byte(v))
	}
	return v
}

// grpcTimeout formats a timeout as Envoy's Grpc::Common::toGrpcTimeout:
// milliseconds, in the smallest unit that fits 8 digits.
func grpcTimeout(d time.Duration) string {
	ms := max(int64((d+time.Millisecond-1)/time.Millisecond), 0)
	const maxValue = 99999999
	t, units, u := ms, "mSMH", 0
	if t > maxValue {
		t /= 1000
		u++
	}
	for t > maxValue {
		if units[u] == 'H' {
			t = maxValue
			break
		}
		t /= 60
		u++
	}
	return strconv.FormatInt(t, 10) + units[u:u+1]
}

// fieldsMD is the metadata of response header fields.
func fieldsMD(fields []hpack.HeaderField) metadata.MD {
	md := metadata.MD{}
	for _, hf := range fields {
		v := hf.Value
		if strings.HasSuffix(hf.Name, "-bin") {
			if b, err := decodeBin(v); err == nil {
				v = string(b)
			}
		}
		md[hf.Name] = append(md[hf.Name], v)
	}
	return md
}

func hasField(f *http2.MetaHeadersFrame, name string) bool {
	for _, hf := range f.RegularFields() {
		if hf.Name == name {
			return true
		}
	}
	return false
}

func decodeBin(v string) ([]byte, error) {
	if len(v)%4 == 0 {
		return base64.StdEncoding.DecodeString(v)
	}
	return base64.RawStdEncoding.DecodeString(v)
}

// trailerStatus is the status of a trailers (or Trailers-Only) frame:
// grpc-status (Unknown when absent, as AsyncStreamImpl::onTrailers),
// grpc-message percent-decoded, grpc-status-details-bin when it agrees.
func trailerStatus(f *http2.MetaHeadersFrame) error {
	var code, msg, details string
	seen := false
	for _, hf := range f.RegularFields() {
		switch hf.Name {
		case "grpc-status":
			code, seen = hf.Value, true
		case "grpc-message":
			msg = decodeGrpcMessage(hf.Value)
		case "grpc-status-details-bin":
			details = hf.Value
		}
	}
	if !seen {
		return status.Error(codes.Unknown, "server closed the stream without a grpc-status")
	}
	n, err := strconv.ParseUint(code, 10, 32)
	if err != nil {
		return status.Errorf(codes.Internal, "transport: malformed grpc-status: %q", code)
	}
	if n == 0 {
		return errDone
	}
	if details != "" {
		if b, err := decodeBin(details); err == nil {
			var sp spb.Status
			if proto.Unmarshal(b, &sp) == nil && sp.GetCode() == int32(n) {
				return status.FromProto(&sp).Err()
			}
		}
	}
	return status.Error(codes.Code(n), msg)
}

// decodeGrpcMessage undoes grpc-message's percent-encoding
// (grpc/grpc doc/PROTOCOL-HTTP2.md); a malformed escape stays as it is.
func decodeGrpcMessage(s string) string {
	if !strings.Contains(s, "%") {
		return s
	}
	var b strings.Builder
	for i := 0; i < len(s); i++ {
		if s[i] == '%' && i+2 < len(s) {
			if v, err := strconv.ParseUint(s[i+1:i+3], 16, 8); err == nil {
				b.WriteByte(byte(v))
				i += 2
				continue
			}
		}
		b.WriteByte(s[i])
	}
	return b.String()
}
