package kernels

import (
	"encoding/binary"
	"fmt"
	"hash/crc32"
	"math/bits"
	"sync"
	"unsafe"

	"github.com/kvikgo/kvik/cuda"
	"github.com/kvikgo/kvik/internal/crcsum"
)

// crcSegments is about how many segments, a warp's each, a sum splits
// its bytes into: one wave of warps on an H100 or H200 (132 SMs of 64),
// and few enough that joining them costs the last warps little.
const crcSegments = 8192

// crcMinRounds is the fewest 256-byte rounds a segment has: shorter
// ones spend more on their joins than on their bytes.
const crcMinRounds = 16

// crcSums is how many sums run at once in a context; more wait.
const crcSums = 64

// CRC32 launches the crc32 kernel (crc.cu) in one context. It keeps
// there, for the life of the process as the modules are, a copy of each
// polynomial's tables and crcSums words for sums: a sum allocates and
// frees no device memory, which would wait for the device's other work.
type CRC32 struct {
	f    cuda.Function
	sums chan crcSum
	mu   sync.Mutex
	tabs map[*crcsum.Poly]cuda.DevicePtr
}

// crcSum is a word of device memory the kernel XORs a sum into, and
// what it held before (so that it need not be cleared), unless stale: a
// sum that failed may or may not have changed it.
type crcSum struct {
	p     cuda.DevicePtr
	last  uint32
	stale bool
}

var crcs = map[uint64]*CRC32{} // by context ID, under mu

// LoadCRC32 returns ctx's CRC-32 kernel, loading its module the first
// time; ctx must be current. A driver that cannot run it gives an error,
// each time: the caller sums the bytes on the CPU.
func LoadCRC32(ctx cuda.Context) (*CRC32, error) {
	f, err := load(ctx, crcPTX, "crc32")
	if err != nil {
		return nil, err
	}
	id, err := cuda.CtxGetID(ctx)
	if err != nil {
		return nil, fmt.Errorf("kernels: context ID: %w", err)
	}
	mu.Lock()
	defer mu.Unlock()
	if u := crcs[id]; u != nil {
		return u, nil
	}
	d, err := cuda.MemAlloc(4 * crcSums)
	if err == nil {
		if err = cuda.MemsetD8(d.Ptr(), 0, 4*crcSums); err != nil {
			d.Close()
		}
	}
	if err != nil {
		return nil, fmt.Errorf("kernels: memory for the crc32 kernel: %w", err)
	}
	u := &CRC32{f: f, sums: make(chan crcSum, crcSums), tabs: map[*crcsum.Poly]cuda.DevicePtr{}}
	for i := range crcSums {
		u.sums <- crcSum{p: d.Ptr() + cuda.DevicePtr(4*i)}
	}
	crcs[id] = u
	return u, nil
}

// Update returns crc continued over the n bytes of device memory at ptr
// under polynomial p, as crc32.Update(crc, p.Table(), bytes) would. It
// runs on stream s of the context u was loaded in (current) and waits
// for it; the bytes must not change meanwhile. The bytes before ptr's
// first 8-byte boundary (up to 7) and after the last whole segment
// (fewer than a segment's, about n/8192 and at least 4 KiB) are copied to
// host memory and summed there.
func (u *CRC32) Update(s cuda.Stream, crc uint32, p *crcsum.Poly, ptr cuda.DevicePtr, n int64) (uint32, error) {
	if n < 0 || (n > 0 && ptr == 0) {
		return crc, invalidArg("crc32", "%d bytes at %#x", n, uint64(ptr))
	}
	head := min(int64(-uint64(ptr)%8), n)
	rounds := max(crcMinRounds, (n-head+crcSegments*256-1)/(crcSegments*256))
	seg := 256 * rounds
	nseg := (n - head) / seg
	if nseg == 0 {
		return hostUpdate(s, crc, p, ptr, n)
	}
	crc, err := hostUpdate(s, crc, p, ptr, head)
	if err != nil {
		return crc, err
	}
	body := nseg * seg
	raw, err := u.raw(s, p, ptr+cuda.DevicePtr(head), nseg, rounds)
	if err != nil {
		return crc, err
	}
	// crc32.Update inverts the sum before and after: the register runs
	// from ^crc over the body, whose own sum from zero is raw.
	crc = ^p.Combine(^crc, raw, body)
	return hostUpdate(s, crc, p, ptr+cuda.DevicePtr(head+body), n-head-body)
}

// raw returns the CRC from zero, not inverted, of nseg segments of
// rounds x 256 bytes at ptr (8-byte aligned).
func (u *CRC32) raw(s cuda.Stream, p *crcsum.Poly, ptr cuda.DevicePtr, nseg, rounds int64) (uint32, error) {
	tabs, err := u.tables(p)
	if err != nil {
		return 0, err
	}
	out := <-u.sums
	defer func() { u.sums <- out }()
	if out.stale {
		if out.last, err = readWord(s, out.p); err != nil {
			return 0, err
		}
		out.stale = false
	}
	prm := &struct {
		base   cuda.DevicePtr
		nseg   uint64
		rounds uint32
		tabs   cuda.DevicePtr
		poly   uint32
		pw     [32]uint32
		out    cuda.DevicePtr
	}{base: ptr, nseg: uint64(nseg), rounds: uint32(rounds), tabs: tabs, poly: p.Reversed(), pw: segmentPowers(p, 256*rounds, nseg), out: out.p}
	params := []unsafe.Pointer{unsafe.Pointer(&prm.base), unsafe.Pointer(&prm.nseg), unsafe.Pointer(&prm.rounds),
		unsafe.Pointer(&prm.tabs), unsafe.Pointer(&prm.poly), unsafe.Pointer(&prm.pw), unsafe.Pointer(&prm.out)}
	const warps = blockThreads / 32
	out.stale = true
	if err := cuda.LaunchKernel(u.f, cuda.Dim3{X: uint32((nseg + warps - 1) / warps)}, cuda.Dim3{X: blockThreads}, 0, s, params); err != nil {
		return 0, err
	}
	v, err := readWord(s, out.p)
	if err != nil {
		return 0, err
	}
	sum := v ^ out.last
	out.last, out.stale = v, false
	return sum, nil
}

// readWord returns the word at p once stream s is done.
func readWord(s cuda.Stream, p cuda.DevicePtr) (uint32, error) {
	var b [4]byte
	if err := cuda.MemcpyDtoHAsync(b[:], p, s); err != nil {
		return 0, err
	}
	if err := cuda.StreamSynchronize(s); err != nil {
		return 0, err
	}
	return binary.LittleEndian.Uint32(b[:]), nil
}

// tables returns the device copy of p's round tables, copying them there
// the first time.
func (u *CRC32) tables(p *crcsum.Poly) (cuda.DevicePtr, error) {
	u.mu.Lock()
	defer u.mu.Unlock()
	if d, ok := u.tabs[p]; ok {
		return d, nil
	}
	t := roundTables(p)
	h := make([]byte, 4*len(t))
	for i, v := range t {
		binary.LittleEndian.PutUint32(h[4*i:], v)
	}
	d, err := cuda.MemAlloc(len(h))
	if err != nil {
		return 0, err
	}
	if err := cuda.MemcpyHtoD(d.Ptr(), h); err != nil {
		d.Close()
		return 0, err
	}
	u.tabs[p] = d.Ptr()
	return d.Ptr(), nil
}

// hostUpdate continues crc over n bytes at ptr copied to host memory.
func hostUpdate(s cuda.Stream, crc uint32, p *crcsum.Poly, ptr cuda.DevicePtr, n int64) (uint32, error) {
	if n == 0 {
		return crc, nil
	}
	b := make([]byte, n)
	if err := cuda.MemcpyDtoHAsync(b, ptr, s); err != nil {
		return crc, err
	}
	if err := cuda.StreamSynchronize(s); err != nil {
		return crc, err
	}
	return crc32.Update(crc, p.Table(), b), nil
}

// crcRound is what the kernel's tables hold for a polynomial: T[k][v],
// the CRC from zero of a 256-byte round whose byte k is v and the rest
// zero, and per lane l the powers x^(8(256-8l)) and x^(8(252-8l)) that
// move its last word's halves to a segment's end.
type crcRound [8*256 + 64]uint32

func roundTables(p *crcsum.Poly) *crcRound {
	t := new(crcRound)
	tab := p.Table()
	for k := range 8 {
		xk := p.XPow8n(int64(255 - k))
		for v := range 256 {
			t[256*k+v] = p.Mul(tab[v], xk)
		}
	}
	for l := range 32 {
		t[2048+l] = p.XPow8n(int64(256 - 8*l))
		t[2048+32+l] = p.XPow8n(int64(252 - 8*l))
	}
	return t
}

// segmentPowers returns x^(8*seg*2^j) for the bits j of nseg (0 past
// them): what shifts a segment of seg bytes over those after it.
func segmentPowers(p *crcsum.Poly, seg, nseg int64) [32]uint32 {
	var pw [32]uint32
	x := p.XPow8n(seg)
	for j := range bits.Len64(uint64(nseg)) {
		pw[j] = x
		x = p.Mul(x, x)
	}
	return pw
}
