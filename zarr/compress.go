package zarr

import (
	"bytes"
	"fmt"
	"io"
	"runtime"
	"sync"

	"github.com/klauspost/compress/gzip"
	"github.com/klauspost/compress/zlib"
	"github.com/klauspost/compress/zstd"
)

// readLimited reads all of r, failing if it yields more than limit bytes.
// Into a dst that can hold limit bytes it reads in place, without growing
// a buffer (a Blosc chunk decodes each of its splits into its share of
// the output so).
func readLimited(r io.Reader, dst []byte, limit int, name string) ([]byte, error) {
	if cap(dst) < limit {
		buf := bytes.NewBuffer(dst[:0])
		n, err := buf.ReadFrom(io.LimitReader(r, int64(limit)+1))
		if err != nil {
			return nil, fmt.Errorf("%w: %s: %v", ErrCorruptChunk, name, err)
		}
		if n > int64(limit) {
			return nil, fmt.Errorf("%w: %s output exceeds %d bytes", ErrCorruptChunk, name, limit)
		}
		return buf.Bytes(), nil
	}
	n, err := io.ReadFull(r, dst[:limit])
	if err == io.EOF || err == io.ErrUnexpectedEOF {
		return dst[:n], nil // shorter than the limit
	}
	if err == nil { // the end of the stream (its checksum), and nothing after
		var one [1]byte
		switch _, err = io.ReadFull(r, one[:]); err {
		case io.EOF:
			return dst[:n], nil
		case nil:
			return nil, fmt.Errorf("%w: %s output exceeds %d bytes", ErrCorruptChunk, name, limit)
		}
	}
	return nil, fmt.Errorf("%w: %s: %v", ErrCorruptChunk, name, err)
}

// gzipCodec is v3 "gzip" and v2 "gzip" (gzip members).
type gzipCodec struct{ level int }

func (c gzipCodec) encode(src, dst []byte) ([]byte, error) {
	return deflateEncode("gzip", c.level, src, dst, func(w io.Writer) (deflateWriter, error) {
		return gzip.NewWriterLevel(w, c.level)
	})
}

// deflateWriter is a gzip or zlib writer, reset for each chunk.
type deflateWriter interface {
	io.WriteCloser
	Reset(io.Writer)
}

// freeList keeps up to GOMAXPROCS idle encoders of one kind, made on
// demand, across garbage collections (a sync.Pool drops its values at
// each one, and encoders cost megabytes to make: zstd chunks written on
// every core spent most of their time making new ones).
type freeList[T any] struct {
	idle chan T
	make func() (T, error)
}

func newFreeList[T any](newT func() (T, error)) *freeList[T] {
	return &freeList[T]{idle: make(chan T, runtime.GOMAXPROCS(0)), make: newT}
}

func (f *freeList[T]) get() (T, error) {
	select {
	case v := <-f.idle:
		return v, nil
	default:
		return f.make()
	}
}

func (f *freeList[T]) put(v T) {
	select {
	case f.idle <- v:
	default: // enough are idle
	}
}

// deflateWriters holds a freeList of writers per format and level.
var deflateWriters sync.Map // "gzip" or "zlib" and the level -> *freeList[deflateWriter]

// deflateEncode compresses src with a pooled writer of the format name
// (made by newW) into dst's memory or a new buffer.
func deflateEncode(name string, level int, src, dst []byte, newW func(io.Writer) (deflateWriter, error)) ([]byte, error) {
	key := fmt.Sprint(name, level)
	l, ok := deflateWriters.Load(key)
	if !ok {
		l, _ = deflateWriters.LoadOrStore(key, newFreeList(func() (deflateWriter, error) { return newW(nil) }))
	}
	f := l.(*freeList[deflateWriter])
	w, err := f.get()
	if err != nil {
		return nil, fmt.Errorf("%w: %s level %d", ErrInvalidMetadata, name, level)
	}
	b := bytes.NewBuffer(outBuf(dst, len(src)/2+64))
	w.Reset(b)
	w.Write(src)
	err = w.Close()
	w.Reset(nil) // drop b
	f.put(w)
	if err != nil {
		return nil, err
	}
	return b.Bytes(), nil
}

// gzipReaders and zlibReaders hold deflate readers, reset for each chunk:
// a new one costs about 37 KB and 16 µs, more than a small chunk's
// decoding (a shard of many small inner chunks makes one per chunk).
var gzipReaders, zlibReaders sync.Pool

func (c gzipCodec) decode(src, dst []byte, limit int) ([]byte, error) {
	r, _ := gzipReaders.Get().(*gzip.Reader)
	var err error
	if r == nil {
		r, err = gzip.NewReader(bytes.NewReader(src))
	} else {
		err = r.Reset(bytes.NewReader(src))
	}
	if r != nil {
		defer gzipReaders.Put(r)
	}
	if err != nil {
		return nil, fmt.Errorf("%w: gzip: %v", ErrCorruptChunk, err)
	}
	return readLimited(r, dst, limit, "gzip")
}

// zlibCodec is v2 "zlib" (RFC 1950 streams).
type zlibCodec struct{ level int }

func (c zlibCodec) encode(src, dst []byte) ([]byte, error) {
	return deflateEncode("zlib", c.level, src, dst, func(w io.Writer) (deflateWriter, error) {
		return zlib.NewWriterLevel(w, c.level)
	})
}

func (c zlibCodec) decode(src, dst []byte, limit int) ([]byte, error) {
	return zlibDecode(src, dst, limit)
}

func zlibDecode(src, dst []byte, limit int) ([]byte, error) {
	r, _ := zlibReaders.Get().(io.ReadCloser)
	r, err := zlibOn(r, src)
	if r != nil {
		defer zlibReaders.Put(r)
	}
	if err != nil {
		return nil, fmt.Errorf("%w: zlib: %v", ErrCorruptChunk, err)
	}
	return readLimited(r, dst, limit, "zlib")
}

// zlibOn returns r, a zlib reader, reset to read src, or a new one when
// r is nil (nil again when src's header is bad).
func zlibOn(r io.ReadCloser, src []byte) (io.ReadCloser, error) {
	if r == nil {
		return zlib.NewReader(bytes.NewReader(src))
	}
	return r, r.(zlib.Resetter).Reset(bytes.NewReader(src), nil)
}

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
func (c zstdCodec) encode(src, dst []byte) ([]byte, error) {
	l := c.encoders(len(src) <= zstdSmall)
	e, err := l.get()
	if err != nil {
		return nil, err
	}
	defer l.put(e)
	return e.EncodeAll(src, outBuf(dst, len(src)/2+64)), nil
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
