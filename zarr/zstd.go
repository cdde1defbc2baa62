package zarr

import (
	"bytes"
	"fmt"
	"sync"

	"github.com/klauspost/compress/zstd"
)

// zstdCodec is v3 "zstd" and v2 "zstd".
type zstdCodec struct {
	level    int
	checksum bool
}

// zstdDec decodes frames that declare their size. DecodeAll decodes every
// frame of its input: with the cap limit it stops at cap(dst), so that
// frames after the first cannot grow the output past the size the first
// declared (a 28 KB chunk of two frames made it allocate 256 MB before the
// limit check).
var zstdDec = sync.OnceValue(func() *zstd.Decoder {
	d, _ := zstd.NewReader(nil, zstd.WithDecoderConcurrency(0), zstd.WithDecoderMaxMemory(1<<32), zstd.WithDecodeAllCapLimit(true))
	return d
})

// zstdStreamWindow is the window a frame without a content size may
// declare when its chunk is smaller: 8 MiB, the least the format asks
// decoders to support (encoders that stream declare their level's
// window, whatever the content).
const zstdStreamWindow = 8 << 20

// zstdStreams holds streaming decoders for zstdStreamWindow, reset for
// each frame, so that they keep their buffers: a decoder allocates the
// window a frame declares, and a shard whose inner chunks all point at
// one 25-byte frame made a new decoder, and 8 MiB, per inner chunk (4096
// of them: 34 GB and 3 s).
var zstdStreams = sync.Pool{New: func() any {
	d, err := zstd.NewReader(nil, zstd.WithDecoderConcurrency(1), zstd.WithDecoderMaxWindow(zstdStreamWindow))
	if err != nil {
		panic(err) // the options are constant
	}
	return d
}}

// zstdStream decodes a frame without a content size, at most limit
// bytes of it, with a window of at most max(limit, zstdStreamWindow): a
// frame declaring more fails (a 13-byte frame declaring 512 MiB made the
// decoder allocate them).
func zstdStream(src, dst []byte, limit int) ([]byte, error) {
	if limit > zstdStreamWindow {
		d, err := zstd.NewReader(bytes.NewReader(src), zstd.WithDecoderConcurrency(1), zstd.WithDecoderMaxWindow(uint64(limit)))
		if err != nil {
			return nil, fmt.Errorf("%w: zstd: %v", ErrCorruptChunk, err)
		}
		defer d.Close()
		return readLimited(d, dst, limit, "zstd")
	}
	d := zstdStreams.Get().(*zstd.Decoder)
	defer func() {
		d.Reset(nil) // drop src
		zstdStreams.Put(d)
	}()
	if err := d.Reset(bytes.NewReader(src)); err != nil {
		return nil, fmt.Errorf("%w: zstd: %v", ErrCorruptChunk, err)
	}
	return readLimited(d, dst, limit, "zstd")
}

// zstdEnc holds a freeList of encoders per configuration: an encoder
// runs one EncodeAll at a time, so that chunks encoded on every core need
// an encoder each (one shared encoder made the writes of zstd chunks run
// on one core).
var zstdEnc sync.Map // key -> *freeList[*zstd.Encoder]

// zstdSmall is the largest input encoded as a single segment: klauspost's
// encoder leaves the frame content size out of frames under 256 bytes
// unless they are single segments, and numcodecs before 0.16.2 cannot
// decode a frame without it. Larger inputs keep their window (a single
// segment's window is the whole content, which streaming decoders limit).
const zstdSmall = 1 << 10

// encoders returns the encoders for c, for inputs of at most zstdSmall
// bytes when small is set.
func (c zstdCodec) encoders(small bool) *freeList[*zstd.Encoder] {
	lvl := zstd.EncoderLevelFromZstd(c.level)
	key := int(lvl) << 2
	if small {
		key |= 2
	}
	if c.checksum {
		key |= 1
	}
	if l, ok := zstdEnc.Load(key); ok {
		return l.(*freeList[*zstd.Encoder])
	}
	opts := []zstd.EOption{zstd.WithEncoderLevel(lvl), zstd.WithEncoderCRC(c.checksum), zstd.WithEncoderConcurrency(1)}
	if small {
		opts = append(opts, zstd.WithSingleSegment(true), zstd.WithZeroFrames(true))
	}
	l, _ := zstdEnc.LoadOrStore(key, newFreeList(func() (*zstd.Encoder, error) { return zstd.NewWriter(nil, opts...) }))
	return l.(*freeList[*zstd.Encoder])
}

// encode writes one frame that declares its content size.
func (c zstdCodec) encode(src []byte) ([]byte, error) {
	l := c.encoders(len(src) <= zstdSmall)
	e, err := l.get()
	if err != nil {
		return nil, err
	}
	defer l.put(e)
	return e.EncodeAll(src, make([]byte, 0, len(src)/2+64)), nil
}

func (c zstdCodec) decode(src, dst []byte, limit int) ([]byte, error) {
	var h zstd.Header
	if err := h.Decode(src); err != nil {
		return nil, fmt.Errorf("%w: zstd: %v", ErrCorruptChunk, err)
	}
	if !h.HasFCS || h.FrameContentSize > uint64(limit) {
		if h.HasFCS {
			return nil, fmt.Errorf("%w: zstd frame of %d bytes exceeds %d", ErrCorruptChunk, h.FrameContentSize, limit)
		}
		return zstdStream(src, dst, limit)
	}
	want := int(h.FrameContentSize)
	if cap(dst) < want {
		dst = make([]byte, 0, want)
	}
	out, err := zstdDec().DecodeAll(src, dst[:0:want])
	if err != nil {
		return nil, fmt.Errorf("%w: zstd: %v", ErrCorruptChunk, err)
	}
	if len(out) > limit {
		return nil, fmt.Errorf("%w: zstd output exceeds %d bytes", ErrCorruptChunk, limit)
	}
	return out, nil
}
