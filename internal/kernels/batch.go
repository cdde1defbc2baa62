package kernels

import (
	"encoding/binary"
	"fmt"

	"github.com/kvikgo/kvik/cuda"
)

// Frame is one compressed frame (or stream) of a batch: SrcLen bytes at
// Src decoded into at most DstCap bytes at Dst, both in device memory of
// the decoder's context.
type Frame struct {
	Src    cuda.DevicePtr
	SrcLen int
	Dst    cuda.DevicePtr
	DstCap int
}

// A Decoder decodes frames on the GPU in batches: Zstd, Inflate.
type Decoder interface {
	// NewBatch allocates a batch of up to n frames; close it once its
	// decodes are done.
	NewBatch(n int) (*Batch, error)
}

// frameJobSize is the size of a frame's descriptor in device memory (the
// kernels' struct zjob and struct ijob alike: src, dst, srcSize, dstCap).
const frameJobSize = 32

// Batch is the device memory that decoding up to n frames at once
// takes: their descriptors and results, and each frame's scratch memory
// where the kernel takes some.
type Batch struct {
	name  string
	n     int
	mem   *cuda.DeviceBuffer
	jobs  []byte
	sizes []byte
	// launch runs the kernel over n frames: their descriptors at jobs,
	// scratch memory, results at out.
	launch func(s cuda.Stream, jobs cuda.DevicePtr, n uint32, scratch, out cuda.DevicePtr) error
}

// newBatch allocates a batch of n frames of scratch bytes each.
func newBatch(name string, n, scratch int, launch func(s cuda.Stream, jobs cuda.DevicePtr, n uint32, scratch, out cuda.DevicePtr) error) (*Batch, error) {
	if n <= 0 || n > (1<<40)/(frameJobSize+8+scratch) {
		return nil, invalidArg(name, "a batch of %d frames", n)
	}
	mem, err := cuda.MemAlloc(n * (frameJobSize + 8 + scratch))
	if err != nil {
		return nil, fmt.Errorf("kernels: memory for a %s batch of %d frames: %w", name, n, err)
	}
	return &Batch{name: name, n: n, mem: mem, jobs: make([]byte, n*frameJobSize), sizes: make([]byte, n*8), launch: launch}, nil
}

// Close frees the batch's device memory.
func (b *Batch) Close() error { return b.mem.Close() }

// Len returns how many frames the batch takes at once.
func (b *Batch) Len() int { return b.n }

// Decode decodes frames (at most Len) on stream s and waits for them: it
// returns each frame's decoded size, or -1 for a frame the GPU left (its
// destination then holds any bytes: decode it on the CPU). A frame that
// decodes to more than DstCap bytes is -1 as well, never written past
// it.
func (b *Batch) Decode(s cuda.Stream, frames []Frame) ([]int, error) {
	n := len(frames)
	if n == 0 {
		return nil, nil
	}
	if n > b.n {
		return nil, invalidArg(b.name, "%d frames in a batch of %d", n, b.n)
	}
	for i, f := range frames {
		if f.SrcLen < 0 || f.DstCap < 0 || (f.SrcLen > 0 && f.Src == 0) || (f.DstCap > 0 && f.Dst == 0) {
			return nil, invalidArg(b.name, "frame %d: %d bytes at %#x into %d at %#x", i, f.SrcLen, uint64(f.Src), f.DstCap, uint64(f.Dst))
		}
		j := b.jobs[i*frameJobSize:]
		binary.LittleEndian.PutUint64(j, uint64(f.Src))
		binary.LittleEndian.PutUint64(j[8:], uint64(f.Dst))
		binary.LittleEndian.PutUint64(j[16:], uint64(f.SrcLen))
		binary.LittleEndian.PutUint64(j[24:], uint64(f.DstCap))
	}
	jobs := b.mem.Ptr()
	out := jobs + cuda.DevicePtr(b.n*frameJobSize)
	scratch := out + cuda.DevicePtr(b.n*8)
	if err := cuda.MemcpyHtoDAsync(jobs, b.jobs[:n*frameJobSize], s); err != nil {
		return nil, err
	}
	if err := b.launch(s, jobs, uint32(n), scratch, out); err != nil {
		return nil, err
	}
	if err := cuda.MemcpyDtoHAsync(b.sizes[:8*n], out, s); err != nil {
		return nil, err
	}
	if err := cuda.StreamSynchronize(s); err != nil {
		return nil, err
	}
	sizes := make([]int, n)
	for i, f := range frames {
		v := binary.LittleEndian.Uint64(b.sizes[8*i:])
		sizes[i] = -1
		if v <= uint64(f.DstCap) {
			sizes[i] = int(v)
		}
	}
	return sizes, nil
}
