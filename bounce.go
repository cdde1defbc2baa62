package kvik

import (
	"context"
	"fmt"
	"log/slog"

	"github.com/kvikgo/kvik/internal/devmem"
	"github.com/kvikgo/kvik/internal/staging"
)

// pageSize is the page size; bounce buffers are whole pages.
var pageSize = staging.PageSize

// The bounce pools of the process (internal/staging.Pool).
var (
	// hostBounce serves host-memory direct I/O: aligned, not pinned.
	hostBounce = newBouncePool("host", nil)
	// pinnedBounce serves device I/O on the POSIX path.
	pinnedBounce = newBouncePool("pinned", devmem.PinHost)
	// pinnedSmall serves device tasks that need at most
	// staging.SmallBufSize bytes, so that small operations do not pin large buffers.
	pinnedSmall = newBouncePool("pinned-small", devmem.PinHost)
	// pinnedStaging serves GetPinnedBuffer: staging of other packages
	// (zarr's decoded chunks), apart so that its sizes do not evict the
	// buffers of kvik's own reads.
	pinnedStaging = newBouncePool("pinned-staging", devmem.PinHost)
)

// bounceSize is the size of pinnedBounce's buffers under settings d.
func bounceSize(d Defaults) int { return staging.BufSize(d.BounceBufferSize, d.TaskSize) }

// planner plans the staged tasks of an operation under settings d, with
// the process's pinned pools and the tuning in force.
func planner(d Defaults) staging.Planner {
	return staging.Planner{Tuning: tune.staging, Bounce: pinnedBounce, Small: pinnedSmall, BufSize: bounceSize(d), Workers: d.NumThreads}
}

// newBouncePool returns a pool that logs its allocations at LevelDebug.
// A pinned pool's buffers go on the NUMA node of the GPU they serve
// (numa.go).
func newBouncePool(name string, pin staging.PinFunc) *staging.Pool {
	p := &staging.Pool{Pin: pin, OnAlloc: func(k, size int, pinned bool, bytes int64) {
		if l := logAt(LevelDebug); l != nil {
			l.LogAttrs(context.Background(), LevelDebug, "kvik: bounce buffers allocated", slog.String("pool", name),
				slog.Int("buffers", k), slog.Int("buffer_size", size), slog.Bool("pinned", pinned),
				slog.Int64("pool_bytes", bytes))
		}
	}}
	if pin != nil {
		p.Node, p.Bind = placer.CurrentNode, placer.Bind
	}
	return p
}

// FreeBounceBuffers frees every idle bounce buffer and returns how many
// bytes it released. Buffers in use are freed when their I/O completes if
// the size setting changed, or kept for reuse otherwise. Pinned buffers
// are allocated in slabs; a slab's memory is unmapped once all of its
// buffers are freed.
func FreeBounceBuffers() int64 {
	return hostBounce.Drop() + pinnedBounce.Drop() + pinnedSmall.Drop() + pinnedStaging.Drop()
}

// BounceBufferBytes returns the bytes of bounce buffers currently held,
// idle or in use, and how many of them are pinned for CUDA.
func BounceBufferBytes() (total, pinned int64) {
	p := pinnedBounce.Mapped() + pinnedSmall.Mapped() + pinnedStaging.Mapped()
	return hostBounce.Mapped() + p, p
}

// PinnedBuffer is page-aligned host memory pinned for CUDA, from kvik's
// pools of staging buffers: the memory GetPinnedBuffer hands out.
type PinnedBuffer struct{ b *staging.Buffer }

// GetPinnedBuffer returns a pinned host buffer of at least size bytes,
// made as kvik's own bounce buffers are: an anonymous mapping with
// transparent huge pages, registered with cuMemHostRegister. (Memory from
// cuMemHostAlloc feeds parallel file reads at about half the speed.) A
// CUDA context must be current. Release returns it for reuse; buffers of
// the size last asked for are kept, others freed, and FreeBounceBuffers
// frees the idle ones.
func GetPinnedBuffer(size int) (*PinnedBuffer, error) {
	if size < 0 {
		return nil, fmt.Errorf("%w: pinned buffer of %d bytes", ErrInvalidArgument, size)
	}
	b, err := pinnedStaging.Get(size)
	if err != nil {
		return nil, err
	}
	return &PinnedBuffer{b: b}, nil
}

// Bytes returns the buffer's memory, a whole number of pages.
func (b *PinnedBuffer) Bytes() []byte { return b.b.Mem }

// Release returns the buffer to kvik's pool; it must not be used after.
// A CUDA context must be current, since the buffer may be unpinned.
func (b *PinnedBuffer) Release() {
	if b.b != nil {
		pinnedStaging.Put(b.b)
		b.b = nil
	}
}
