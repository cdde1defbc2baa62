package kvik

import (
	"github.com/kvikgo/kvik/cuda"
	"github.com/kvikgo/kvik/internal/devmem"
)

// resolveSynced is devmem.ResolveSynced: the range, once the work queued
// on its legacy default stream (a kernel filling buf, say) has finished.
func resolveSynced(buf cuda.DevicePtr, size int, devOffset int64) (devmem.Range, error) {
	return devmem.ResolveSynced(buf, size, devOffset)
}
