package kvik

import (
	"github.com/kvikgo/kvik/cuda"
	"github.com/kvikgo/kvik/internal/devmem"
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
// allocation and finds the context to use for it (devmem.Resolve).
func resolveDevice(buf cuda.DevicePtr, size int, devOffset int64) (deviceRange, error) {
	m, err := devmem.Resolve(buf, size, devOffset)
	return deviceRange{ptr: m.Ptr, base: m.Base, ctx: m.Ctx, primary: m.Primary}, err
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

func primaryContext(d cuda.Device) (cuda.Context, error) { return devmem.PrimaryContext(d) }

// getStream returns a stream of r's context, which must be current.
func getStream(r deviceRange) (cuda.Stream, error) { return devmem.GetStream(r.ctx, r.primary) }

// putStream caches s, or destroys it when its context is not primary.
func putStream(r deviceRange, s cuda.Stream) { devmem.PutStream(r.ctx, r.primary, s) }

// reserveStreams makes sure n idle streams of the primary context ctx,
// which must be current, are cached.
func reserveStreams(ctx cuda.Context, n int) error {
	want := n - devmem.IdleStreams(ctx)
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
