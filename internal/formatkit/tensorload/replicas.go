package tensorload

import (
	"context"
	"errors"
	"slices"
	"sync"

	"github.com/kvikgo/kvik"
	"github.com/kvikgo/kvik/cuda"
)

// replicaChunk is the largest piece a replicated load reads before it
// fans the piece out to the other devices: small enough that the last
// piece's copies, which no read overlaps, are short; large enough that
// each read still spans many tasks.
const replicaChunk = 256 << 20

// ReadReplicas reads a plan of one slot onto every device in devices, each
// byte from r once: device k reads the k-th contiguous share of the runs
// into its own allocation, and each piece of a share, as soon as it is
// in, is copied device to device to every other device (directly over
// NVLink or PCIe where cuDeviceCanAccessPeer allows peer access, through
// the host otherwise). Every device ends with the whole slot at the same
// offsets: Bases[k] is device k's copy. Reading the checkpoint once per
// device would share the host's read limit N ways instead.
func (p *Plan) ReadReplicas(ctx context.Context, r kvik.Reader, devices []int) (*Memory, error) {
	if len(p.Totals) != 1 {
		return nil, errors.New("tensorload: replicas need a plan of one slot")
	}
	if len(devices) == 1 {
		return p.ReadDevices(ctx, r, devices)
	}
	if err := cuda.Init(); err != nil {
		return nil, err
	}
	m := newMemory(len(devices))
	if err := m.alloc(devices, slices.Repeat(p.Totals, len(devices))); err != nil {
		m.Close()
		return nil, err
	}
	f, err := newFanout(m)
	if err == nil {
		err = readRuns(ctx, shares(p.Runs, len(devices), replicaChunk), func(ctx context.Context, run Run) (*kvik.Future, error) {
			return r.PReadDevice(ctx, m.Bases[run.Slot], int(run.Sz), run.FileOff, run.MemOff), nil
		}, f.copy)
		err = errors.Join(err, f.close())
	}
	if err != nil {
		m.Close()
		return nil, err
	}
	return m, nil
}

// shares cuts runs (of slot 0, in file order) into n contiguous shares of
// about the same number of bytes, share k in slot k, each cut into
// pieces of at most chunk bytes.
func shares(runs []Run, n int, chunk int64) []Run {
	var total int64
	for _, r := range runs {
		total += r.Sz
	}
	end := func(k int) int64 { return (int64(k) + 1) * total / int64(n) } // where share k ends
	var out []Run
	var done int64 // bytes of runs before the current piece
	k := 0
	for _, r := range runs {
		for at := int64(0); at < r.Sz; {
			for done >= end(k) {
				k++
			}
			sz := min(r.Sz-at, chunk, end(k)-done)
			out = append(out, Run{Slot: k, FileOff: r.FileOff + at, MemOff: r.MemOff + at, Sz: sz})
			at += sz
			done += sz
		}
	}
	return out
}

// fanout copies pieces from the device that read them to every other
// device, on a stream per pair of devices.
type fanout struct {
	m       *Memory
	streams [][]cuda.Stream // [from][to], 0 on the diagonal
}

// peers records the pairs of contexts whose peer access this process
// has tried to enable, so that each pair is tried once.
var peers struct {
	mu    sync.Mutex
	tried map[[2]cuda.Context]bool
}

func newFanout(m *Memory) (*fanout, error) {
	n := len(m.devs)
	f := &fanout{m: m, streams: make([][]cuda.Stream, n)}
	for from := range n {
		f.streams[from] = make([]cuda.Stream, n)
		err := cuda.WithContext(m.devs[from].ctx, func() error {
			for to := range n {
				if to == from {
					continue
				}
				enablePeer(m.devs[from], m.devs[to])
				s, err := cuda.StreamCreate(cuda.StreamNonBlocking)
				if err != nil {
					return err
				}
				f.streams[from][to] = s
			}
			return nil
		})
		if err != nil {
			return f, errors.Join(err, f.close())
		}
	}
	return f, nil
}

// enablePeer lets the current context (from's) reach to's memory where
// the devices allow it, once per pair; where they do not, or enabling
// fails, copies between them go through the host, still correct.
func enablePeer(from, to *retained) {
	key := [2]cuda.Context{from.ctx, to.ctx}
	peers.mu.Lock()
	defer peers.mu.Unlock()
	if peers.tried[key] {
		return
	}
	if peers.tried == nil {
		peers.tried = map[[2]cuda.Context]bool{}
	}
	peers.tried[key] = true
	if can, err := cuda.DeviceCanAccessPeer(from.dev, to.dev); err == nil && can {
		cuda.CtxEnablePeerAccess(to.ctx) // ErrorPeerAccessAlreadyEnabled is fine too
	}
}

// copy queues run's bytes, read into its slot's device, to every other
// device.
func (f *fanout) copy(run Run) error {
	src := f.m.devs[run.Slot]
	return cuda.WithContext(src.ctx, func() error {
		for to, s := range f.streams[run.Slot] {
			if s == 0 {
				continue
			}
			dst := f.m.devs[to]
			off := cuda.DevicePtr(run.MemOff)
			if err := cuda.MemcpyPeerAsync(f.m.Bases[to]+off, dst.ctx, f.m.Bases[run.Slot]+off, src.ctx, int(run.Sz), s); err != nil {
				return err
			}
		}
		return nil
	})
}

// close waits for every queued copy and destroys the streams, returning
// the first error.
func (f *fanout) close() error {
	var errs []error
	for from, row := range f.streams {
		if f.m.devs[from] == nil {
			continue
		}
		errs = append(errs, cuda.WithContext(f.m.devs[from].ctx, func() error {
			var errs []error
			for _, s := range row {
				if s != 0 {
					errs = append(errs, cuda.StreamSynchronize(s), cuda.StreamDestroy(s))
				}
			}
			return errors.Join(errs...)
		}))
	}
	f.streams = nil
	return errors.Join(errs...)
}
