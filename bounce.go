package kvik

import (
	"fmt"
	"sync"

	"golang.org/x/sys/unix"
)

var pageSize = unix.Getpagesize()

// bounceBuffer is a page-aligned buffer outside the Go heap (an anonymous
// mapping), so that it can be used for O_DIRECT and registered with CUDA.
type bounceBuffer struct {
	mem   []byte
	unpin func() error // nil unless pinned
}

// bouncePool recycles bounce buffers of the current size, most recently
// used first. Buffers of an old size are freed as they come back.
type bouncePool struct {
	// pin registers memory with CUDA and returns how to undo it; nil for
	// plain buffers.
	pin func([]byte) (unpin func() error, err error)

	mu    sync.Mutex
	size  int
	free  []*bounceBuffer
	bytes int64 // bytes mapped, idle or in use
}

var (
	// hostBounce serves host-memory direct I/O: aligned, not pinned.
	hostBounce = &bouncePool{}
	// pinnedBounce serves device I/O on the POSIX path.
	pinnedBounce = &bouncePool{pin: pinHost}
)

// alignUp rounds n up to a multiple of a (a power of two or any positive a).
func alignUp(n, a int) int { return (n + a - 1) / a * a }

// get returns a buffer of at least size bytes rounded up to whole pages.
func (p *bouncePool) get(size int) (*bounceBuffer, error) {
	size = alignUp(max(size, 1), pageSize)
	p.mu.Lock()
	if size != p.size {
		p.dropLocked()
		p.size = size
	}
	if n := len(p.free); n > 0 {
		b := p.free[n-1]
		p.free = p.free[:n-1]
		p.mu.Unlock()
		return b, nil
	}
	p.bytes += int64(size)
	p.mu.Unlock()
	b, err := p.alloc(size)
	if err != nil {
		p.mu.Lock()
		p.bytes -= int64(size)
		p.mu.Unlock()
	}
	return b, err
}

func (p *bouncePool) alloc(size int) (*bounceBuffer, error) {
	mem, err := unix.Mmap(-1, 0, size, unix.PROT_READ|unix.PROT_WRITE, unix.MAP_PRIVATE|unix.MAP_ANONYMOUS)
	if err != nil {
		return nil, fmt.Errorf("kvik: allocating a %d-byte bounce buffer: %w", size, err)
	}
	b := &bounceBuffer{mem: mem}
	if p.pin != nil {
		if b.unpin, err = p.pin(mem); err != nil {
			unix.Munmap(mem)
			return nil, fmt.Errorf("kvik: pinning a %d-byte bounce buffer: %w", size, err)
		}
	}
	return b, nil
}

// put returns b to the pool, or frees it if the size setting changed.
func (p *bouncePool) put(b *bounceBuffer) {
	p.mu.Lock()
	if len(b.mem) == p.size {
		p.free = append(p.free, b)
		p.mu.Unlock()
		return
	}
	p.bytes -= int64(len(b.mem))
	p.mu.Unlock()
	p.release(b)
}

func (p *bouncePool) release(b *bounceBuffer) {
	if b.unpin != nil {
		b.unpin()
	}
	unix.Munmap(b.mem)
}

// dropLocked frees every idle buffer and returns the bytes freed.
func (p *bouncePool) dropLocked() int64 {
	var n int64
	for _, b := range p.free {
		n += int64(len(b.mem))
		p.release(b)
	}
	p.free = nil
	p.bytes -= n
	return n
}

func (p *bouncePool) drop() int64 {
	p.mu.Lock()
	defer p.mu.Unlock()
	return p.dropLocked()
}

// mapped returns the bytes the pool has mapped, idle or in use.
func (p *bouncePool) mapped() int64 {
	p.mu.Lock()
	defer p.mu.Unlock()
	return p.bytes
}

// FreeBounceBuffers frees every idle bounce buffer and returns how many
// bytes it released. Buffers in use are freed when their I/O completes if
// the size setting changed, or kept for reuse otherwise.
func FreeBounceBuffers() int64 {
	return hostBounce.drop() + pinnedBounce.drop()
}

// BounceBufferBytes returns the bytes of bounce buffers currently held,
// idle or in use, and how many of them are pinned for CUDA.
func BounceBufferBytes() (total, pinned int64) {
	p := pinnedBounce.mapped()
	return hostBounce.mapped() + p, p
}
