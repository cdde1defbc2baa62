package staging

import (
	"github.com/kvikgo/kvik/cuda"
	"github.com/kvikgo/kvik/internal/devmem"
	"github.com/kvikgo/kvik/internal/sched"
)

// WaitKind is how a copier waits for its device copies.
type WaitKind int

const (
	// WaitPoll polls the stream and yields in between (devmem.WaitStream):
	// 1.04x spinning over 69 cells on five H200s.
	WaitPoll WaitKind = iota
	// WaitSpin waits in cuStreamSynchronize, which spins in the driver.
	WaitSpin
	// WaitBlock sleeps on a blocking-sync event: 0.89-0.95x polling at
	// 4-32 workers, since waking up costs more than the spin.
	WaitBlock
)

// Copier is the device side of every staged transfer, file, mapping,
// remote object, upload or decoded chunk: copies between host memory and
// device memory, queued in order on one stream of the range's context,
// and the wait for them. With enter set each call makes the context
// current for itself (a transfer whose storage side must not hold a
// locked OS thread); otherwise the caller runs with it current
// throughout.
type Copier struct {
	r      devmem.Range
	enter  bool
	dev    cuda.DevicePtr // device offset 0 of ToDevice and FromDevice
	stream cuda.Stream
	event  cuda.Event // not 0: Sync sleeps on it (WaitBlock)
	wait   WaitKind
	marks  []cuda.Event // Mark's points, made on first use
}

// NewCopier takes a stream (a cached one for a primary context) of r's
// context for copies to and from the device memory at dev. Without enter,
// r's context must be current. Close gives the stream back.
func NewCopier(r devmem.Range, dev cuda.DevicePtr, enter bool, wait WaitKind) (*Copier, error) {
	c := &Copier{r: r, enter: enter, dev: dev, wait: wait}
	if err := c.In(c.open); err != nil {
		c.Close()
		return nil, err
	}
	return c, nil
}

// open takes c's stream (and event), with c's context current.
func (c *Copier) open() (err error) {
	if c.stream, err = devmem.GetStream(c.r.Ctx, c.r.Primary); err != nil {
		return err
	}
	if c.wait == WaitBlock {
		c.event, err = devmem.GetEvent(c.r.Ctx, c.r.Primary, c.eventFlags())
	}
	return err
}

// eventFlags are the flags of c's events: no timing, and a blocking-sync
// wait for WaitBlock.
func (c *Copier) eventFlags() uint32 {
	if c.wait == WaitBlock {
		return cuda.EventDisableTiming | cuda.EventBlockingSync
	}
	return cuda.EventDisableTiming
}

// In runs f with c's context current.
func (c *Copier) In(f func() error) error {
	if c.enter {
		return cuda.WithContext(c.r.Ctx, f)
	}
	return f()
}

// Stream is the stream c queues on, for a caller that queues copies of
// its own (in c's context) before calling Sync.
func (c *Copier) Stream() cuda.Stream { return c.stream }

// ToDevice queues a copy of p to device offset devOff.
func (c *Copier) ToDevice(p []byte, devOff int64) error {
	return c.In(func() error { return cuda.MemcpyHtoDAsync(c.dev+cuda.DevicePtr(devOff), p, c.stream) })
}

// FromDevice queues a copy from device offset devOff into p.
func (c *Copier) FromDevice(p []byte, devOff int64) error {
	return c.In(func() error { return cuda.MemcpyDtoHAsync(p, c.dev+cuda.DevicePtr(devOff), c.stream) })
}

// Sync waits for every queued copy.
func (c *Copier) Sync() error { return c.In(c.sync) }

func (c *Copier) sync() error {
	switch {
	case c.event != 0:
		if err := cuda.EventRecord(c.event, c.stream); err != nil {
			return err
		}
		return cuda.EventSynchronize(c.event)
	case c.wait == WaitSpin:
		return cuda.StreamSynchronize(c.stream)
	}
	return devmem.WaitStream(c.stream)
}

// Mark records point i after the copies queued so far.
func (c *Copier) Mark(i int) error {
	return c.In(func() error {
		for len(c.marks) <= i {
			c.marks = append(c.marks, 0)
		}
		if c.marks[i] == 0 {
			e, err := devmem.GetEvent(c.r.Ctx, c.r.Primary, c.eventFlags())
			if err != nil {
				return err
			}
			c.marks[i] = e
		}
		return cuda.EventRecord(c.marks[i], c.stream)
	})
}

// WaitMark waits for the copies before point i, as Sync waits.
func (c *Copier) WaitMark(i int) error {
	if i >= len(c.marks) || c.marks[i] == 0 {
		return nil
	}
	return c.In(func() error {
		if c.wait == WaitPoll {
			return devmem.WaitEvent(c.marks[i])
		}
		return cuda.EventSynchronize(c.marks[i]) // spins, or sleeps on a blocking-sync event
	})
}

// Close waits for what is still queued (nothing may stay queued on a
// cached stream, nor read a buffer about to be reused) and gives the
// stream and the events back.
func (c *Copier) Close() { c.In(c.close) }

// close is Close with c's context current.
func (c *Copier) close() error {
	if c.stream != 0 {
		c.sync()
		devmem.PutStream(c.r.Ctx, c.r.Primary, c.stream)
	}
	if c.event != 0 {
		devmem.PutEvent(c.r.Ctx, c.r.Primary, c.eventFlags(), c.event)
	}
	for _, e := range c.marks {
		if e != 0 {
			devmem.PutEvent(c.r.Ctx, c.r.Primary, c.eventFlags(), e)
		}
	}
	c.stream, c.event, c.marks = 0, 0, nil
	return nil
}

// Plan is how a task is staged: its chunk size, and the pool and size
// of the bounce buffer it takes.
type Plan struct {
	Chunk   int
	Pool    *Pool
	BufSize int
	Single  bool // one buffer, whatever the chunks (serial staging)
}

// Task is the one staging loop: it moves task t of a device transfer on
// r (the device memory of byte 0 of t's buffer is r.Ptr+t.BufOff)
// through bounce buffers of plan p, with the mover that storage makes
// around the task's copier. It takes a stream and the buffers (one for a
// task of one chunk or a single-buffer plan; two halves of one buffer
// where two chunks fit, else two buffers), runs the pipeline (Read, or
// Write when write is set) and gives everything back. enter is the
// copier's.
func (tu Tuning) Task(write bool, r devmem.Range, t sched.Task, p Plan, align int, enter bool, storage func(*Copier) Mover) (int, error) {
	c := &Copier{r: r, enter: enter, dev: r.Ptr + cuda.DevicePtr(t.BufOff), wait: tu.Wait}
	var held []*Buffer
	defer func() {
		c.In(func() error {
			c.close()
			for _, b := range held {
				p.Pool.Put(b) // may unpin: in the context
			}
			return nil
		})
	}()
	two := t.Len > p.Chunk && !p.Single
	need := 1
	if two && 2*p.Chunk > p.BufSize {
		need = 2
	}
	// The stream and the buffers in one entry into the context.
	err := c.In(func() error {
		if err := c.open(); err != nil {
			return err
		}
		for range need {
			b, err := p.Pool.Get(p.BufSize) // pins in the current context
			if err != nil {
				return err
			}
			held = append(held, b)
		}
		return nil
	})
	if err != nil {
		return 0, err
	}
	bufs := [][]byte{held[0].Mem}
	switch {
	case need == 2:
		bufs = append(bufs, held[1].Mem)
	case two:
		bufs = [][]byte{held[0].Mem[:p.Chunk], held[0].Mem[p.Chunk : 2*p.Chunk]}
	}
	m := storage(c)
	if write {
		return Write(m, bufs, p.Chunk, t.Off, 0, t.Len)
	}
	return tu.Read(m, bufs, p.Chunk, align, t.Off, 0, t.Len)
}
