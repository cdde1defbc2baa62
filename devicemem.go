package kvik

import (
	"fmt"
	"sync"

	"github.com/kvikgo/kvik/cuda"
)

// deviceRange is device memory checked for an operation: where it lives
// and which context owns it.
type deviceRange struct {
	ptr  cuda.DevicePtr // first byte of the operation
	base cuda.DevicePtr // start of the allocation, as cuFile wants it
	ctx  cuda.Context
	// primary: ctx is its device's primary context, which this package
	// keeps retained, so streams made in it may be cached.
	primary bool
}

// resolveDevice checks that [buf+devOffset, +size) lies in one device
// allocation and finds the context to use for it: the pointer's own, else
// the calling thread's, else the device's primary context.
func resolveDevice(buf cuda.DevicePtr, size int, devOffset int64) (deviceRange, error) {
	if devOffset < 0 || size < 0 {
		return deviceRange{}, fmt.Errorf("%w: negative device offset %d or size %d", ErrInvalidArgument, devOffset, size)
	}
	if buf == 0 {
		return deviceRange{}, fmt.Errorf("%w: nil device pointer", ErrInvalidArgument)
	}
	if err := cuda.Init(); err != nil {
		return deviceRange{}, err
	}
	a, err := cuda.PointerGetAttributes(uintptr(buf))
	if err != nil {
		return deviceRange{}, err
	}
	if a.MemoryType != cuda.MemoryTypeDevice && a.MemoryType != cuda.MemoryTypeUnified {
		return deviceRange{}, fmt.Errorf("%w: %#x is %v memory (freed, or not allocated by CUDA on a device)", ErrNotDeviceMemory, uint64(buf), a.MemoryType)
	}
	end := uint64(buf) + uint64(devOffset) + uint64(size)
	if a.RangeSize > 0 && (end < uint64(buf) || end > uint64(a.RangeStart)+uint64(a.RangeSize)) {
		return deviceRange{}, fmt.Errorf("%w: %d bytes at device offset %d overrun the %d-byte allocation at %#x",
			ErrInvalidArgument, size, devOffset, a.RangeSize, uint64(a.RangeStart))
	}
	r := deviceRange{ptr: buf + cuda.DevicePtr(devOffset), base: a.RangeStart, ctx: a.Context}
	if r.base == 0 {
		r.base = buf
	}
	if r.ctx == 0 {
		r.ctx, _ = cuda.CtxGetCurrent()
	}
	// Retaining the device's primary context keeps it (and the streams
	// cached in it) alive even if the caller releases it.
	pctx, err := primaryContext(cuda.Device(a.DeviceOrdinal))
	if err != nil {
		return deviceRange{}, err
	}
	if r.ctx == 0 {
		r.ctx = pctx
	}
	r.primary = r.ctx == pctx
	return r, nil
}

// resolveSynced is resolveDevice followed by a wait for the work queued
// on the legacy default stream (a kernel filling buf, say), which must
// finish before a transfer reads or writes the range.
func resolveSynced(buf cuda.DevicePtr, size int, devOffset int64) (deviceRange, error) {
	r, err := resolveDevice(buf, size, devOffset)
	if err == nil {
		err = cuda.WithContext(r.ctx, func() error { return cuda.StreamSynchronize(0) })
	}
	return r, err
}

// primaryContexts holds the primary contexts this package retained; they
// stay retained for the life of the process, as in KvikIO.
var primaryContexts sync.Map // cuda.Device -> cuda.Context

func primaryContext(d cuda.Device) (cuda.Context, error) {
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

// streams caches non-blocking streams of primary contexts, one per
// concurrent task, so that tasks do not create and destroy a stream each.
// Other contexts can be destroyed by their owner at any time, so their
// streams are not cached.
var streams struct {
	mu   sync.Mutex
	free map[cuda.Context][]cuda.Stream
}

// getStream returns a stream of r's context, which must be current.
func getStream(r deviceRange) (cuda.Stream, error) {
	if !r.primary {
		return cuda.StreamCreate(cuda.StreamNonBlocking)
	}
	ctx := r.ctx
	streams.mu.Lock()
	if l := streams.free[ctx]; len(l) > 0 {
		s := l[len(l)-1]
		streams.free[ctx] = l[:len(l)-1]
		streams.mu.Unlock()
		return s, nil
	}
	streams.mu.Unlock()
	return cuda.StreamCreate(cuda.StreamNonBlocking)
}

// putStream caches s, or destroys it when its context is not primary.
func putStream(r deviceRange, s cuda.Stream) {
	if !r.primary {
		cuda.StreamDestroy(s)
		return
	}
	ctx := r.ctx
	streams.mu.Lock()
	defer streams.mu.Unlock()
	if streams.free == nil {
		streams.free = map[cuda.Context][]cuda.Stream{}
	}
	streams.free[ctx] = append(streams.free[ctx], s)
}

// reserveStreams makes sure n idle streams of the primary context ctx,
// which must be current, are cached.
func reserveStreams(ctx cuda.Context, n int) error {
	streams.mu.Lock()
	want := n - len(streams.free[ctx])
	streams.mu.Unlock()
	r := deviceRange{ctx: ctx, primary: true}
	for range want {
		s, err := cuda.StreamCreate(cuda.StreamNonBlocking)
		if err != nil {
			return err
		}
		putStream(r, s)
	}
	return nil
}

// pinHost page-locks bounce buffer memory for every context (portable).
// It registers under the primary context of the current device, which
// this package keeps retained, so that the registration outlives any
// context the caller creates and destroys.
func pinHost(b []byte) (func() error, error) {
	dev, err := cuda.CtxGetDevice()
	if err != nil {
		return nil, err
	}
	ctx, err := primaryContext(dev)
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
