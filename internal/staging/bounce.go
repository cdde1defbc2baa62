package staging

import (
	"fmt"
	"runtime"
	"sync"
	"unsafe"

	"golang.org/x/sys/unix"
)

// PageSize is the system's page size: bounce buffers are whole pages,
// page-aligned, as O_DIRECT and cuMemHostRegister want them.
var PageSize = unix.Getpagesize()

// hugePage is the size of a transparent huge page on the platforms kvik
// runs on; pinned slabs are aligned to it so the kernel can back them with
// huge pages, which fault and pin with fewer steps.
const hugePage = 2 << 20

// AlignUp rounds n up to a multiple of a (any positive a).
func AlignUp(n, a int) int { return (n + a - 1) / a * a }

// Buffer is a page-aligned bounce buffer outside the Go heap (part of an
// anonymous mapping), so that it can be used for O_DIRECT and registered
// with CUDA.
type Buffer struct {
	Mem  []byte
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
	pool  *Pool        // the pool that carved it
}

// PinFunc registers memory with CUDA and returns how to undo it
// (devmem.PinHost).
type PinFunc func([]byte) (unpin func() error, err error)

// Pool recycles bounce buffers of the current size, most recently used
// first. Buffers of an old size are freed as they come back. The zero
// Pool hands out plain (unpinned) buffers.
type Pool struct {
	// Pin pins each slab the pool maps; nil for plain buffers. A pinning
	// pool's Get, Reserve and Put need a CUDA context current.
	Pin PinFunc
	// OnAlloc, if set, is told of each slab mapped: how many buffers of
	// what size, and the bytes the pool then holds (for log records).
	OnAlloc func(buffers, size int, pinned bool, poolBytes int64)
	// Node, if set, returns the NUMA node that the calling goroutine's
	// buffers belong on (Placer.CurrentNode), or -1 for none. The pool
	// then keeps each node's buffers in a pool of their own, whose slabs
	// Bind places on the node before their pages are first touched.
	Node func() int
	Bind func(mem []byte, node int)

	grow sync.Mutex // serialises Reserve's allocations
	// place puts a new slab on a node's memory: set on a node's pool.
	place func(mem []byte)
	nodes map[int]*Pool // by node, under mu

	mu    sync.Mutex
	size  int
	gen   int // incremented when size changes
	free  []*Buffer
	held  int   // buffers of the current generation, idle or in use
	bytes int64 // bytes of buffers held, idle or in use, any generation
}

// setSizeLocked switches the pool to buffers of size bytes, freeing the
// idle buffers of another size.
func (p *Pool) setSizeLocked(size int) {
	if size != p.size {
		p.dropLocked()
		p.size, p.held = size, 0
		p.gen++
	}
}

// forNode returns the pool for the calling goroutine's node: p, or the
// pool of p's buffers on that node.
func (p *Pool) forNode() *Pool {
	if p.Node == nil {
		return p
	}
	n := p.Node()
	if n < 0 {
		return p
	}
	p.mu.Lock()
	defer p.mu.Unlock()
	q := p.nodes[n]
	if q == nil {
		q = &Pool{Pin: p.Pin, OnAlloc: p.OnAlloc}
		if bind := p.Bind; bind != nil {
			q.place = func(mem []byte) { bind(mem, n) }
		}
		if p.nodes == nil {
			p.nodes = map[int]*Pool{}
		}
		p.nodes[n] = q
	}
	return q
}

// nodePools returns the pools of p's buffers on each node.
func (p *Pool) nodePools() []*Pool {
	p.mu.Lock()
	defer p.mu.Unlock()
	qs := make([]*Pool, 0, len(p.nodes))
	for _, q := range p.nodes {
		qs = append(qs, q)
	}
	return qs
}

// Get returns a buffer of at least size bytes rounded up to whole pages.
func (p *Pool) Get(size int) (*Buffer, error) {
	if q := p.forNode(); q != p {
		return q.Get(size)
	}
	size = AlignUp(max(size, 1), PageSize)
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

// Reserve makes sure the pool holds at least n buffers of size bytes
// (idle or in use), allocating the missing ones as one slab: one mapping
// and one registration instead of one per buffer, which is what makes the
// first device operation of a process slow.
func (p *Pool) Reserve(n, size int) error {
	if q := p.forNode(); q != p {
		return q.Reserve(n, size)
	}
	size = AlignUp(max(size, 1), PageSize)
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
func (p *Pool) alloc(size, k, gen int) ([]*Buffer, error) {
	total := size * k
	mem, err := mapSlab(total, p.Pin != nil, p.place)
	if err != nil {
		return nil, fmt.Errorf("kvik: allocating %d bytes of bounce buffers: %w", total, err)
	}
	s := &slab{mem: mem, refs: k, pool: p}
	if p.Pin != nil {
		if s.unpin, err = p.Pin(mem); err != nil {
			Munmap(mem)
			return nil, fmt.Errorf("kvik: pinning %d bytes of bounce buffers: %w", total, err)
		}
	}
	bufs := make([]*Buffer, k)
	for i := range bufs {
		bufs[i] = &Buffer{Mem: mem[i*size : (i+1)*size : (i+1)*size], slab: s, gen: gen}
	}
	if p.OnAlloc != nil {
		p.OnAlloc(k, size, p.Pin != nil, p.Mapped())
	}
	return bufs, nil
}

// mapSlab maps n bytes of anonymous memory, placed by place (if not nil)
// before any page is touched. For memory that will be pinned, it asks for
// huge pages and faults the pages in from several goroutines:
// registration would otherwise fault (and zero) them one thread at a
// time.
func mapSlab(n int, pinned bool, place func([]byte)) ([]byte, error) {
	if !pinned || n < hugePage {
		mem, err := MmapAnon(n)
		if err == nil && place != nil {
			place(mem)
		}
		return mem, err
	}
	// Map a huge page more and trim, so that the slab starts on a huge
	// page boundary.
	raw, err := MmapAnon(n + hugePage)
	if err != nil {
		return nil, err
	}
	head := AlignUp(AddrOf(raw), hugePage) - AddrOf(raw)
	if head > 0 {
		Munmap(raw[:head])
	}
	if tail := raw[head+n:]; len(tail) > 0 {
		Munmap(tail)
	}
	mem := raw[head : head+n : head+n]
	unix.Madvise(mem, unix.MADV_HUGEPAGE) // a hint: without THP, small pages do
	if place != nil {
		place(mem)
	}
	prefault(mem)
	return mem, nil
}

// MmapAnon maps n bytes of private anonymous memory. It and Munmap work
// on raw addresses, since unix.Munmap only unmaps whole unix.Mmap slices
// and slabs are trimmed.
func MmapAnon(n int) ([]byte, error) {
	p, err := unix.MmapPtr(-1, 0, nil, uintptr(n), unix.PROT_READ|unix.PROT_WRITE, unix.MAP_PRIVATE|unix.MAP_ANONYMOUS)
	if err != nil {
		return nil, err
	}
	return unsafe.Slice((*byte)(p), n), nil
}

// Munmap unmaps the pages of b, which MmapAnon mapped.
func Munmap(b []byte) error {
	return unix.MunmapPtr(unsafe.Pointer(unsafe.SliceData(b)), uintptr(len(b)))
}

// prefault writes one byte of every page of mem, in parallel.
func prefault(mem []byte) {
	parts := min(runtime.GOMAXPROCS(0), len(mem)/hugePage)
	per := AlignUp(len(mem)/max(parts, 1), hugePage)
	var wg sync.WaitGroup
	for off := 0; off < len(mem); off += per {
		part := mem[off:min(off+per, len(mem))]
		wg.Go(func() {
			for i := 0; i < len(part); i += PageSize {
				part[i] = 0
			}
		})
	}
	wg.Wait()
}

// Put returns b to the pool that made it (p, or p's pool of b's node),
// or frees it if the size setting changed.
func (p *Pool) Put(b *Buffer) {
	if o := b.slab.pool; o != p && o != nil {
		o.Put(b)
		return
	}
	p.mu.Lock()
	defer p.mu.Unlock()
	p.putLocked(b)
}

func (p *Pool) putLocked(b *Buffer) {
	if b.gen == p.gen {
		p.free = append(p.free, b)
		return
	}
	p.bytes -= int64(len(b.Mem))
	p.release(b)
}

// release frees b's slab once none of its buffers is left; the pool's
// lock is held, which guards the slab's count.
func (p *Pool) release(b *Buffer) {
	s := b.slab
	if s.refs--; s.refs > 0 {
		return
	}
	if s.unpin != nil {
		s.unpin()
	}
	Munmap(s.mem)
}

// dropLocked frees every idle buffer and returns the bytes freed.
func (p *Pool) dropLocked() int64 {
	var n int64
	for _, b := range p.free {
		n += int64(len(b.Mem))
		p.release(b)
	}
	p.held -= len(p.free)
	p.free = nil
	p.bytes -= n
	return n
}

// Drop frees every idle buffer, on every node, and returns the bytes
// freed.
func (p *Pool) Drop() int64 {
	var n int64
	for _, q := range p.nodePools() {
		n += q.Drop()
	}
	p.mu.Lock()
	defer p.mu.Unlock()
	return n + p.dropLocked()
}

// Mapped returns the bytes the pool has mapped, idle or in use, on every
// node.
func (p *Pool) Mapped() int64 {
	var n int64
	for _, q := range p.nodePools() {
		n += q.Mapped()
	}
	p.mu.Lock()
	defer p.mu.Unlock()
	return n + p.bytes
}

// AddrOf returns the address of b's first byte.
func AddrOf(b []byte) int { return int(uintptr(unsafe.Pointer(unsafe.SliceData(b)))) }
