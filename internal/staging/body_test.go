package staging

import (
	"bytes"
	"errors"
	"io"
	"io/fs"
	"math/rand/v2"
	"sync"
	"sync/atomic"
	"testing"
)

// TestPipeBody checks the request body that device uploads stream
// through (its staging side faked): all the bytes in order; a Close
// before any Read starts nothing; a Close midway stops the writer and
// returns only once it has returned (so the bounce buffers are back
// before the request ends); a staging error reaches the reader.
func TestPipeBody(t *testing.T) {
	rng := rand.New(rand.NewPCG(71, 1))
	data := make([]byte, 3<<20+rng.IntN(4096))
	for i := range data {
		data[i] = byte(rng.Uint32())
	}
	chunks := func(w io.Writer) error {
		for off := 0; off < len(data); {
			n := min(1+rng.IntN(300<<10), len(data)-off)
			if _, err := w.Write(data[off : off+n]); err != nil {
				return err
			}
			off += n
		}
		return nil
	}
	b := newPipeBody(chunks)
	got, err := io.ReadAll(b)
	if err != nil || !bytes.Equal(got, data) {
		t.Fatalf("read %d of %d bytes (%v) or different ones", len(got), len(data), err)
	}
	b.Close()

	var started atomic.Bool
	b = newPipeBody(func(w io.Writer) error { started.Store(true); return chunks(w) })
	b.Close()
	if n, err := b.Read(make([]byte, 10)); n != 0 || !errors.Is(err, fs.ErrClosed) || started.Load() {
		t.Fatalf("Read after Close: %d, %v; staging started %v", n, err, started.Load())
	}

	var stopped atomic.Bool
	var werr error
	b = newPipeBody(func(w io.Writer) error {
		defer stopped.Store(true)
		for {
			if _, werr = w.Write(data[:64<<10]); werr != nil {
				return werr
			}
		}
	})
	if _, err := io.ReadFull(b, make([]byte, 100<<10)); err != nil {
		t.Fatal(err)
	}
	b.Close()
	if !stopped.Load() || werr == nil {
		t.Fatalf("Close returned before the writer stopped (stopped %v, write error %v)", stopped.Load(), werr)
	}

	// Close from another goroutine while a Read waits (as the transport
	// may do): the Read ends, nothing races.
	b = newPipeBody(func(w io.Writer) error { _, err := w.Write(data); return err })
	var wg sync.WaitGroup
	wg.Go(func() { io.Copy(io.Discard, b) })
	b.Close()
	wg.Wait()

	boom := errors.New("staging failed")
	b = newPipeBody(func(w io.Writer) error { w.Write(data[:1000]); return boom })
	if got, err := io.ReadAll(b); len(got) != 1000 || !errors.Is(err, boom) {
		t.Fatalf("staging error: read %d bytes, %v", len(got), err)
	}
	b.Close()
}
