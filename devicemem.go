package kvik

import (
	"github.com/kvikgo/kvik/cuda"
	"github.com/kvikgo/kvik/internal/devmem"
)

// resolveSynced is devmem.Resolve followed by a wait for the work queued
// on the legacy default stream (a kernel filling buf, say), which must
// finish before a transfer reads or writes the range.
func resolveSynced(buf cuda.DevicePtr, size int, devOffset int64) (devmem.Range, error) {
	r, err := devmem.Resolve(buf, size, devOffset)
	if err == nil {
		err = cuda.WithContext(r.Ctx, func() error { return cuda.StreamSynchronize(0) })
	}
	return r, err
}
