package kernels

import (
	"fmt"
	"unsafe"

	"github.com/kvikgo/kvik/cuda"
)

// Format is the wrapper of the deflate streams a batch decodes.
type Format uint32

const (
	Raw  Format = iota // RFC 1951, no wrapper
	Gzip               // RFC 1952: one member, its CRC-32 and size checked
	Zlib               // RFC 1950: no preset dictionary, its Adler-32 checked
)

func (f Format) String() string {
	switch f {
	case Raw:
		return "deflate"
	case Gzip:
		return "gzip"
	case Zlib:
		return "zlib"
	}
	return fmt.Sprintf("format %d", uint32(f))
}

// Inflate decodes deflate streams of one format on the GPU (inflate.cu):
// each stream by one warp, its lanes decoding the Huffman codes in step,
// lane 0 writing the literals, the matches copied 32 at a time (a lane
// each), then the stream's checksum verified with a slice a lane. A
// stream takes a warp about 115 ms a megabyte however many run at once
// (H200: 64 streams in 114 ms, 1,024 in 124 ms, where 16 cores decode
// 1,024 in 175-200 ms), so a launch wants hundreds of streams. A gzip stream of
// more than one member or with a header CRC, a zlib stream with a preset
// dictionary, a stream followed by more bytes, one whose Huffman codes
// the decoders on the CPU judge differently, or one that does not decode
// (its checksum included) is left to the caller, who decodes it on the
// CPU (and so reports its error as the CPU's decoder words it):
// Batch.Decode says which.
type Inflate struct {
	f      cuda.Function
	format Format
}

// LoadInflate returns ctx's decoder of deflate streams in format,
// loading its module the first time; ctx must be current. A driver that
// cannot run it gives an error, each time: the caller decodes on the
// CPU.
func LoadInflate(ctx cuda.Context, format Format) (*Inflate, error) {
	if format > Zlib {
		return nil, invalidArg("inflate", "%v", format)
	}
	f, err := load(ctx, inflatePTX, "inflate")
	if err != nil {
		return nil, err
	}
	return &Inflate{f: f, format: format}, nil
}

// NewBatch allocates a batch of up to n streams (their tables are in
// shared memory: no scratch); close it once its decodes are done.
func (z *Inflate) NewBatch(n int) (*Batch, error) {
	return newBatch("inflate", n, 0, func(s cuda.Stream, jobs cuda.DevicePtr, n uint32, _, out cuda.DevicePtr) error {
		p := &struct {
			jobs   cuda.DevicePtr
			n      uint32
			format uint32
			out    cuda.DevicePtr
		}{jobs, n, uint32(z.format), out}
		params := []unsafe.Pointer{unsafe.Pointer(&p.jobs), unsafe.Pointer(&p.n), unsafe.Pointer(&p.format), unsafe.Pointer(&p.out)}
		return cuda.LaunchKernel(z.f, cuda.Dim3{X: n}, cuda.Dim3{X: 32}, 0, s, params)
	})
}
