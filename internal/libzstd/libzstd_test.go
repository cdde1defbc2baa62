package libzstd

import (
	"bytes"
	"errors"
	"math/rand/v2"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"testing"

	"github.com/klauspost/compress/zstd"

	"github.com/kvikgo/kvik/internal/dl"
	"github.com/kvikgo/kvik/internal/testkit/childtest"
	"github.com/kvikgo/kvik/internal/testkit/libtest"
)

// need skips the test, saying why, where the library cannot be used
// (under CI=true failing: CI runs on Debian, which always has it).
func need(t testing.TB) { libtest.Need(t, "libzstd", Load, "") }

// sample returns n bytes that compress (runs of small values), never
// all the same.
func sample(rng *rand.Rand, n int) []byte {
	b := make([]byte, n)
	for i := range b {
		b[i] = byte(rng.IntN(1 + i%11))
	}
	return b
}

// TestRoundTrip compresses inputs of random sizes at levels across the
// range, negative, default, past the maximum, with and without a
// checksum, and checks that each frame declares its content size, that
// klauspost/compress decodes it to the input, and that Decompress does,
// into a buffer of exactly that size.
func TestRoundTrip(t *testing.T) {
	need(t)
	t.Logf("libzstd %s at %s", Version(), LibraryPath())
	rng := rand.New(rand.NewPCG(1, 2))
	dec, err := zstd.NewReader(nil)
	if err != nil {
		t.Fatal(err)
	}
	defer dec.Close()
	sizes := []int{0, 1, 255, 256, 1023, 1 << 17, 1<<20 + 3}
	for range 8 {
		sizes = append(sizes, rng.IntN(300000))
	}
	for i, n := range sizes {
		src := sample(rng, n)
		level := []int{-7, -1, 0, 1, 3, 9, 19, 99}[i%8]
		ck := i%2 == 1
		frame, err := Compress([]byte("prefix"), src, level, ck)
		if err != nil {
			t.Fatalf("%d bytes, level %d: %v", n, level, err)
		}
		if string(frame[:6]) != "prefix" {
			t.Fatalf("Compress did not append to dst: %q", frame[:6])
		}
		frame = frame[6:]
		var h zstd.Header
		if err := h.Decode(frame); err != nil || !h.HasFCS || h.FrameContentSize != uint64(n) || h.HasCheckSum != ck {
			t.Errorf("%d bytes, level %d, checksum %v: header %+v, %v", n, level, ck, h, err)
		}
		ref, err := dec.DecodeAll(frame, nil)
		if err != nil || !bytes.Equal(ref, src) {
			t.Errorf("%d bytes, level %d: klauspost decodes %d bytes, %v", n, level, len(ref), err)
		}
		got, err := Decompress(make([]byte, 0, n), frame)
		if err != nil || !bytes.Equal(got, src) {
			t.Errorf("%d bytes, level %d: Decompress gives %d bytes, %v", n, level, len(got), err)
		}
	}
}

// TestDecompressBound decodes a frame into buffers one byte short of its
// content and smaller, their backing arrays longer than their capacity:
// each fails with DstSizeTooSmall, and no byte past the capacity is
// written.
func TestDecompressBound(t *testing.T) {
	need(t)
	rng := rand.New(rand.NewPCG(3, 4))
	src := sample(rng, 70001)
	frame, err := Compress(nil, src, 3, false)
	if err != nil {
		t.Fatal(err)
	}
	for _, c := range []int{0, 1, 4096, len(src) - 1} {
		backing := bytes.Repeat([]byte{0xA5}, len(src)+64)
		out, err := Decompress(backing[:0:c], frame)
		if !errors.Is(err, DstSizeTooSmall) || out != nil {
			t.Errorf("capacity %d: %d bytes, %v; want DstSizeTooSmall", c, len(out), err)
		}
		var e *Error
		if !errors.As(err, &e) || e.Func != "ZSTD_decompressDCtx" || e.Text == "" {
			t.Errorf("capacity %d: error %#v", c, err)
		}
		for i, b := range backing[c:] {
			if b != 0xA5 {
				t.Fatalf("capacity %d: byte %d past it written", c, i)
			}
		}
	}
}

// TestDecompressCorrupt decodes a checksummed frame truncated at every
// 97th byte and with one bit flipped at random places: each fails with
// an *Error, never a panic or output past the buffer.
func TestDecompressCorrupt(t *testing.T) {
	need(t)
	rng := rand.New(rand.NewPCG(5, 6))
	src := sample(rng, 50000)
	frame, err := Compress(nil, src, 5, true)
	if err != nil {
		t.Fatal(err)
	}
	dst := make([]byte, 0, len(src))
	for n := 0; n < len(frame); n += 97 {
		if out, err := Decompress(dst, frame[:n]); err == nil && n > 0 {
			t.Errorf("truncated to %d bytes: %d bytes out, no error", n, len(out))
		}
	}
	for range 200 {
		bad := bytes.Clone(frame)
		bad[rng.IntN(len(bad))] ^= 1 << rng.IntN(8)
		out, err := Decompress(dst, bad)
		var e *Error
		if err == nil || !errors.As(err, &e) {
			t.Errorf("a flipped bit: %d bytes out, %v", len(out), err)
		}
	}
	if _, err := Decompress(dst, frame[:len(frame)-1]); err == nil {
		t.Error("a frame without its last checksum byte decodes")
	}
	flip := bytes.Clone(frame)
	flip[len(flip)-1] ^= 0x80
	if _, err := Decompress(dst, flip); !errors.Is(err, ChecksumWrong) {
		t.Errorf("a wrong checksum: %v", err)
	}
}

// TestContextsBounded runs many more calls at once than the free lists
// keep: afterwards no more contexts live than the lists hold, and Trim
// frees every one of them.
func TestContextsBounded(t *testing.T) {
	need(t)
	rng := rand.New(rand.NewPCG(7, 8))
	src := sample(rng, 100000)
	frame, err := Compress(nil, src, 1, false)
	if err != nil {
		t.Fatal(err)
	}
	Trim()
	var wg sync.WaitGroup
	var most [2]int64
	var mu sync.Mutex
	for range 8 * dctxs.MaxIdle() {
		wg.Go(func() {
			for range 20 {
				out, err := Decompress(make([]byte, 0, len(src)), frame)
				if err != nil || !bytes.Equal(out, src) {
					t.Errorf("Decompress: %v", err)
					return
				}
				if _, err := Compress(nil, src[:1000], 1, true); err != nil {
					t.Errorf("Compress: %v", err)
					return
				}
				mu.Lock()
				most[0], most[1] = max(most[0], dctxs.Live()), max(most[1], cctxs.Live())
				mu.Unlock()
			}
		})
	}
	wg.Wait()
	for i, l := range []*dl.ObjectList{dctxs, cctxs} {
		if most[i] == 0 {
			t.Fatalf("list %d: no context was ever live", i)
		}
		if n := l.Live(); n > int64(l.MaxIdle()) || n != int64(l.Idle()) {
			t.Errorf("list %d: %d contexts live, %d idle, at most %d kept (peak %d)", i, n, l.Idle(), l.MaxIdle(), most[i])
		}
	}
	Trim()
	if d, c := dctxs.Live(), cctxs.Live(); d != 0 || c != 0 {
		t.Errorf("after Trim: %d decompression and %d compression contexts live", d, c)
	}
}

func TestCheckVersion(t *testing.T) {
	if err := dl.CheckVersion(lib.What, "/x/libzstd.so.1", 10399, MinVersion); !errors.Is(err, ErrNotFound) || !strings.Contains(err.Error(), "1.3.99") || !strings.Contains(err.Error(), "1.4.0") {
		t.Errorf("1.3.99: %v", err)
	}
	if err := dl.CheckVersion(lib.What, "", MinVersion, MinVersion); err != nil {
		t.Errorf("1.4.0: %v", err)
	}
}

// TestMissingLibrary points LibraryEnv at a file that does not exist and
// at a library without the zstd functions (libc) and checks, in a fresh
// process each (the library loads once per process), that every function
// reports ErrNotFound.
func TestMissingLibrary(t *testing.T) {
	if childtest.Mode() != "" {
		missingChild(t)
		return
	}
	missing := filepath.Join(t.TempDir(), "no-libzstd.so.1")
	childtest.Run(t, "TestMissingLibrary", []string{missing, "libc.so.6"}, func(path string) []string {
		return []string{LibraryEnv + "=" + path}
	})
}

func missingChild(t *testing.T) {
	if err := Load(); !errors.Is(err, ErrNotFound) || !strings.Contains(err.Error(), os.Getenv(LibraryEnv)) {
		t.Fatalf("Load() = %v", err)
	}
	if LibraryPath() != "" || Version() != "" {
		t.Errorf("LibraryPath %q, Version %q", LibraryPath(), Version())
	}
	if _, err := Compress(nil, []byte("abc"), 3, false); !errors.Is(err, ErrNotFound) {
		t.Errorf("Compress: %v", err)
	}
	if _, err := Decompress(nil, []byte{0x28, 0xb5, 0x2f, 0xfd}); !errors.Is(err, ErrNotFound) {
		t.Errorf("Decompress: %v", err)
	}
	if _, err := CompressBound(10); !errors.Is(err, ErrNotFound) {
		t.Errorf("CompressBound: %v", err)
	}
}
