package liblz4

import (
	"bytes"
	"errors"
	"math/rand/v2"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/pierrec/lz4/v4"

	"github.com/kvikgo/kvik/internal/testkit/childtest"
	"github.com/kvikgo/kvik/internal/testkit/fielddata"
	"github.com/kvikgo/kvik/internal/testkit/libtest"
)

// need skips the test, saying why, where the library cannot be used
// (under CI=true failing: CI runs on Debian, which always has it).
func need(t testing.TB) { libtest.Need(t, "liblz4", Load, "") }

// sample returns n bytes that compress (runs of small values and
// repeats), never all the same.
func sample(rng *rand.Rand, n int) []byte {
	b := make([]byte, n)
	for i := range b {
		if i >= 64 && rng.IntN(3) == 0 {
			b[i] = b[i-1-rng.IntN(63)]
			continue
		}
		b[i] = byte(rng.IntN(1 + i%13))
	}
	return b
}

// TestRoundTrip compresses inputs of random sizes at accelerations from
// below the least to past the most, into destinations of exactly
// CompressBound bytes at unaligned offsets, and checks that pierrec/lz4
// decodes each block to the input, and that LZ4's own rule holds: at
// acceleration 1, the Go compressor that copies LZ4_compress_fast writes
// a block of the same size.
func TestRoundTrip(t *testing.T) {
	need(t)
	t.Logf("liblz4 %s at %s", Version(), LibraryPath())
	rng := rand.New(rand.NewPCG(rand.Uint64(), 1))
	sizes := []int{0, 1, 12, 13, 64, 65536, 65537, 1 << 20}
	for range 8 {
		sizes = append(sizes, rng.IntN(400000))
	}
	for i, n := range sizes {
		src := sample(rng, n)
		acc := []int{-3, 0, 1, 2, 5, 9, 1000, 1 << 20}[i%8]
		bound, err := CompressBound(n)
		if err != nil || bound < n {
			t.Fatalf("CompressBound(%d) = %d, %v", n, bound, err)
		}
		off := rng.IntN(64)
		dst := make([]byte, off+bound)[off:]
		m, err := CompressFast(dst, src, acc)
		if err != nil || m <= 0 || m > bound {
			t.Fatalf("%d bytes, acceleration %d: %d, %v", n, acc, m, err)
		}
		back := make([]byte, n)
		if k, err := lz4.UncompressBlock(dst[:m], back); err != nil || k != n || !bytes.Equal(back, src) {
			t.Errorf("%d bytes, acceleration %d: pierrec decodes %d bytes, %v", n, acc, k, err)
		}
		if acc <= 1 && n > 0 {
			var c lz4.CompressorCCompat
			g, err := c.CompressBlock(src, make([]byte, lz4.CompressBlockBound(n)))
			if err != nil || g == 0 {
				t.Fatalf("pierrec: %d, %v", g, err)
			}
			if r := float64(m) / float64(g); r < 0.98 || r > 1.02 {
				t.Errorf("%d bytes: liblz4 wrote %d, pierrec's CCompat %d", n, m, g)
			}
		}
	}
}

// TestNoRoom compresses random bytes, which do not compress, into
// destinations shorter than their bound whose backing arrays go on:
// each fails with ErrNoRoom and leaves the bytes past len(dst) as they
// were.
func TestNoRoom(t *testing.T) {
	need(t)
	rng := rand.New(rand.NewPCG(rand.Uint64(), 2))
	src := make([]byte, 5000+rng.IntN(50000))
	for i := range src {
		src[i] = byte(rng.Uint32())
	}
	for _, n := range []int{0, 1, 100, len(src) / 2, len(src) - 1} {
		backing := bytes.Repeat([]byte{0x5A}, n+256)
		m, err := CompressFast(backing[:n], src, 1)
		if m != 0 || !errors.Is(err, ErrNoRoom) {
			t.Errorf("room %d: %d, %v; want ErrNoRoom", n, m, err)
		}
		for i, b := range backing[n:] {
			if b != 0x5A {
				t.Fatalf("room %d: byte %d past it written", n, i)
			}
		}
	}
	if b, _ := CompressBound(-1); b != 0 {
		t.Errorf("CompressBound(-1) = %d", b)
	}
	if b, _ := CompressBound(MaxInput + 1); b != 0 {
		t.Errorf("CompressBound(MaxInput+1) = %d", b)
	}
}

// TestMissingLibrary points LibraryEnv at a file that does not exist and
// at a library without the LZ4 functions (libc) and checks, in a fresh
// process each (the library loads once per process), that every function
// reports ErrNotFound naming the path.
func TestMissingLibrary(t *testing.T) {
	if childtest.Mode() != "" {
		if err := Load(); !errors.Is(err, ErrNotFound) || !strings.Contains(err.Error(), os.Getenv(LibraryEnv)) {
			t.Fatalf("Load() = %v", err)
		}
		if LibraryPath() != "" || Version() != "" {
			t.Errorf("LibraryPath %q, Version %q", LibraryPath(), Version())
		}
		if _, err := CompressFast(make([]byte, 64), []byte("abc"), 1); !errors.Is(err, ErrNotFound) {
			t.Errorf("CompressFast: %v", err)
		}
		if _, err := CompressBound(10); !errors.Is(err, ErrNotFound) {
			t.Errorf("CompressBound: %v", err)
		}
		return
	}
	missing := filepath.Join(t.TempDir(), "no-liblz4.so.1")
	childtest.Run(t, "TestMissingLibrary", []string{missing, "libc.so.6"}, func(path string) []string {
		return []string{LibraryEnv + "=" + path}
	})
}

// BenchmarkCompress compresses a 256 KiB block as Blosc-lz4 does (a
// smooth field plus noise, float32, byte-shuffled) with liblz4 and with
// pierrec/lz4's CCompat, at accelerations 1 and 5 (Blosc's levels 9 and
// 5).
func BenchmarkCompress(b *testing.B) {
	need(b)
	field := fielddata.Float32(256, 256, 7)
	src := make([]byte, len(field))
	n := len(field) / 4
	for i := range n { // Blosc's byte shuffle: byte k of each value into plane k
		for k := range 4 {
			src[k*n+i] = field[4*i+k]
		}
	}
	dst := make([]byte, lz4.CompressBlockBound(len(src)))
	for _, acc := range []int{1, 5} {
		b.Run("liblz4/"+string(rune('0'+acc)), func(b *testing.B) {
			b.SetBytes(int64(len(src)))
			for b.Loop() {
				if _, err := CompressFast(dst, src, acc); err != nil {
					b.Fatal(err)
				}
			}
		})
		b.Run("pierrec/"+string(rune('0'+acc)), func(b *testing.B) {
			b.SetBytes(int64(len(src)))
			c := lz4.CompressorCCompat{Acceleration: acc}
			for b.Loop() {
				if _, err := c.CompressBlock(src, dst); err != nil {
					b.Fatal(err)
				}
			}
		})
	}
}
