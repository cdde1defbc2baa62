package zarr

import (
	"bytes"
	"compress/bzip2"
	"fmt"
	"io"
	"runtime"
	"sync"

	"github.com/klauspost/compress/gzip"
	"github.com/klauspost/compress/zlib"
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
	// Read, not io.ReadFull, which would make a stream cut short (the
	// reader's io.ErrUnexpectedEOF) look like one that ended early.
	n := 0
	var err error
	for n < limit && err == nil {
		var m int
		m, err = r.Read(dst[n:limit])
		n += m
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
	if err == io.EOF {
		return dst[:n], nil // shorter than the limit
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
	return deflateDecode(gzipNative, gzipGo, src, dst, limit)
}

// deflateDecode decodes src with native where KVIK_DEFLATE picks
// libdeflate, else with goDec (klauspost/compress).
func deflateDecode(native, goDec func(src, dst []byte, limit int) ([]byte, error), src, dst []byte, limit int) ([]byte, error) {
	useNative, err := deflateNow()
	switch {
	case err != nil:
		return nil, err
	case useNative:
		return native(src, dst, limit)
	}
	return goDec(src, dst, limit)
}

// gzipGo decodes src with klauspost/compress, as gzipCodec.decode.
func gzipGo(src, dst []byte, limit int) ([]byte, error) {
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
	return deflateDecode(zlibNative, zlibGo, src, dst, limit)
}

// zlibGo decodes src with klauspost/compress, as zlibDecode.
func zlibGo(src, dst []byte, limit int) ([]byte, error) {
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

// bz2Codec is numcodecs' BZ2 compressor (v2 "bz2", v3 "numcodecs.bz2"):
// one bzip2 stream. It reads only (the standard library decodes bzip2;
// an encoder would be a dependency for a rare codec): writable refuses,
// so Create and writes fail before anything is written.
type bz2Codec struct{}

func (bz2Codec) encode(src, dst []byte) ([]byte, error) { return nil, bz2Codec{}.writable() }

func (bz2Codec) writable() error {
	return fmt.Errorf("%w: writing bz2 (reading is supported)", ErrUnsupportedCodec)
}

// decode reads the stream into dst, at most limit bytes (a small
// stream that expands past the chunk fails without growing further).
func (bz2Codec) decode(src, dst []byte, limit int) ([]byte, error) {
	return readLimited(bzip2.NewReader(bytes.NewReader(src)), dst, limit, "bz2")
}
