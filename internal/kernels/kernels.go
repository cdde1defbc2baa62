// Package kernels runs kvik's own CUDA kernels on data on its way to or
// from device memory, where the GPU does in microseconds what would take
// the CPU cores milliseconds (and a copy to host memory first), or, for
// zstd and deflate streams, decodes a share of what the cores would, and
// encodes Blosc LZ4 chunks where they lie. The kernels are PTX embedded
// in the binary (unshuffle.ptx, fill.ptx, crc.ptx, zstd.ptx, inflate.ptx
// and lz4.ptx, made from their .cu files by go generate), loaded into a
// context on first use, the driver compiling them for its device, and
// kept for the life of the process.
package kernels

//go:generate clang-14 -x cuda --cuda-device-only --cuda-gpu-arch=sm_75 -nocudainc -nocudalib -O3 -S -o unshuffle.ptx unshuffle.cu
//go:generate clang-14 -x cuda --cuda-device-only --cuda-gpu-arch=sm_75 -nocudainc -nocudalib -O3 -S -o fill.ptx fill.cu
//go:generate clang-14 -x cuda --cuda-device-only --cuda-gpu-arch=sm_75 -nocudainc -nocudalib -Xclang -target-feature -Xclang +ptx63 -O3 -S -o crc.ptx crc.cu
//go:generate clang-14 -x cuda --cuda-device-only --cuda-gpu-arch=sm_75 -nocudainc -nocudalib -Xclang -target-feature -Xclang +ptx63 -O3 -S -o zstd.ptx zstd.cu
//go:generate clang-14 -x cuda --cuda-device-only --cuda-gpu-arch=sm_75 -nocudainc -nocudalib -Xclang -target-feature -Xclang +ptx63 -O3 -S -o inflate.ptx inflate.cu
//go:generate clang-14 -x cuda --cuda-device-only --cuda-gpu-arch=sm_75 -nocudainc -nocudalib -Xclang -target-feature -Xclang +ptx63 -O3 -S -o lz4.ptx lz4.cu

import (
	_ "embed"
	"fmt"
	"math"
	"sync"
	"unsafe"

	"github.com/kvikgo/kvik/cuda"
)

var (
	//go:embed unshuffle.ptx
	unshufflePTX []byte
	//go:embed fill.ptx
	fillPTX []byte
	//go:embed crc.ptx
	crcPTX []byte
	//go:embed zstd.ptx
	zstdPTX []byte
	//go:embed inflate.ptx
	inflatePTX []byte
	//go:embed lz4.ptx
	lz4PTX []byte
)

// blockThreads is the threads of a block of the kernels.
const blockThreads = 256

// The kernels loaded so far, by context ID (a handle may be reused by a
// later context; an ID is not) and name, a failed load kept as its error.
var (
	mu     sync.Mutex
	loaded = map[loadKey]loadResult{}
)

type loadKey struct {
	ctx  uint64
	name string
}

type loadResult struct {
	fs  []cuda.Function
	err error
}

// load returns ctx's kernel name from the module ptx, loading the module
// the first time; ctx must be current. A driver that cannot run it (no
// PTX compiler, a PTX version it does not know, no cuCtxGetId: before
// CUDA 12) gives an error, each time.
func load(ctx cuda.Context, ptx []byte, name string) (cuda.Function, error) {
	fs, err := loadAll(ctx, ptx, name)
	if err != nil {
		return 0, err
	}
	return fs[0], nil
}

// loadAll is load of the kernels names of one module, loaded once.
func loadAll(ctx cuda.Context, ptx []byte, names ...string) ([]cuda.Function, error) {
	id, err := cuda.CtxGetID(ctx)
	if err != nil {
		return nil, fmt.Errorf("kernels: context ID: %w", err)
	}
	mu.Lock()
	defer mu.Unlock()
	k := loadKey{id, names[0]}
	if r, ok := loaded[k]; ok {
		return r.fs, r.err
	}
	var r loadResult
	m, err := cuda.ModuleLoadData(ptx)
	for _, name := range names {
		if err != nil {
			break
		}
		var f cuda.Function
		if f, err = cuda.ModuleGetFunction(m, name); err == nil {
			r.fs = append(r.fs, f)
		}
	}
	if err != nil {
		if m != 0 {
			cuda.ModuleUnload(m)
		}
		r = loadResult{err: fmt.Errorf("kernels: loading the %s kernel: %w", names[0], err)}
	}
	loaded[k] = r
	return r.fs, r.err
}

// Unshuffler launches the unshuffle kernel in one context.
type Unshuffler struct{ f cuda.Function }

// LoadUnshuffler returns ctx's unshuffler, loading its module the first
// time; ctx must be current. A driver that cannot run it gives an error,
// each time: the caller does the work on the CPU.
func LoadUnshuffler(ctx cuda.Context) (*Unshuffler, error) {
	f, err := load(ctx, unshufflePTX, "unshuffle")
	if err != nil {
		return nil, err
	}
	return &Unshuffler{f: f}, nil
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
	return invalidArg("unshuffle", format, a...)
}

// invalidArg is the error of kernel name's arguments.
func invalidArg(name, format string, a ...any) error {
	return fmt.Errorf("kernels: %s: %s: %w", name, fmt.Sprintf(format, a...), cuda.ErrorInvalidValue)
}
