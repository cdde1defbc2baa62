// Package kernels runs kvik's own CUDA kernels on data on its way to
// device memory, where the GPU does in microseconds what would take the
// CPU cores that decode it milliseconds. The kernels are PTX embedded in
// the binary (unshuffle.ptx, made from unshuffle.cu by go generate),
// loaded into a context on first use, the driver compiling them for its
// device, and kept for the life of the process.
package kernels

//go:generate clang-14 -x cuda --cuda-device-only --cuda-gpu-arch=sm_75 -nocudainc -nocudalib -O3 -S -o unshuffle.ptx unshuffle.cu

import (
	_ "embed"
	"fmt"
	"math"
	"sync"
	"unsafe"

	"github.com/kvikgo/kvik/cuda"
)

//go:embed unshuffle.ptx
var unshufflePTX []byte

// blockThreads is the threads of a block of the unshuffle kernel.
const blockThreads = 256

// Unshuffler launches the unshuffle kernel in one context.
type Unshuffler struct{ f cuda.Function }

// The unshufflers loaded so far, by context ID (a handle may be reused
// by a later context; an ID is not), a failed load kept as its error.
var (
	mu     sync.Mutex
	loaded = map[uint64]loadResult{}
)

type loadResult struct {
	u   *Unshuffler
	err error
}

// LoadUnshuffler returns ctx's unshuffler, loading its module the first
// time; ctx must be current. A driver that cannot run it (no PTX
// compiler, a PTX version it does not know, no cuCtxGetId: before CUDA
// 12) gives an error, each time: the caller does the work on the CPU.
func LoadUnshuffler(ctx cuda.Context) (*Unshuffler, error) {
	id, err := cuda.CtxGetID(ctx)
	if err != nil {
		return nil, fmt.Errorf("kernels: context ID: %w", err)
	}
	mu.Lock()
	defer mu.Unlock()
	if r, ok := loaded[id]; ok {
		return r.u, r.err
	}
	var r loadResult
	m, err := cuda.ModuleLoadData(unshufflePTX)
	if err == nil {
		var f cuda.Function
		if f, err = cuda.ModuleGetFunction(m, "unshuffle"); err == nil {
			r.u = &Unshuffler{f: f}
		} else {
			cuda.ModuleUnload(m)
		}
	}
	if err != nil {
		r.err = fmt.Errorf("kernels: loading the unshuffle kernel: %w", err)
	}
	loaded[id] = r
	return r.u, r.err
}

// Unshuffle queues on stream s (of the context u was loaded in, current)
// the undoing of Blosc's byte shuffle of the n bytes at src: blocks of
// blocksize bytes (the last may be shorter) of typesize-byte elements,
// in each of which byte j of element i lies at j*(len/typesize)+i and
// the len%typesize bytes after the last whole element are as they were.
// The unshuffled bytes go to dst in rows of width bytes, dpitch apart (a
// chunk's rows in a region; width n for one run). src and dst must not
// overlap.
func (u *Unshuffler) Unshuffle(s cuda.Stream, dst cuda.DevicePtr, width, dpitch int, src cuda.DevicePtr, n, blocksize, typesize int) error {
	switch {
	case n <= 0 || n > math.MaxInt32:
		return invalid("%d bytes", n)
	case blocksize <= 0 || typesize <= 0 || typesize > 255:
		return invalid("block size %d, type size %d", blocksize, typesize)
	case width <= 0 || width > math.MaxInt32 || (n > width && dpitch < width):
		return invalid("rows of %d bytes %d apart", width, dpitch)
	}
	blocksize = min(blocksize, n)
	parts := max(1, (blocksize/typesize+blockThreads-1)/blockThreads)
	blocks := (n + blocksize - 1) / blocksize
	if blocks > math.MaxInt32/parts {
		return invalid("%d blocks of %d bytes", blocks, blocksize)
	}
	p := &struct {
		src, dst                cuda.DevicePtr
		n, bs, ts, parts, width uint32
		dpitch                  uint64
	}{src: src, dst: dst, n: uint32(n), bs: uint32(blocksize), ts: uint32(typesize), parts: uint32(parts), width: uint32(width), dpitch: uint64(dpitch)}
	params := []unsafe.Pointer{unsafe.Pointer(&p.src), unsafe.Pointer(&p.dst), unsafe.Pointer(&p.n), unsafe.Pointer(&p.bs),
		unsafe.Pointer(&p.ts), unsafe.Pointer(&p.parts), unsafe.Pointer(&p.width), unsafe.Pointer(&p.dpitch)}
	return cuda.LaunchKernel(u.f, cuda.Dim3{X: uint32(blocks * parts)}, cuda.Dim3{X: blockThreads}, 0, s, params)
}

func invalid(format string, a ...any) error {
	return fmt.Errorf("kernels: unshuffle: %s: %w", fmt.Sprintf(format, a...), cuda.ErrorInvalidValue)
}
