package extprocfilter

import (
	"errors"
	"io"

	"github.com/toolmesh/toolmesh/envoy/dataplane/internal/xdsconfig"
)

// StreamReader runs a STREAMED body through the filter chunk by chunk as it
// is read. Like Envoy's data callbacks, a chunk carries end_of_stream when
// the read that produced it also hit the end; otherwise the end arrives as
// an empty chunk with end_of_stream (the terminating chunk of HTTP/1.1
// chunked encoding).
type StreamReader struct {
	e    *Filter
	dir  waitState
	src  io.Reader
	buf  *[streamChunk]byte // from readBufs, until the body ended
	out  []byte
	done bool
	fail *xdsconfig.LocalReply
}

// NewStreamReader is src, a body of direction dir, run through the filter
// in STREAMED mode as it is read.
func (e *Filter) NewStreamReader(dir waitState, src io.Reader) *StreamReader {
	return &StreamReader{e: e, dir: dir, src: src, buf: readBufs.Get().(*[streamChunk]byte)}
}

// Failed is the local reply an ext_proc failure while streaming is, once
// Read returned an error; nil otherwise.
func (s *StreamReader) Failed() *xdsconfig.LocalReply { return s.fail }

func (s *StreamReader) Read(p []byte) (int, error) {
	for len(s.out) == 0 {
		if s.done {
			return 0, io.EOF
		}
		n, rerr := s.src.Read(s.buf[:])
		eos := errors.Is(rerr, io.EOF)
		if rerr != nil && !eos {
			return 0, rerr
		}
		if n == 0 && !eos {
			continue
		}
		chunk := append([]byte(nil), s.buf[:n]...)
		if s.done = eos; eos {
			// Nothing more is read: the buffer goes back (a body not read
			// to its end leaves its buffer to the garbage collector).
			readBufs.Put(s.buf)
			s.buf = nil
		}
		if s.e.complete {
			s.out = chunk
			continue
		}
		out, lr, err := s.e.streamedChunk(s.dir, chunk, eos)
		if err != nil {
			return 0, err
		}
		if lr != nil {
			s.fail = lr
			return 0, errStreamFailed
		}
		s.out = out
	}
	n := copy(p, s.out)
	s.out = s.out[n:]
	return n, nil
}

// errStreamFailed means an ext_proc error happened while a STREAMED body was
// flowing; the caller sends the local reply if it still can, otherwise the
// downstream stream is reset.
var errStreamFailed = errors.New("ext_proc failed while streaming a body")
