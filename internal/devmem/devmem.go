// Package devmem is the device side of the staging engine, shared by the
// root package's handles and the format packages: resolving device
// memory to its allocation and context, the primary contexts and streams
// kept for the life of the process, and waiting for queued copies. It
// depends on the cuda binding only.
package devmem

import (
	"errors"
	"fmt"
	"runtime"
	"sync"

	"github.com/kvikgo/kvik/cuda"
)

// Errors of Resolve. kvik re-exports the first two as its own, so they
// match errors.Is at every level.
var (
	// ErrInvalidArgument reports a nil pointer or a negative offset or size.
	ErrInvalidArgument = errors.New("kvik: invalid argument")
	// ErrNotDeviceMemory reports host, freed or unknown memory.
	ErrNotDeviceMemory = errors.New("kvik: not device memory")
	// ErrOverrun reports a range that runs past its allocation; it
	// matches ErrInvalidArgument too.
	ErrOverrun = fmt.Errorf("%w: range overruns its allocation", ErrInvalidArgument)
)

// Range is device memory checked for an operation: where it lives and
// which context owns it.
type Range struct {
	Ptr  cuda.DevicePtr // first byte of the operation
	Base cuda.DevicePtr // start of the allocation, as cuFile wants it
	Ctx  cuda.Context
	// Primary: Ctx is its device's primary context, which this package
	// keeps retained, so streams made in it may be cached.
	Primary bool
}

// Sub returns the part of r from off bytes on, which the caller knows r
// holds: the same allocation and context, nothing resolved or waited
// for again.
func (r Range) Sub(off int) Range {
	r.Ptr += cuda.DevicePtr(off)
	return r
}

// ResolveSynced is Resolve followed by a wait for the work queued on the
// legacy default stream (stream 0) of the range's context: a kernel or a
// copy filling the buffer for a write, or still reading it before a read,
// must finish before a transfer on a stream of this package (which are
// non-blocking, so nothing orders them after stream 0) touches it.
func ResolveSynced(buf cuda.DevicePtr, size int, devOffset int64) (Range, error) {
	r, err := Resolve(buf, size, devOffset)
	if err == nil {
		err = cuda.WithContext(r.Ctx, func() error { return cuda.StreamSynchronize(0) })
	}
	return r, err
}

// Resolve checks that [buf+devOffset, +size) lies in one device
// allocation and finds the context to use for it: the pointer's own, else
// the calling thread's, else the device's primary context.
func Resolve(buf cuda.DevicePtr, size int, devOffset int64) (Range, error) {
	if devOffset < 0 || size < 0 {
		return Range{}, fmt.Errorf("%w: negative device offset %d or size %d", ErrInvalidArgument, devOffset, size)
	}
	if buf == 0 {
		return Range{}, fmt.Errorf("%w: nil device pointer", ErrInvalidArgument)
	}
	if err := cuda.Init(); err != nil {
		return Range{}, err
	}
	a, err := cuda.PointerGetAttributes(uintptr(buf))
	if err != nil {
		return Range{}, err
	}
	if a.MemoryType != cuda.MemoryTypeDevice && a.MemoryType != cuda.MemoryTypeUnified {
		return Range{}, fmt.Errorf("%w: %#x is %v memory (freed, or not allocated by CUDA on a device)", ErrNotDeviceMemory, uint64(buf), a.MemoryType)
	}
	end := uint64(buf) + uint64(devOffset) + uint64(size)
	if a.RangeSize > 0 && (end < uint64(buf) || end > uint64(a.RangeStart)+uint64(a.RangeSize)) {
		return Range{}, fmt.Errorf("%w: %d bytes at device offset %d overrun the %d-byte allocation at %#x",
			ErrOverrun, size, devOffset, a.RangeSize, uint64(a.RangeStart))
	}
	r := Range{Ptr: buf + cuda.DevicePtr(devOffset), Base: a.RangeStart, Ctx: a.Context}
	if r.Base == 0 {
		r.Base = buf
	}
	if r.Ctx == 0 {
		r.Ctx, _ = cuda.CtxGetCurrent()
	}
	// Retaining the device's primary context keeps it (and the streams
	// cached in it) alive even if the caller releases it.
	pctx, err := PrimaryContext(cuda.Device(a.DeviceOrdinal))
	if err != nil {
		return Range{}, err
	}
	if r.Ctx == 0 {
		r.Ctx = pctx
	}
	r.Primary = r.Ctx == pctx
	return r, nil
}

// primaryContexts holds the primary contexts this package retained; they
// stay retained for the life of the process, as in KvikIO.
var primaryContexts sync.Map // cuda.Device -> cuda.Context

// PrimaryContext returns device d's primary context, retained once for
// the life of the process.
func PrimaryContext(d cuda.Device) (cuda.Context, error) {
	if c, ok := primaryContexts.Load(d); ok {
		return c.(cuda.Context), nil
	}
	c, err := d.PrimaryCtxRetain()
	if err != nil {
		return 0, err
	}
	if prev, loaded := primaryContexts.LoadOrStore(d, c); loaded {
		d.PrimaryCtxRelease()
		return prev.(cuda.Context), nil
	}
	return c, nil
}

// idle caches the handles of primary contexts that tasks take and give
// back (streams, events), so that a task does not create and destroy its
// own. Other contexts can be destroyed by their owner at any time, so
// their handles are not cached.
type idle[K comparable, V any] struct {
	mu   sync.Mutex
	free map[K][]V
}

func (c *idle[K, V]) take(k K) (v V, ok bool) {
	c.mu.Lock()
	defer c.mu.Unlock()
	l := c.free[k]
	if len(l) == 0 {
		return v, false
	}
	v = l[len(l)-1]
	c.free[k] = l[:len(l)-1]
	return v, true
}

func (c *idle[K, V]) give(k K, v V) {
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.free == nil {
		c.free = map[K][]V{}
	}
	c.free[k] = append(c.free[k], v)
}

func (c *idle[K, V]) count(k K) int {
	c.mu.Lock()
	defer c.mu.Unlock()
	return len(c.free[k])
}

// streams holds non-blocking streams, one per concurrent task.
var streams idle[cuda.Context, cuda.Stream]

// GetStream returns a non-blocking stream of ctx, which must be current:
// a cached one when ctx is primary.
func GetStream(ctx cuda.Context, primary bool) (cuda.Stream, error) {
	if primary {
		if s, ok := streams.take(ctx); ok {
			return s, nil
		}
	}
	return cuda.StreamCreate(cuda.StreamNonBlocking)
}

// PutStream caches s, a stream of ctx with nothing left queued on it, or
// destroys it when ctx is not primary (ctx must then be current).
func PutStream(ctx cuda.Context, primary bool, s cuda.Stream) {
	if !primary {
		cuda.StreamDestroy(s)
		return
	}
	streams.give(ctx, s)
}

// IdleStreams returns how many streams of ctx are cached.
func IdleStreams(ctx cuda.Context) int { return streams.count(ctx) }

// eventKind is a context and the flags its cached events were made with.
type eventKind struct {
	ctx   cuda.Context
	flags uint32
}

// events holds the events with which tasks mark their copies. Made and
// destroyed per task, two of each, they took about 3% of the workers'
// time in a two-GPU load: 60-75 µs a call with 32 workers on 2x H100
// (execution trace, bench/results/gpus-h100x2-2026-11-26-trace).
var events idle[eventKind, cuda.Event]

// GetEvent returns an event of ctx, which must be current, made with
// flags: a cached one when ctx is primary.
func GetEvent(ctx cuda.Context, primary bool, flags uint32) (cuda.Event, error) {
	if primary {
		if e, ok := events.take(eventKind{ctx, flags}); ok {
			return e, nil
		}
	}
	return cuda.EventCreate(flags)
}

// PutEvent caches e, an event of ctx made with flags and not awaited by
// anyone, or destroys it when ctx is not primary (ctx must then be
// current). A cached event may still be recorded: the next user records
// it anew.
func PutEvent(ctx cuda.Context, primary bool, flags uint32, e cuda.Event) {
	if !primary {
		cuda.EventDestroy(e)
		return
	}
	events.give(eventKind{ctx, flags}, e)
}

// WaitStream waits for the work queued on s by polling it and yielding
// the processor in between. cuStreamSynchronize spins in the driver (the
// primary context's default scheduling) on a thread that Go's scheduler
// counts as blocked in a system call, so with many workers the spinning
// threads take CPUs from the other workers' reads; a polling worker leaves
// them to the scheduler. Over 69 cells on five H200 machines polling was
// 1.04x (geometric mean): 1.05-1.08x on three, level on two
// (docs/performance.md, "Waiting for copies").
func WaitStream(s cuda.Stream) error {
	return poll(func() error { return cuda.StreamQuery(s) })
}

// WaitEvent waits for event e as WaitStream waits for a stream.
func WaitEvent(e cuda.Event) error {
	return poll(func() error { return cuda.EventQuery(e) })
}

func poll(query func() error) error {
	for {
		err := query()
		if !errors.Is(err, cuda.ErrorNotReady) {
			return err
		}
		runtime.Gosched()
	}
}

// PinHost page-locks b for every context (portable), for bounce buffers.
// It registers under the primary context of the current device, which
// this package keeps retained, so that the registration outlives any
// context the caller creates and destroys.
func PinHost(b []byte) (unpin func() error, err error) {
	dev, err := cuda.CtxGetDevice()
	if err != nil {
		return nil, err
	}
	ctx, err := PrimaryContext(dev)
	if err != nil {
		return nil, err
	}
	register := func() error { return cuda.MemHostRegister(b, cuda.MemHostRegisterPortable) }
	if err := cuda.WithContext(ctx, register); err != nil {
		return nil, err
	}
	return func() error {
		return cuda.WithContext(ctx, func() error { return cuda.MemHostUnregister(b) })
	}, nil
}

// ReserveStreams makes sure n idle streams of the primary context ctx,
// which must be current, are cached.
func ReserveStreams(ctx cuda.Context, n int) error {
	for range n - IdleStreams(ctx) {
		s, err := cuda.StreamCreate(cuda.StreamNonBlocking)
		if err != nil {
			return err
		}
		PutStream(ctx, true, s)
	}
	return nil
}
