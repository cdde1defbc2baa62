package kvik

import (
	"context"
	"fmt"
	"log/slog"
	"runtime"
	"sync"
	"unsafe"

	"golang.org/x/sys/unix"
)

var pageSize = unix.Getpagesize()

// hugePage is the size of a transparent huge page on the platforms kvik
// runs on; pinned slabs are aligned to it so the kernel can back them with
// huge pages, which fault and pin with fewer steps.
const hugePage = 2 << 20

// bounceBuffer is a page-aligned buffer outside the Go heap (part of an
// anonymous mapping), so that it can be used for O_DIRECT and registered
// with CUDA.
type bounceBuffer struct {
	mem  []byte
	slab *slab
	gen  int // the pool's generation (size setting) it was made for
}

// slab is one mapping, pinned with one registration, that is carved into
// bounce buffers of the same size. It is unmapped when the last of its
// buffers is released.
type slab struct {
	mem   []byte
	unpin func() error // nil unless pinned
	refs  int          // buffers carved from it and not yet released
}

// bouncePool recycles bounce buffers of the current size, most recently
// used first. Buffers of an old size are freed as they come back.
type bouncePool struct {
	name string // in log records
	// pin registers memory with CUDA and returns how to undo it; nil for
	// plain buffers.
	pin func([]byte) (unpin func() error, err error)

	grow sync.Mutex // serialises reserve's allocations

	mu    sync.Mutex
	size  int
	gen   int // incremented when size changes
	free  []*bounceBuffer
	held  int   // buffers of the current generation, idle or in use
	bytes int64 // bytes of buffers held, idle or in use, any generation
}

var (
	// hostBounce serves host-memory direct I/O: aligned, not pinned.
	hostBounce = &bouncePool{name: "host"}
	// pinnedBounce serves device I/O on the POSIX path.
	pinnedBounce = &bouncePool{name: "pinned", pin: pinHost}
	// pinnedSmall serves device tasks that need at most smallBounceSize
	// bytes, so that small operations do not pin large buffers.
	pinnedSmall = &bouncePool{name: "pinned-small", pin: pinHost}
	// pinnedStaging serves GetPinnedBuffer: staging of other packages
	// (zarr's decoded chunks), apart so that its sizes do not evict the
	// buffers of kvik's own reads.
	pinnedStaging = &bouncePool{name: "pinned-staging", pin: pinHost}
)

// alignUp rounds n up to a multiple of a (a power of two or any positive a).
func alignUp(n, a int) int { return (n + a - 1) / a * a }

// setSizeLocked switches the pool to buffers of size bytes, freeing the
// idle buffers of another size.
func (p *bouncePool) setSizeLocked(size int) {
	if size != p.size {
		p.dropLocked()
		p.size, p.held = size, 0
		p.gen++
	}
}

// get returns a buffer of at least size bytes rounded up to whole pages.
func (p *bouncePool) get(size int) (*bounceBuffer, error) {
	size = alignUp(max(size, 1), pageSize)
	p.mu.Lock()
	p.setSizeLocked(size)
	if n := len(p.free); n > 0 {
		b := p.free[n-1]
		p.free = p.free[:n-1]
		p.mu.Unlock()
		return b, nil
	}
	gen := p.gen
	p.held++
	p.bytes += int64(size)
	p.mu.Unlock()
	bufs, err := p.alloc(size, 1, gen)
	if err != nil {
		p.mu.Lock()
		p.bytes -= int64(size)
		if gen == p.gen {
			p.held--
		}
		p.mu.Unlock()
		return nil, err
	}
	return bufs[0], nil
}

// reserve makes sure the pool holds at least n buffers of size bytes (idle
// or in use), allocating the missing ones as one slab: one mapping and one
// registration instead of one per buffer, which is what makes the first
// device operation of a process slow.
func (p *bouncePool) reserve(n, size int) error {
	size = alignUp(max(size, 1), pageSize)
	p.grow.Lock()
	defer p.grow.Unlock()
	p.mu.Lock()
	p.setSizeLocked(size)
	want, gen := n-p.held, p.gen
	if want <= 0 {
		p.mu.Unlock()
		return nil
	}
	p.held += want
	p.bytes += int64(want * size)
	p.mu.Unlock()
	bufs, err := p.alloc(size, want, gen)
	p.mu.Lock()
	defer p.mu.Unlock()
	if err != nil {
		p.bytes -= int64(want * size)
		if gen == p.gen {
			p.held -= want
		}
		return err
	}
	for _, b := range bufs {
		p.putLocked(b)
	}
	return nil
}

// alloc maps a slab of k buffers of size bytes, pins it when the pool pins,
// and carves it.
func (p *bouncePool) alloc(size, k, gen int) ([]*bounceBuffer, error) {
	total := size * k
	mem, err := mapSlab(total, p.pin != nil)
	if err != nil {
		return nil, fmt.Errorf("kvik: allocating %d bytes of bounce buffers: %w", total, err)
	}
	s := &slab{mem: mem, refs: k}
	if p.pin != nil {
		if s.unpin, err = p.pin(mem); err != nil {
			munmap(mem)
			return nil, fmt.Errorf("kvik: pinning %d bytes of bounce buffers: %w", total, err)
		}
	}
	bufs := make([]*bounceBuffer, k)
	for i := range bufs {
		bufs[i] = &bounceBuffer{mem: mem[i*size : (i+1)*size : (i+1)*size], slab: s, gen: gen}
	}
	if l := logAt(LevelDebug); l != nil {
		l.LogAttrs(context.Background(), LevelDebug, "kvik: bounce buffers allocated", slog.String("pool", p.name),
			slog.Int("buffers", k), slog.Int("buffer_size", size), slog.Bool("pinned", p.pin != nil),
			slog.Int64("pool_bytes", p.mapped()))
	}
	return bufs, nil
}

// mapSlab maps n bytes of anonymous memory. For memory that will be
// pinned, it asks for huge pages and faults the pages in from several
// goroutines: registration would otherwise fault (and zero) them one
// thread at a time.
func mapSlab(n int, pinned bool) ([]byte, error) {
	if !pinned || n < hugePage {
		return mmapAnon(n)
	}
	// Map a huge page more and trim, so that the slab starts on a huge
	// page boundary.
	raw, err := mmapAnon(n + hugePage)
	if err != nil {
		return nil, err
	}
	head := alignUp(addrOf(raw), hugePage) - addrOf(raw)
	if head > 0 {
		munmap(raw[:head])
	}
	if tail := raw[head+n:]; len(tail) > 0 {
		munmap(tail)
	}
	mem := raw[head : head+n : head+n]
	unix.Madvise(mem, unix.MADV_HUGEPAGE) // a hint: without THP, small pages do
	prefault(mem)
	return mem, nil
}

// mmapAnon maps n bytes of private anonymous memory. It and munmap work
// on raw addresses, since unix.Munmap only unmaps whole unix.Mmap slices
// and slabs are trimmed.
func mmapAnon(n int) ([]byte, error) {
	p, err := unix.MmapPtr(-1, 0, nil, uintptr(n), unix.PROT_READ|unix.PROT_WRITE, unix.MAP_PRIVATE|unix.MAP_ANONYMOUS)
	if err != nil {
		return nil, err
	}
	return unsafe.Slice((*byte)(p), n), nil
}

// munmap unmaps the pages of b, which mmapAnon mapped.
func munmap(b []byte) error {
	return unix.MunmapPtr(unsafe.Pointer(unsafe.SliceData(b)), uintptr(len(b)))
}

// prefault writes one byte of every page of mem, in parallel.
func prefault(mem []byte) {
	parts := min(runtime.GOMAXPROCS(0), len(mem)/hugePage)
	per := alignUp(len(mem)/max(parts, 1), hugePage)
	var wg sync.WaitGroup
	for off := 0; off < len(mem); off += per {
		part := mem[off:min(off+per, len(mem))]
		wg.Go(func() {
			for i := 0; i < len(part); i += pageSize {
				part[i] = 0
			}
		})
	}
	wg.Wait()
}

// put returns b to the pool, or frees it if the size setting changed.
func (p *bouncePool) put(b *bounceBuffer) {
	p.mu.Lock()
	defer p.mu.Unlock()
	p.putLocked(b)
}

func (p *bouncePool) putLocked(b *bounceBuffer) {
	if b.gen == p.gen {
		p.free = append(p.free, b)
		return
	}
	p.bytes -= int64(len(b.mem))
	p.release(b)
}

// release frees b's slab once none of its buffers is left; the pool's
// lock is held, which guards the slab's count.
func (p *bouncePool) release(b *bounceBuffer) {
	s := b.slab
	if s.refs--; s.refs > 0 {
		return
	}
	if s.unpin != nil {
		s.unpin()
	}
	munmap(s.mem)
}

// dropLocked frees every idle buffer and returns the bytes freed.
func (p *bouncePool) dropLocked() int64 {
	var n int64
	for _, b := range p.free {
		n += int64(len(b.mem))
		p.release(b)
	}
	p.held -= len(p.free)
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
// the size setting changed, or kept for reuse otherwise. Pinned buffers
// are allocated in slabs; a slab's memory is unmapped once all of its
// buffers are freed.
func FreeBounceBuffers() int64 {
	return hostBounce.drop() + pinnedBounce.drop() + pinnedSmall.drop() + pinnedStaging.drop()
}

// BounceBufferBytes returns the bytes of bounce buffers currently held,
// idle or in use, and how many of them are pinned for CUDA.
func BounceBufferBytes() (total, pinned int64) {
	p := pinnedBounce.mapped() + pinnedSmall.mapped() + pinnedStaging.mapped()
	return hostBounce.mapped() + p, p
}

// addrOf returns the address of b's first byte.
func addrOf(b []byte) int { return int(uintptr(unsafe.Pointer(unsafe.SliceData(b)))) }

// PinnedBuffer is page-aligned host memory pinned for CUDA, from kvik's
// pools of staging buffers: the memory GetPinnedBuffer hands out.
type PinnedBuffer struct{ b *bounceBuffer }

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
	b, err := pinnedStaging.get(size)
	if err != nil {
		return nil, err
	}
	return &PinnedBuffer{b: b}, nil
}

// Bytes returns the buffer's memory, a whole number of pages.
func (b *PinnedBuffer) Bytes() []byte { return b.b.mem }

// Release returns the buffer to kvik's pool; it must not be used after.
// A CUDA context must be current, since the buffer may be unpinned.
func (b *PinnedBuffer) Release() {
	if b.b != nil {
		pinnedStaging.put(b.b)
		b.b = nil
	}
}
