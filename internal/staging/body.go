package staging

import (
	"errors"
	"io"
	"io/fs"
	"sync"

	"github.com/kvikgo/kvik/internal/devmem"
	"github.com/kvikgo/kvik/internal/sched"
)

// DeviceBody returns a reader over n bytes of the device range r from
// off, for a request body, staged as pl plans: once read, a goroutine
// copies the range from the device into pinned bounce buffers, chunk k+1
// on a stream of r's context while the transport reads chunk k (Write's
// pipeline), and hands each chunk to the transport through a pipe, so no
// copy is one synchronous cuMemcpy per Read. Close, which the transport
// calls from any goroutine, stops the copies and returns the buffers
// before it returns, so the device memory is no longer read once the
// request is done.
func (pl Planner) DeviceBody(r devmem.Range, off int64, n int) *PipeBody {
	s := &deviceStager{pl: pl, r: r, off: off, n: n}
	return newPipeBody(s.stage)
}

// newPipeBody returns a body whose bytes stage writes, from a goroutine
// started by the first Read.
func newPipeBody(stage func(w io.Writer) error) *PipeBody {
	return &PipeBody{stage: stage, done: make(chan struct{})}
}

// PipeBody is the reader of DeviceBody (and of newPipeBody).
type PipeBody struct {
	stage func(w io.Writer) error
	once  sync.Once
	pr    *io.PipeReader // nil until the first Read, and if closed before
	done  chan struct{}  // closed when the staging goroutine has returned
}

// deviceStager copies n bytes of r from off through pinned memory.
type deviceStager struct {
	pl  Planner
	r   devmem.Range
	off int64
	n   int
}

func (b *PipeBody) Read(p []byte) (int, error) {
	b.once.Do(b.start)
	if b.pr == nil {
		return 0, fs.ErrClosed
	}
	return b.pr.Read(p)
}

func (b *PipeBody) start() {
	pr, pw := io.Pipe()
	b.pr = pr
	go func() {
		defer close(b.done)
		pw.CloseWithError(b.stage(pw)) // nil: readers get io.EOF
	}()
}

// Close stops the staging goroutine, if one started, and waits for it.
func (b *PipeBody) Close() error {
	b.once.Do(func() {}) // a later Read starts nothing
	if b.pr != nil {
		b.pr.CloseWithError(fs.ErrClosed)
		<-b.done
	}
	return nil
}

// stage copies the range to w chunk by chunk through pinned memory.
func (b *deviceStager) stage(w io.Writer) error {
	if b.n == 0 {
		return nil
	}
	p := b.pl.Plan(true, b.n, ChunkPipeline)
	// One pinned buffer per part in flight, holding two chunks: the
	// transport sends a chunk far slower than the device copies the
	// next, so chunks smaller than the plan's cost nothing and a part
	// never pins two buffers.
	if half := p.BufSize / 2 &^ (PageSize - 1); b.n > p.Chunk && 2*p.Chunk > p.BufSize && half > 0 {
		p.Chunk = half
	}
	t := sched.Task{Off: 0, Len: b.n, BufOff: int(b.off)}
	_, err := b.pl.Tuning.Task(true, b.r, t, p, 0, true, func(c *Copier) Mover {
		return &pipeMover{Copier: c, w: w}
	})
	return err
}

// pipeMover feeds the chunks that Write copies from the device
// to a writer (the request body's pipe).
type pipeMover struct {
	*Copier
	w io.Writer
}

func (m *pipeMover) WriteFile(p []byte, off int64) (int, error) { return m.w.Write(p) }

func (m *pipeMover) ReadFile(p []byte, off int64) (int, error) {
	return 0, errors.New("staging: upload bodies only write")
}
