package libdeflate

import (
	"bytes"
	"errors"
	"io"
	"math/rand/v2"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"testing"

	"github.com/klauspost/compress/flate"
	"github.com/klauspost/compress/gzip"
	"github.com/klauspost/compress/zlib"

	"github.com/kvikgo/kvik/internal/testkit/childtest"
	"github.com/kvikgo/kvik/internal/testkit/fielddata"
	"github.com/kvikgo/kvik/internal/testkit/libtest"
)

// need skips the test, saying why, where the library cannot be used;
// with KVIK_TEST_LIBDEFLATE=require (.ci/run, which installs it) it
// fails instead.
func need(t testing.TB) { libtest.Need(t, "libdeflate", Load, "KVIK_TEST_LIBDEFLATE") }

// compressed returns src as a gzip member, a zlib stream or raw DEFLATE
// data written by klauspost/compress at level.
func compressed(t testing.TB, format string, src []byte, level int) []byte {
	var b bytes.Buffer
	var w interface {
		Write([]byte) (int, error)
		Close() error
	}
	var err error
	switch format {
	case "gzip":
		w, err = gzip.NewWriterLevel(&b, level)
	case "deflate":
		w, err = flate.NewWriter(&b, level)
	default:
		w, err = zlib.NewWriterLevel(&b, level)
	}
	if err != nil {
		t.Fatal(err)
	}
	w.Write(src)
	if err := w.Close(); err != nil {
		t.Fatal(err)
	}
	return b.Bytes()
}

// TestRoundTrip decodes gzip members, zlib streams and raw DEFLATE data of random sizes
// (field data from an unaligned offset, with random bytes in some) at
// levels 0 to 9, with trailing bytes after them, into buffers of exactly
// their size: the bytes match, the input taken is the member's or
// stream's length.
func TestRoundTrip(t *testing.T) {
	need(t)
	t.Logf("libdeflate at %s", LibraryPath())
	rng := rand.New(rand.NewPCG(rand.Uint64(), 1))
	field := fielddata.Float32(512, 512, rng.Uint64())
	for i := range 40 {
		n := rng.IntN(1 << 20)
		if i < 3 {
			n = []int{0, 1, 65536}[i]
		}
		off := rng.IntN(len(field) - n + 1)
		src := bytes.Clone(field[off : off+n])
		if i%4 == 1 && n > 0 {
			for j := rng.IntN(n); j < n && j < rng.IntN(n)+5000; j++ {
				src[j] = byte(rng.Uint32())
			}
		}
		for _, format := range []string{"gzip", "zlib", "deflate"} {
			c := compressed(t, format, src, i%10)
			in := append(bytes.Clone(c), "trailing"...)
			dst := make([]byte, n)
			f := map[string]func(dst, src []byte) (int, int, error){"gzip": GzipDecompress, "zlib": ZlibDecompress, "deflate": DeflateDecompress}[format]
			took, got, err := f(dst, in)
			if err != nil || took != len(c) || got != n || !bytes.Equal(dst, src) {
				t.Fatalf("%s, %d bytes, level %d: took %d of %d, gave %d, %v", format, n, i%10, took, len(c), got, err)
			}
		}
	}
}

// TestBounds decodes a member into buffers one byte short and smaller,
// their backing arrays longer: InsufficientSpace, nothing written past
// the buffer; truncated members and random bytes fail with BadData (or
// InsufficientSpace), bit-flipped ones too or decode to the original
// (a flip in a bit decoders ignore), never a panic.
func TestBounds(t *testing.T) {
	need(t)
	rng := rand.New(rand.NewPCG(rand.Uint64(), 2))
	src := fielddata.Float32(64, 512, rng.Uint64())
	c := compressed(t, "gzip", src, 6)
	for _, room := range []int{0, 1, 4096, len(src) - 1} {
		backing := bytes.Repeat([]byte{0xA5}, room+256)
		_, _, err := GzipDecompress(backing[:room], c)
		if !errors.Is(err, InsufficientSpace) {
			t.Errorf("room %d: %v, want InsufficientSpace", room, err)
		}
		for i, b := range backing[room:] {
			if b != 0xA5 {
				t.Fatalf("room %d: byte %d past it written", room, i)
			}
		}
	}
	dst := make([]byte, len(src))
	for n := 0; n < len(c); n += 1 + len(c)/50 {
		if _, _, err := GzipDecompress(dst, c[:n]); !errors.Is(err, BadData) {
			t.Errorf("truncated to %d of %d bytes: %v", n, len(c), err)
		}
	}
	for range 300 {
		// Some bits mean nothing to a decoder (the header's MTIME, XFL,
		// OS and FTEXT, the last block's padding): flipped, the member
		// decodes, and must decode to src. Any other flip fails.
		bad := bytes.Clone(c)
		at := rng.IntN(len(bad))
		bad[at] ^= 1 << rng.IntN(8)
		clear(dst)
		_, got, err := GzipDecompress(dst, bad)
		var r Result
		if err == nil && (got != len(src) || !bytes.Equal(dst, src)) || err != nil && !errors.As(err, &r) {
			t.Errorf("a bit flipped at byte %d of %d: %d bytes, %v", at, len(bad), got, err)
		}
	}
	junk := make([]byte, 1000)
	for i := range junk {
		junk[i] = byte(rng.Uint32())
	}
	for _, f := range []func([]byte, []byte) (int, int, error){GzipDecompress, ZlibDecompress} {
		if _, _, err := f(dst, junk); err == nil {
			t.Error("random bytes decode")
		}
	}
}

// TestDecompressorsBounded runs many more calls at once than the free
// list keeps: afterwards no more decompressors live than it holds, and
// Trim frees them all.
func TestDecompressorsBounded(t *testing.T) {
	need(t)
	src := fielddata.Float32(32, 256, 3)
	c := compressed(t, "zlib", src, 5)
	Trim()
	var wg sync.WaitGroup
	for range 8 * decompressors.MaxIdle() {
		wg.Go(func() {
			for range 10 {
				dst := make([]byte, len(src))
				if _, n, err := ZlibDecompress(dst, c); err != nil || n != len(src) || !bytes.Equal(dst, src) {
					t.Errorf("ZlibDecompress: %d, %v", n, err)
					return
				}
			}
		})
	}
	wg.Wait()
	if n := decompressors.Live(); n == 0 || n > int64(decompressors.MaxIdle()) || n != int64(decompressors.Idle()) {
		t.Errorf("%d decompressors live, %d idle, at most %d kept", n, decompressors.Idle(), decompressors.MaxIdle())
	}
	Trim()
	if n := decompressors.Live(); n != 0 {
		t.Errorf("after Trim: %d live", n)
	}
}

// TestMissingLibrary points LibraryEnv at a file that does not exist and
// at a library without libdeflate's functions (libc) and checks, in a
// fresh process each, that every function reports ErrNotFound.
func TestMissingLibrary(t *testing.T) {
	if childtest.Mode() != "" {
		if err := Load(); !errors.Is(err, ErrNotFound) || !strings.Contains(err.Error(), os.Getenv(LibraryEnv)) {
			t.Fatalf("Load() = %v", err)
		}
		if LibraryPath() != "" {
			t.Errorf("LibraryPath %q", LibraryPath())
		}
		for _, f := range []func([]byte, []byte) (int, int, error){GzipDecompress, ZlibDecompress} {
			if _, _, err := f(make([]byte, 8), []byte{0x1f, 0x8b}); !errors.Is(err, ErrNotFound) {
				t.Errorf("decompress: %v", err)
			}
		}
		return
	}
	missing := filepath.Join(t.TempDir(), "no-libdeflate.so.0")
	childtest.Run(t, "TestMissingLibrary", []string{missing, "libc.so.6"}, func(path string) []string {
		return []string{LibraryEnv + "=" + path}
	})
}

// BenchmarkGzip decodes a 1 MiB chunk of a smooth float32 field plus
// noise, gzip level 5, with libdeflate and with klauspost/compress.
func BenchmarkGzip(b *testing.B) {
	need(b)
	src := fielddata.Float32(512, 512, 3)
	c := compressed(b, "gzip", src, 5)
	dst := make([]byte, len(src))
	b.Run("libdeflate", func(b *testing.B) {
		b.SetBytes(int64(len(src)))
		for b.Loop() {
			if _, _, err := GzipDecompress(dst, c); err != nil {
				b.Fatal(err)
			}
		}
	})
	b.Run("klauspost", func(b *testing.B) {
		b.SetBytes(int64(len(src)))
		r, err := gzip.NewReader(bytes.NewReader(c))
		if err != nil {
			b.Fatal(err)
		}
		for b.Loop() {
			r.Reset(bytes.NewReader(c))
			if n, err := io.ReadFull(r, dst); n != len(dst) {
				b.Fatal(n, err)
			}
		}
	})
}
