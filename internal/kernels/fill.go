package kernels

import (
	"encoding/binary"
	"math"
	"unsafe"

	"github.com/kvikgo/kvik/cuda"
)

// maxGridY is the most blocks a grid has along y: a launch of differs
// scans at most this many chunks.
const maxGridY = 65535

// FillScanner launches the differs kernel (fill.cu) in one context.
type FillScanner struct{ f cuda.Function }

// LoadFillScanner returns ctx's fill scanner, loading its module the
// first time; ctx must be current. A driver that cannot run it gives an
// error, each time.
func LoadFillScanner(ctx cuda.Context) (*FillScanner, error) {
	f, err := load(ctx, fillPTX, "differs")
	if err != nil {
		return nil, err
	}
	return &FillScanner{f: f}, nil
}

// Differs reports for each chunk, the n bytes of device memory at
// base+offs[i], whether it holds anything but the fill value: byte j of
// a chunk against fill[j%len(fill)]. It runs on stream s of the context
// u was loaded in (current) and waits for it; the chunks must not change
// meanwhile. The offsets and the fill value go to device memory of its
// own, freed before it returns.
func (u *FillScanner) Differs(s cuda.Stream, base cuda.DevicePtr, offs []uint64, n int, fill []byte) ([]bool, error) {
	k, es := len(offs), len(fill)
	switch {
	case k == 0:
		return nil, nil
	case n <= 0 || es == 0 || es > math.MaxInt32:
		return nil, invalidArg("differs", "chunks of %d bytes, a fill value of %d", n, es)
	}
	// One buffer, one copy in and one out: the offsets, a flag per chunk
	// (zero until a byte differs), the fill value.
	h := make([]byte, 12*k+es)
	for i, o := range offs {
		binary.LittleEndian.PutUint64(h[8*i:], o)
	}
	copy(h[12*k:], fill)
	d, err := cuda.MemAlloc(len(h))
	if err != nil {
		return nil, err
	}
	defer d.Close()
	if err := cuda.MemcpyHtoDAsync(d.Ptr(), h, s); err != nil {
		return nil, err
	}
	grid := uint32(min(max(n/(blockThreads*64), 1), 64))
	for c := 0; c < k; c += maxGridY {
		p := &struct {
			base, offs cuda.DevicePtr
			n          uint64
			fill       cuda.DevicePtr
			es         uint32
			flags      cuda.DevicePtr
		}{base: base, offs: d.Ptr() + cuda.DevicePtr(8*c), n: uint64(n), fill: d.Ptr() + cuda.DevicePtr(12*k), es: uint32(es), flags: d.Ptr() + cuda.DevicePtr(8*k+4*c)}
		params := []unsafe.Pointer{unsafe.Pointer(&p.base), unsafe.Pointer(&p.offs), unsafe.Pointer(&p.n), unsafe.Pointer(&p.fill), unsafe.Pointer(&p.es), unsafe.Pointer(&p.flags)}
		if err := cuda.LaunchKernel(u.f, cuda.Dim3{X: grid, Y: uint32(min(k-c, maxGridY))}, cuda.Dim3{X: blockThreads}, 0, s, params); err != nil {
			return nil, err
		}
	}
	flags := h[8*k : 12*k]
	if err := cuda.MemcpyDtoHAsync(flags, d.Ptr()+cuda.DevicePtr(8*k), s); err != nil {
		return nil, err
	}
	if err := cuda.StreamSynchronize(s); err != nil {
		return nil, err
	}
	out := make([]bool, k)
	for i := range out {
		out[i] = binary.LittleEndian.Uint32(flags[4*i:]) != 0
	}
	return out, nil
}
