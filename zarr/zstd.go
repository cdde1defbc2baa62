package zarr

import (
	"bytes"
	"errors"
	"fmt"
	"os"
	"sync"

	"github.com/klauspost/compress/zstd"
	"github.com/kvikgo/kvik/internal/formatkit/codecpick"
	"github.com/kvikgo/kvik/internal/libzstd"
)

// ZstdEnv names the environment variable that picks the implementation
// of zstd chunks and of Blosc's zstd blocks: "auto" (the default) is the
// system's libzstd.so.1 where it loads and is 1.4.0 or newer, else
// klauspost/compress; "native" is libzstd, an error where it cannot be
// used; "go" is klauspost/compress. It is read once, at the first use.
const ZstdEnv = "KVIK_ZSTD"

// zstdImpl codes zstd frames: goZstd (klauspost/compress) or nativeZstd
// (libzstd). zstdDecode checks the first frame's header before either
// decodes, so that both accept the same chunks.
type zstdImpl interface {
	// decodeAll decodes every frame of src into dst[:0:cap(dst)]; output
	// that would pass cap(dst) is an error.
	decodeAll(src, dst []byte) ([]byte, error)
	// decodeUnsized decodes src, whose first frame does not declare its
	// content size, producing at most limit bytes.
	decodeUnsized(src, dst []byte, limit int) ([]byte, error)
	// encode writes src as one frame that declares its content size.
	encode(src, dst []byte, level int, checksum bool) ([]byte, error)
}

// zstdNow returns the implementation ZstdEnv picks.
var zstdNow = sync.OnceValues(func() (zstdImpl, error) {
	v, set := os.LookupEnv(ZstdEnv)
	return pickZstd(v, set, libzstd.Load)
})

// pickZstd returns the implementation the value v of ZstdEnv (set or
// not) picks; load opens libzstd.
func pickZstd(v string, set bool, load func() error) (zstdImpl, error) {
	native, err := codecpick.Native(ZstdEnv, v, set, load)
	switch {
	case err != nil:
		return nil, err
	case native:
		return nativeZstd{}, nil
	}
	return goZstd{}, nil
}

// ZstdImplementation says which implementation codes zstd chunks and
// Blosc's zstd blocks, as ZstdEnv picks it: "native (libzstd 1.5.4,
// PATH)", or "go (klauspost/compress)" followed by why libzstd is not
// used. The error is ZstdEnv's when its value is bad or asks for a
// library that cannot be used; every zstd chunk fails with it then.
func ZstdImplementation() (string, error) {
	z, err := zstdNow()
	if err != nil {
		return "", err
	}
	if _, ok := z.(nativeZstd); ok {
		return fmt.Sprintf("native (libzstd %s, %s)", libzstd.Version(), libzstd.LibraryPath()), nil
	}
	return "go (klauspost/compress; " + codecpick.GoReason(ZstdEnv, libzstd.Load) + ")", nil
}

// zstdCodec is v3 "zstd" and v2 "zstd".
type zstdCodec struct {
	level    int
	checksum bool
	impl     zstdImpl // nil: the one ZstdEnv picks
}

// zstdOr returns z, or where it is nil the implementation ZstdEnv picks.
func zstdOr(z zstdImpl) (zstdImpl, error) {
	if z != nil {
		return z, nil
	}
	return zstdNow()
}

// goZstd is klauspost/compress's zstd.
type goZstd struct{}

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

func (goZstd) decodeAll(src, dst []byte) ([]byte, error) {
	return zstdDec().DecodeAll(src, dst[:0])
}

// decodeUnsized streams the frame with a window of at most max(limit,
// zstdStreamWindow): a frame declaring more fails (a 13-byte frame
// declaring 512 MiB made the decoder allocate them).
func (goZstd) decodeUnsized(src, dst []byte, limit int) ([]byte, error) {
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

// goEnc holds a freeList of encoders per configuration: an encoder
// runs one EncodeAll at a time, so that chunks encoded on every core need
// an encoder each (one shared encoder made the writes of zstd chunks run
// on one core).
var goEnc sync.Map // key -> *freeList[*zstd.Encoder]

// zstdSmall is the largest input encoded as a single segment: klauspost's
// encoder leaves the frame content size out of frames under 256 bytes
// unless they are single segments, and numcodecs before 0.16.2 cannot
// decode a frame without it. Larger inputs keep their window (a single
// segment's window is the whole content, which streaming decoders limit).
const zstdSmall = 1 << 10

// encoders returns the encoders for a zstd level (mapped to the nearest
// of klauspost's four) with or without a checksum, for inputs of at most
// zstdSmall bytes when small is set.
func (goZstd) encoders(level int, checksum, small bool) *freeList[*zstd.Encoder] {
	lvl := zstd.EncoderLevelFromZstd(level)
	key := int(lvl) << 2
	if small {
		key |= 2
	}
	if checksum {
		key |= 1
	}
	if l, ok := goEnc.Load(key); ok {
		return l.(*freeList[*zstd.Encoder])
	}
	opts := []zstd.EOption{zstd.WithEncoderLevel(lvl), zstd.WithEncoderCRC(checksum), zstd.WithEncoderConcurrency(1)}
	if small {
		opts = append(opts, zstd.WithSingleSegment(true), zstd.WithZeroFrames(true))
	}
	l, _ := goEnc.LoadOrStore(key, newFreeList(func() (*zstd.Encoder, error) { return zstd.NewWriter(nil, opts...) }))
	return l.(*freeList[*zstd.Encoder])
}

func (g goZstd) encode(src, dst []byte, level int, checksum bool) ([]byte, error) {
	l := g.encoders(level, checksum, len(src) <= zstdSmall)
	e, err := l.get()
	if err != nil {
		return nil, err
	}
	defer l.put(e)
	return e.EncodeAll(src, outBuf(dst, len(src)/2+64)), nil
}

// nativeZstd is the system's libzstd. Its one-shot decoder keeps no
// window of its own (it refers back into dst), so it allocates nothing
// that a frame's header could make large; its levels are zstd's own, so
// numcodecs' levels (negative ones too) mean what they mean there.
type nativeZstd struct{}

func (nativeZstd) decodeAll(src, dst []byte) ([]byte, error) {
	return libzstd.Decompress(dst[:0], src)
}

// decodeUnsized decodes into a buffer of limit bytes: the one-shot
// decoder needs the room up front, as the output it may fill.
func (n nativeZstd) decodeUnsized(src, dst []byte, limit int) ([]byte, error) {
	if cap(dst) < limit {
		dst = make([]byte, 0, limit)
	}
	return n.decodeAll(src, dst[:0:limit])
}

// zstdScratch holds buffers of a frame's bound that nativeZstd encodes
// into: the frame is then copied out at its size, so that the encoded
// chunks a shard holds until it is written take their size, not the
// bound (2.6 times the size of field data).
var zstdScratch sync.Pool

func (nativeZstd) encode(src, dst []byte, level int, checksum bool) ([]byte, error) {
	p, _ := zstdScratch.Get().(*[]byte)
	if p == nil {
		p = new([]byte)
	}
	defer zstdScratch.Put(p)
	out, err := libzstd.Compress((*p)[:0], src, level, checksum)
	if err != nil {
		return nil, err
	}
	*p = out
	return append(outBuf(dst, len(out)), out...), nil
}

// encode writes one frame that declares its content size.
func (c zstdCodec) encode(src, dst []byte) ([]byte, error) {
	z, err := zstdOr(c.impl)
	if err != nil {
		return nil, err
	}
	return z.encode(src, dst, c.level, c.checksum)
}

func (c zstdCodec) decode(src, dst []byte, limit int) ([]byte, error) {
	z, err := zstdOr(c.impl)
	if err != nil {
		return nil, err
	}
	return zstdDecode(z, src, dst, limit)
}

// zstdDecode decodes the zstd chunk src with z, producing at most limit
// bytes, into dst when it has the room. The first frame's header decides
// the output's bound: its content size where it declares one (more than
// limit fails at once), else limit, with a window of at most
// max(limit, zstdStreamWindow). Frames after the first share the bound.
func zstdDecode(z zstdImpl, src, dst []byte, limit int) ([]byte, error) {
	var h zstd.Header
	if err := h.Decode(src); err != nil {
		return nil, fmt.Errorf("%w: zstd: %v", ErrCorruptChunk, err)
	}
	var out []byte
	var err error
	bound := limit
	switch {
	case h.HasFCS && h.FrameContentSize > uint64(limit):
		return nil, fmt.Errorf("%w: zstd frame of %d bytes exceeds %d", ErrCorruptChunk, h.FrameContentSize, limit)
	case h.HasFCS:
		bound = int(h.FrameContentSize)
		if cap(dst) < bound {
			dst = make([]byte, 0, bound)
		}
		out, err = z.decodeAll(src, dst[:0:bound])
	case h.WindowSize > uint64(max(limit, zstdStreamWindow)):
		return nil, fmt.Errorf("%w: zstd frame's window of %d bytes exceeds %d", ErrCorruptChunk, h.WindowSize, max(limit, zstdStreamWindow))
	default:
		out, err = z.decodeUnsized(src, dst, limit)
	}
	switch {
	case errors.Is(err, zstd.ErrDecoderSizeExceeded) || errors.Is(err, libzstd.DstSizeTooSmall):
		return nil, fmt.Errorf("%w: zstd output exceeds %d bytes", ErrCorruptChunk, bound)
	case errors.Is(err, ErrCorruptChunk):
		return nil, err
	case err != nil:
		return nil, fmt.Errorf("%w: zstd: %v", ErrCorruptChunk, err)
	case len(out) > bound:
		return nil, fmt.Errorf("%w: zstd output exceeds %d bytes", ErrCorruptChunk, bound)
	}
	return out, nil
}
