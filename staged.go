package kvik

import (
	"errors"

	"github.com/kvikgo/kvik/cuda"
	"github.com/kvikgo/kvik/internal/sched"
)

// stagedRead moves one task of a read into the device through pinned
// bounce buffers, filling them with read and overlapping each fill with
// the copy of the previous chunk, with the plan and pools of FileHandle's
// POSIX path. Only the CUDA calls run with the context current (on a
// locked OS thread); read runs on the task's goroutine as it is, so a
// blocking download or a page fault does not hold a locked thread.
func stagedRead(d Defaults, r deviceRange, t sched.Task, read func(p []byte, off int64) (int, error)) (int, error) {
	p := planStaging(opRead, d, t.Len, false)
	var s cuda.Stream
	var held []*bounceBuffer
	err := cuda.WithContext(r.ctx, func() (err error) {
		if s, err = getStream(r); err != nil {
			return err
		}
		// One buffer, split in two when two chunks fit, as FileHandle does.
		need := 1
		if t.Len > p.chunk && 2*p.chunk > p.bufSize {
			need = 2
		}
		for range need {
			b, err := p.pool.get(p.bufSize)
			if err != nil {
				return err
			}
			held = append(held, b)
		}
		return nil
	})
	defer cuda.WithContext(r.ctx, func() error {
		for _, b := range held {
			p.pool.put(b)
		}
		if s != 0 {
			putStream(r, s)
		}
		return nil
	})
	if err != nil {
		return 0, err
	}
	bufs := [][]byte{held[0].mem}
	switch {
	case len(held) == 2:
		bufs = append(bufs, held[1].mem)
	case t.Len > p.chunk && 2*p.chunk <= len(held[0].mem):
		bufs = [][]byte{held[0].mem[:p.chunk], held[0].mem[p.chunk : 2*p.chunk]}
	}
	m := &readMover{copier: copier{ctx: r.ctx, enter: true, dev: r.ptr + cuda.DevicePtr(t.BufOff), stream: s}, read: read}
	return tune.staging.Read(m, bufs, p.chunk, 0, t.Off, 0, t.Len)
}

// readMover feeds the staging pipeline from a read function; it only
// reads, and its copier enters the CUDA context for each copy.
type readMover struct {
	copier
	read func(p []byte, off int64) (int, error)
}

func (m *readMover) ReadFile(p []byte, off int64) (int, error) { return m.read(p, off) }

func (m *readMover) WriteFile(p []byte, off int64) (int, error) {
	return 0, errors.New("kvik: staged reads do not write")
}
