package kvik

import (
	"fmt"

	"github.com/kvikgo/kvik/cuda"
	"github.com/kvikgo/kvik/internal/devmem"
	"github.com/kvikgo/kvik/internal/staging"
)

// Warmup prepares the process for device I/O through pinned bounce
// buffers (the POSIX path, CompatMode on, and transfers below
// GDSThreshold), so that the first ReadDevice or WriteDevice runs at the
// speed of later ones. It retains dev's primary context, allocates and pins
// the bounce buffers that NumThreads workers use, as two slabs of
// NumThreads × min(BounceBufferSize, TaskSize) bytes and NumThreads × 1 MiB
// (for small operations; 80 MiB in all for 16 workers at the built-in
// settings), and creates a CUDA stream per worker.
//
// Without Warmup the first device operations do this work themselves: the
// first blocking operation allocates the buffers its tasks need as one
// slab before they start, and asynchronous ones allocate a buffer per task.
// A service that loads files on demand can call Warmup once at start-up.
// Warmup is idempotent: a later call allocates only what a larger
// NumThreads needs. The pinned memory is usable from every context.
func Warmup(dev cuda.Device) error {
	d, err := GetDefaults()
	if err != nil {
		return err
	}
	ctx, err := devmem.PrimaryContext(dev)
	if err != nil {
		return fmt.Errorf("kvik: warmup of device %d: %w", int(dev), err)
	}
	err = cuda.WithContext(ctx, func() error {
		if err := pinnedBounce.Reserve(d.NumThreads, bounceSize(d)); err != nil {
			return err
		}
		if staging.SmallBufSize < bounceSize(d) {
			if err := pinnedSmall.Reserve(d.NumThreads, staging.SmallBufSize); err != nil {
				return err
			}
		}
		return devmem.ReserveStreams(ctx, d.NumThreads)
	})
	if err != nil {
		return fmt.Errorf("kvik: warmup of device %d: %w", int(dev), err)
	}
	return nil
}
