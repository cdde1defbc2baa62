package kernels

import (
	"unsafe"

	"github.com/kvikgo/kvik/cuda"
)

// The size of zstd.cu's scratch memory for a frame (struct zscratch: a
// group of eight blocks' literals, sequences and tables). TestZstdModel
// checks it, and the frame descriptor's (struct zjob: frameJobSize),
// against the C compiler's.
const zstdScratchSize = 2705160

// Zstd decodes zstd frames on the GPU (zstd.cu): each frame by one warp,
// eight blocks at a time, their Huffman literal streams a lane each and
// their sequences a lane a block, then their output in order, 32
// sequences at a time. A launch takes tens of milliseconds however few
// its frames (46 ms for 64 frames of 1 MiB on an H200, 62 ms for 1024:
// 17 GB/s), so it wants hundreds of frames at once. A frame with a
// checksum or a dictionary, a frame followed by more bytes, a block of
// more than 24576 sequences, or one that does not decode is left to the
// caller, who decodes it on the CPU (and so reports its error as the
// CPU's decoder words it): Batch.Decode says which.
type Zstd struct{ f cuda.Function }

// LoadZstd returns ctx's zstd decoder, loading its module the first
// time; ctx must be current. A driver that cannot run it gives an error,
// each time: the caller decodes on the CPU.
func LoadZstd(ctx cuda.Context) (*Zstd, error) {
	f, err := load(ctx, zstdPTX, "zstd")
	if err != nil {
		return nil, err
	}
	return &Zstd{f: f}, nil
}

// NewBatch allocates a batch of up to n frames, each with 2.6 MiB of
// the kernel's scratch memory (eight blocks' literals, sequences and
// tables); close it once its decodes are done.
func (z *Zstd) NewBatch(n int) (*Batch, error) {
	return newBatch("zstd", n, zstdScratchSize, func(s cuda.Stream, jobs cuda.DevicePtr, n uint32, scratch, out cuda.DevicePtr) error {
		p := &struct {
			jobs    cuda.DevicePtr
			n       uint32
			scratch cuda.DevicePtr
			out     cuda.DevicePtr
		}{jobs, n, scratch, out}
		params := []unsafe.Pointer{unsafe.Pointer(&p.jobs), unsafe.Pointer(&p.n), unsafe.Pointer(&p.scratch), unsafe.Pointer(&p.out)}
		return cuda.LaunchKernel(z.f, cuda.Dim3{X: n}, cuda.Dim3{X: 32}, 0, s, params)
	})
}
