package kernels

import (
	"encoding/binary"
	"fmt"
	"math"
	"unsafe"

	"github.com/kvikgo/kvik/cuda"
)

// bloscChunkSize is the size of a chunk's descriptor in device memory
// (lz4.cu's struct bchunk); TestBloscLZ4Model checks it against the C
// compiler's.
const bloscChunkSize = 80

// The Blosc flags the encoder sets (Blosc 1's header, byte 2): byte
// shuffle, blocks not split, the LZ4 compressor.
const (
	bloscShuffle   = 0x1
	bloscDontSplit = 0x10
	bloscLZ4       = 1 << 5
)

// BloscLZ4 encodes chunks that lie in device memory as Blosc 1 chunks of
// LZ4 blocks on the GPU (lz4.cu), the form zarr's CPU encoder writes
// (blocks not split, byte shuffle or none): the chunks' elements are
// gathered into their blocks and shuffled, each block compressed by one
// warp, its lanes looking for matches at 32 positions at once, then each
// chunk laid out, or stored as a plain copy where compression does not
// make it smaller. The blocks are valid LZ4, though not byte for byte
// what LZ4's own compressor makes of them.
type BloscLZ4 struct{ shuffle, compress, pack cuda.Function }

// LoadBloscLZ4 returns ctx's Blosc LZ4 encoder, loading its module the
// first time; ctx must be current. A driver that cannot run it gives an
// error, each time: the caller encodes on the CPU.
func LoadBloscLZ4(ctx cuda.Context) (*BloscLZ4, error) {
	fs, err := loadAll(ctx, lz4PTX, "bshuffle", "bcompress", "bpack")
	if err != nil {
		return nil, err
	}
	return &BloscLZ4{shuffle: fs[0], compress: fs[1], pack: fs[2]}, nil
}

// BloscChunk is a chunk to encode: Rows rows of Width bytes, Pitch bytes
// apart, from Src (device memory of the encoder's context), in blocks of
// the batch's block size of TypeSize-byte elements (1 to 8), byte-
// shuffled where Shuffle. Fill is the fill value's bytes, little-endian:
// Encode reports whether any element is not it.
type BloscChunk struct {
	Src         cuda.DevicePtr
	Rows, Width int
	Pitch       int
	TypeSize    int
	Shuffle     bool
	Fill        uint64
}

// BloscResult is what Encode made of a chunk: Size bytes of a Blosc
// chunk at Out (device memory, the batch's until its next Encode), and
// whether any of its elements is not the fill value.
type BloscResult struct {
	Out     cuda.DevicePtr
	Size    int
	Differs bool
}

// BloscBatch is the device memory that encoding up to n chunks of up to
// chunk bytes at once takes: their descriptors and blocks, the shuffled
// blocks, the compressed ones and the chunks.
type BloscBatch struct {
	k            *BloscLZ4
	n, chunk, bs int
	mem          *cuda.DeviceBuffer
	desc, blocks []byte
	queued       int // the chunks of the last Launch
}

// bloscLayout returns the bytes a batch of n chunks of size bytes in
// blocks of bs takes, per chunk: its blocks' slots (4 bytes and a
// block each) and the chunk's bound (16 bytes more than its size).
func bloscLayout(size, bs int) (slots, out int) {
	bs = min(bs, size) // a chunk's blocks are no larger than the chunk
	nb := (size + bs - 1) / bs
	return nb * (4 + bs), size + 16
}

// NewBatch allocates a batch of up to n chunks of up to size bytes each
// in blocks of bs bytes (Blosc's block size; a multiple of the chunks'
// type size); close it once its encodes are done.
func (k *BloscLZ4) NewBatch(n, size, bs int) (*BloscBatch, error) {
	if n <= 0 || n > math.MaxUint16 || size <= 0 || size > math.MaxInt32-(1<<20) || bs <= 0 {
		return nil, invalidArg("blosc lz4", "a batch of %d chunks of %d bytes in blocks of %d", n, size, bs)
	}
	slots, out := bloscLayout(size, bs)
	per := bloscChunkSize + 8*((size+bs-1)/bs) + size + slots + out
	if n > (1<<40)/per {
		return nil, invalidArg("blosc lz4", "a batch of %d chunks of %d bytes", n, size)
	}
	mem, err := cuda.MemAlloc(n * per)
	if err != nil {
		return nil, fmt.Errorf("kernels: memory for a Blosc LZ4 batch of %d chunks: %w", n, err)
	}
	nb := n * ((size + bs - 1) / bs)
	return &BloscBatch{k: k, n: n, chunk: size, bs: bs, mem: mem, desc: make([]byte, n*bloscChunkSize), blocks: make([]byte, 8*nb)}, nil
}

// Close frees the batch's device memory.
func (b *BloscBatch) Close() error { return b.mem.Close() }

// Len returns how many chunks the batch takes at once.
func (b *BloscBatch) Len() int { return b.n }

// Encode encodes chunks (at most Len, each of at most the batch's chunk
// size) on stream s and waits for them: Launch, then Results.
func (b *BloscBatch) Encode(s cuda.Stream, chunks []BloscChunk) ([]BloscResult, error) {
	if err := b.Launch(s, chunks); err != nil {
		return nil, err
	}
	return b.Results(s)
}

// Launch queues the encoding of chunks (at most Len, each of at most the
// batch's chunk size) on stream s; Results waits for it. The batch's
// memory is in use until then.
func (b *BloscBatch) Launch(s cuda.Stream, chunks []BloscChunk) error {
	n := len(chunks)
	b.queued = 0
	if n == 0 {
		return nil
	}
	if n > b.n {
		return invalidArg("blosc lz4", "%d chunks in a batch of %d", n, b.n)
	}
	slots, out := bloscLayout(b.chunk, b.bs)
	descAt, blocksAt, shufAt, slotsAt, outAt := b.layout()
	nb, most := 0, 0
	for i, c := range chunks {
		size := c.Rows * c.Width
		switch {
		case c.TypeSize < 1 || c.TypeSize > 8 || b.bs%c.TypeSize != 0:
			return invalidArg("blosc lz4", "chunk %d: type size %d, block size %d", i, c.TypeSize, b.bs)
		case c.Rows < 1 || c.Width < 1 || c.Width%c.TypeSize != 0 || size > b.chunk || (c.Rows > 1 && c.Pitch < c.Width) || c.Src == 0:
			return invalidArg("blosc lz4", "chunk %d: %d rows of %d bytes %d apart at %#x", i, c.Rows, c.Width, c.Pitch, uint64(c.Src))
		}
		flags := byte(bloscDontSplit | bloscLZ4)
		if c.Shuffle && c.TypeSize > 1 {
			flags |= bloscShuffle
		}
		bs := min(b.bs, size)
		bs -= bs % c.TypeSize
		d := b.desc[i*bloscChunkSize:]
		for k, v := range []uint64{uint64(c.Src), uint64(shufAt) + uint64(i*b.chunk), uint64(slotsAt) + uint64(i*slots), uint64(outAt) + uint64(i*out), uint64(c.Pitch), c.Fill} {
			binary.LittleEndian.PutUint64(d[8*k:], v)
		}
		for k, v := range []uint32{uint32(c.Rows), uint32(c.Width), uint32(bs), uint32(c.TypeSize), uint32(flags), 0, 0, 0} {
			binary.LittleEndian.PutUint32(d[48+4*k:], v)
		}
		for j := range (size + bs - 1) / bs {
			binary.LittleEndian.PutUint64(b.blocks[8*nb:], uint64(i)<<32|uint64(j))
			nb++
		}
		most = max(most, size/c.TypeSize)
	}
	if err := cuda.MemcpyHtoDAsync(descAt, b.desc[:n*bloscChunkSize], s); err != nil {
		return err
	}
	if err := cuda.MemcpyHtoDAsync(blocksAt, b.blocks[:8*nb], s); err != nil {
		return err
	}
	// Sixteen elements a thread.
	x := uint32((most + 16*blockThreads - 1) / (16 * blockThreads))
	if err := b.launch(s, descAt, blocksAt, uint32(n), uint32(nb), x); err != nil {
		return err
	}
	if err := cuda.MemcpyDtoHAsync(b.desc[:n*bloscChunkSize], descAt, s); err != nil {
		return err
	}
	b.queued = n
	return nil
}

// Results waits for the chunks of the last Launch on stream s (the
// same) and returns what each was made into.
func (b *BloscBatch) Results(s cuda.Stream) ([]BloscResult, error) {
	if err := cuda.StreamSynchronize(s); err != nil {
		return nil, err
	}
	_, out := bloscLayout(b.chunk, b.bs)
	_, _, _, _, outAt := b.layout()
	res := make([]BloscResult, b.queued)
	for i := range res {
		d := b.desc[i*bloscChunkSize:]
		res[i] = BloscResult{
			Out:     outAt + cuda.DevicePtr(i*out),
			Size:    int(binary.LittleEndian.Uint32(d[72:])),
			Differs: binary.LittleEndian.Uint32(d[68:]) != 0,
		}
		if res[i].Size < 16 || res[i].Size > out {
			return nil, fmt.Errorf("kernels: blosc lz4: chunk %d of %d bytes", i, res[i].Size)
		}
	}
	return res, nil
}

// layout returns where the batch's descriptors, block list, shuffled
// blocks, slots and chunks start in its memory.
func (b *BloscBatch) layout() (desc, blocks, shuf, slots, out cuda.DevicePtr) {
	s, _ := bloscLayout(b.chunk, b.bs)
	desc = b.mem.Ptr()
	blocks = desc + cuda.DevicePtr(b.n*bloscChunkSize)
	shuf = blocks + cuda.DevicePtr(len(b.blocks))
	slots = shuf + cuda.DevicePtr(b.n*b.chunk)
	out = slots + cuda.DevicePtr(b.n*s)
	return
}

// launch queues the three kernels over n chunks (descriptors at desc) of
// nb blocks (at blocks), x blocks of threads covering the largest
// chunk's elements.
func (b *BloscBatch) launch(s cuda.Stream, desc, blocks cuda.DevicePtr, n, nb, x uint32) error {
	p := &struct {
		desc, blocks cuda.DevicePtr
		n, nb        uint32
	}{desc, blocks, n, nb}
	one := []unsafe.Pointer{unsafe.Pointer(&p.desc)}
	if err := cuda.LaunchKernel(b.k.shuffle, cuda.Dim3{X: x, Y: n}, cuda.Dim3{X: blockThreads}, 0, s, one); err != nil {
		return err
	}
	params := []unsafe.Pointer{unsafe.Pointer(&p.desc), unsafe.Pointer(&p.blocks), unsafe.Pointer(&p.nb)}
	if err := cuda.LaunchKernel(b.k.compress, cuda.Dim3{X: nb}, cuda.Dim3{X: 32}, 0, s, params); err != nil {
		return err
	}
	return cuda.LaunchKernel(b.k.pack, cuda.Dim3{X: n}, cuda.Dim3{X: 32}, 0, s, []unsafe.Pointer{unsafe.Pointer(&p.desc), unsafe.Pointer(&p.n)})
}
