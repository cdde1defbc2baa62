package kvik

import (
	"github.com/kvikgo/kvik/cuda"
	"github.com/kvikgo/kvik/internal/sched"
	"github.com/kvikgo/kvik/internal/staging"
)

// workers holds the process's worker pools: one per block device (with
// ThreadPoolPerBlockDevice, else one shared) for host operations, and
// one per block device and CUDA context for device operations, each
// GPU's limit set by how many GPUs are in use (staging.Workers), their
// threads on the GPU's NUMA node (numa.go).
var workers = staging.Workers{Place: &placer}

// poolFor returns the pool for host operations on a file on the block
// device with key devKey ("" for the shared pool).
func poolFor(d Defaults, devKey string) *sched.Pool {
	return workers.Host(blockKey(d, devKey), d.NumThreads)
}

// devicePoolFor returns the pool for operations that copy to or from
// device memory in ctx.
func devicePoolFor(d Defaults, devKey string, ctx cuda.Context) *sched.Pool {
	return workers.Device(blockKey(d, devKey), ctx, d.NumThreads)
}

// blockKey is the pool key of block device devKey under d.
func blockKey(d Defaults, devKey string) string {
	if !d.ThreadPoolPerBlockDevice {
		return ""
	}
	return devKey
}
