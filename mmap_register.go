package kvik

import (
	"context"
	"fmt"

	"github.com/kvikgo/kvik/cuda"
	"github.com/kvikgo/kvik/internal/devmem"
	"github.com/kvikgo/kvik/internal/sched"
	"github.com/kvikgo/kvik/internal/staging"
)

// RegisterDevice page-locks the handle's mapping and registers it with
// the CUDA driver (cuMemHostRegister, read-only and portable), so that
// later device reads copy straight from the page cache to the GPU,
// skipping the bounce buffers (zero-copy). Registration faults in and pins
// every mapped page once, which costs about as much as copying the
// mapping to the device (measured on the H200: 32 ms per GiB): it pays off
// for a handle read into device memory more than once. Undo it with
// UnregisterDevice; Close does so too. Registering twice does nothing.
//
// Registration of a file mapping needs the driver's read-only flag; where
// the driver or device refuses it, RegisterDevice returns the driver's
// error and device reads keep using the bounce buffers.
func (h *MmapHandle) RegisterDevice() error {
	h.mu.Lock()
	defer h.mu.Unlock()
	switch {
	case h.closed:
		return h.pathErr(ErrClosed)
	case h.registered || h.mem == nil:
		return nil
	}
	if err := cuda.Init(); err != nil {
		return h.pathErr(err)
	}
	ctx, err := devmem.PrimaryContext(0)
	if err != nil {
		return h.pathErr(err)
	}
	err = cuda.WithContext(ctx, func() error {
		return cuda.MemHostRegister(h.mem, cuda.MemHostRegisterReadOnly|cuda.MemHostRegisterPortable)
	})
	if err != nil {
		return h.pathErr(fmt.Errorf("register the mapping: %w", err))
	}
	h.registered, h.regCtx = true, ctx
	return nil
}

// DeviceRegistered reports whether the mapping is registered for
// zero-copy device reads.
func (h *MmapHandle) DeviceRegistered() bool {
	h.mu.Lock()
	defer h.mu.Unlock()
	return h.registered
}

// UnregisterDevice undoes RegisterDevice once the zero-copy reads in
// flight have finished; reads started after it use the bounce buffers.
func (h *MmapHandle) UnregisterDevice() error {
	h.mu.Lock()
	defer h.mu.Unlock()
	return h.unregisterLocked()
}

// unregisterLocked waits for zero-copy reads, then unregisters; h.mu is
// held. The mapping is unmapped only after this.
func (h *MmapHandle) unregisterLocked() error {
	if !h.registered {
		return nil
	}
	h.registered = false
	for h.regInflight > 0 {
		h.idle.Wait()
	}
	err := cuda.WithContext(h.regCtx, func() error { return cuda.MemHostUnregister(h.mem) })
	if err != nil {
		return h.pathErr(fmt.Errorf("unregister the mapping: %w", err))
	}
	return nil
}

// zeroCopy makes a device read into r zero-copy when the mapping is
// registered: its tasks are directRead and it ends with
// releaseRegistered.
func (h *MmapHandle) zeroCopy(r devmem.Range) (sched.TaskFunc, func(), bool) {
	h.mu.Lock()
	defer h.mu.Unlock()
	if !h.registered {
		return nil, nil, false
	}
	h.regInflight++
	return h.directRead(r), h.releaseRegistered, true
}

func (h *MmapHandle) releaseRegistered() {
	h.mu.Lock()
	defer h.mu.Unlock()
	h.regInflight--
	h.inflight--
	h.idle.Broadcast() // wakes Close and UnregisterDevice
}

// directRead is the task of a zero-copy device read: one asynchronous
// copy from the registered mapping on a stream of the task's own, then a
// sync, so that the mapping stays registered until the copy has ended.
func (h *MmapHandle) directRead(r devmem.Range) sched.TaskFunc {
	return func(_ context.Context, t sched.Task) (int, error) {
		i := t.Off - h.memOff
		src := h.mem[i : i+int64(t.Len)]
		err := cuda.WithContext(r.Ctx, func() error {
			// One copy per task from registered memory, waited for in
			// cuStreamSynchronize as when it was measured.
			c, err := staging.NewCopier(r, r.Ptr+cuda.DevicePtr(t.BufOff), false, staging.WaitSpin)
			if err != nil {
				return err
			}
			defer c.Close() // waits for the copy, also after an error
			if err := c.ToDevice(src, 0); err != nil {
				return err
			}
			return c.Sync()
		})
		if err != nil {
			return 0, err
		}
		return t.Len, nil
	}
}
