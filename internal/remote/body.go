package remote

import (
	"context"
	"io"
	"net"
	"sync"
)

// Tuning is how bodies are received. The zero value is the built-in
// choice (measured: none of these helped on loopback or on the GPU
// machine's network); kvik's benchmarks set other values with SetTuning
// between reads to compare (never while a read is in flight).
type Tuning struct {
	// BodyStage, when positive, receives a body longer than BodyStage
	// bytes through a reused buffer of that size, copying each filled
	// buffer out, instead of straight into the caller's buffer: the
	// socket copy then writes to a cache-warm buffer, and the copy out
	// streams to the destination (Go's copy of 1 MiB or more uses
	// non-temporal stores).
	BodyStage int
	// SocketReadBuffer, when positive, sets SO_RCVBUF on each new
	// connection (which turns off the kernel's receive autotuning).
	SocketReadBuffer int
	// ConnReadBuffer, when positive, is the transport's ReadBufferSize:
	// the buffered reader in front of each connection (4 KiB by default;
	// reads at least that long bypass it). It applies to transports made
	// after it is set.
	ConnReadBuffer int
}

// tuning is the Tuning in force.
var tuning Tuning

// SetTuning puts t in force and returns the function that restores the
// previous tuning (for benchmarks that compare).
func SetTuning(t Tuning) (restore func()) {
	old := tuning
	tuning = t
	return func() { tuning = old }
}

// CurrentTuning returns the Tuning in force.
func CurrentTuning() Tuning { return tuning }

// stagePool holds Tuning.BodyStage buffers; a sync.Pool keeps one per P, so a
// worker usually gets back the buffer its core last wrote.
var stagePool sync.Pool

// readBody fills p from r as io.ReadFull does, through a BodyStage
// buffer when p is longer than one.
func readBody(r io.Reader, p []byte) (int, error) {
	stage := tuning.BodyStage
	if stage <= 0 || len(p) <= stage {
		return io.ReadFull(r, p)
	}
	bp, _ := stagePool.Get().(*[]byte)
	if bp == nil || len(*bp) != stage {
		b := make([]byte, stage)
		bp = &b
	}
	defer stagePool.Put(bp)
	buf, done := *bp, 0
	for done < len(p) {
		n, err := io.ReadFull(r, buf[:min(len(buf), len(p)-done)])
		done += copy(p[done:], buf[:n])
		if err == io.EOF && done > 0 {
			err = io.ErrUnexpectedEOF
		}
		if err != nil {
			return done, err
		}
	}
	return done, nil
}

// dialContext dials with d and applies SocketReadBuffer to the new
// connection.
func dialContext(d *net.Dialer) func(ctx context.Context, network, addr string) (net.Conn, error) {
	return func(ctx context.Context, network, addr string) (net.Conn, error) {
		c, err := d.DialContext(ctx, network, addr)
		if tc, ok := c.(*net.TCPConn); ok && tuning.SocketReadBuffer > 0 {
			tc.SetReadBuffer(tuning.SocketReadBuffer) // best effort: the kernel caps it
		}
		return c, err
	}
}
