package kernels

import (
	"encoding/binary"
	"fmt"
	"unsafe"

	"github.com/kvikgo/kvik/cuda"
)

// Sizes of zstd.cu's structs: a frame's descriptor (struct zjob) and its
// scratch memory (struct zscratch: a group of eight blocks' literals,
// sequences and tables). TestZstdModel checks them against the C
// compiler's.
const (
	zstdJobSize     = 32
	zstdScratchSize = 2705160
)

// Zstd decodes zstd frames on the GPU (zstd.cu): each frame by one warp,
// eight blocks at a time, their Huffman literal streams a lane each and
// their sequences a lane a block, then their output in order, 32
// sequences at a time. A launch takes tens of milliseconds however few
// its frames (46 ms for 64 frames of 1 MiB on an H200, 62 ms for 1024:
// 17 GB/s), so it wants hundreds of frames at once. A frame with a
// checksum or a dictionary, a frame followed by more bytes, a block of
// more than 24576 sequences, or one that does not decode is left to the
// caller, who decodes it on the CPU (and so reports its error as the
// CPU's decoder words it): ZstdBatch.Decode says which.
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

// ZstdFrame is one frame of a batch: SrcLen bytes at Src decoded into
// at most DstCap bytes at Dst, both in device memory of the decoder's
// context.
type ZstdFrame struct {
	Src    cuda.DevicePtr
	SrcLen int
	Dst    cuda.DevicePtr
	DstCap int
}

// ZstdBatch is the device memory that decoding up to n frames at once
// takes: their descriptors and results, and each frame's scratch (2.6
// MiB: eight blocks' literals, sequences and tables).
type ZstdBatch struct {
	z     *Zstd
	n     int
	mem   *cuda.DeviceBuffer
	jobs  []byte
	sizes []byte
}

// NewBatch allocates a batch of up to n frames; close it once its
// decodes are done.
func (z *Zstd) NewBatch(n int) (*ZstdBatch, error) {
	if n <= 0 || n > (1<<40)/zstdScratchSize {
		return nil, invalidArg("zstd", "a batch of %d frames", n)
	}
	mem, err := cuda.MemAlloc(n * (zstdJobSize + 8 + zstdScratchSize))
	if err != nil {
		return nil, fmt.Errorf("kernels: memory for a zstd batch of %d frames: %w", n, err)
	}
	return &ZstdBatch{z: z, n: n, mem: mem, jobs: make([]byte, n*zstdJobSize), sizes: make([]byte, n*8)}, nil
}

// Close frees the batch's device memory.
func (b *ZstdBatch) Close() error { return b.mem.Close() }

// Len returns how many frames the batch takes at once.
func (b *ZstdBatch) Len() int { return b.n }

// Decode decodes frames (at most Len) on stream s and waits for them: it
// returns each frame's decoded size, or -1 for a frame the GPU left (its
// destination then holds any bytes: decode it on the CPU). A frame that
// decodes to more than DstCap bytes is -1 as well, never written past
// it.
func (b *ZstdBatch) Decode(s cuda.Stream, frames []ZstdFrame) ([]int, error) {
	n := len(frames)
	if n == 0 {
		return nil, nil
	}
	if n > b.n {
		return nil, invalidArg("zstd", "%d frames in a batch of %d", n, b.n)
	}
	for i, f := range frames {
		if f.SrcLen < 0 || f.DstCap < 0 || (f.SrcLen > 0 && f.Src == 0) || (f.DstCap > 0 && f.Dst == 0) {
			return nil, invalidArg("zstd", "frame %d: %d bytes at %#x into %d at %#x", i, f.SrcLen, uint64(f.Src), f.DstCap, uint64(f.Dst))
		}
		j := b.jobs[i*zstdJobSize:]
		binary.LittleEndian.PutUint64(j, uint64(f.Src))
		binary.LittleEndian.PutUint64(j[8:], uint64(f.Dst))
		binary.LittleEndian.PutUint64(j[16:], uint64(f.SrcLen))
		binary.LittleEndian.PutUint64(j[24:], uint64(f.DstCap))
	}
	jobs := b.mem.Ptr()
	out := jobs + cuda.DevicePtr(b.n*zstdJobSize)
	scratch := out + cuda.DevicePtr(b.n*8)
	if err := cuda.MemcpyHtoDAsync(jobs, b.jobs[:n*zstdJobSize], s); err != nil {
		return nil, err
	}
	p := &struct {
		jobs    cuda.DevicePtr
		n       uint32
		scratch cuda.DevicePtr
		out     cuda.DevicePtr
	}{jobs, uint32(n), scratch, out}
	params := []unsafe.Pointer{unsafe.Pointer(&p.jobs), unsafe.Pointer(&p.n), unsafe.Pointer(&p.scratch), unsafe.Pointer(&p.out)}
	if err := cuda.LaunchKernel(b.z.f, cuda.Dim3{X: uint32(n)}, cuda.Dim3{X: 32}, 0, s, params); err != nil {
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
