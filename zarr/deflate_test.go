package zarr

import (
	"bytes"
	"errors"
	"math/rand/v2"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"testing"

	"github.com/kvikgo/kvik"
	"github.com/kvikgo/kvik/internal/libdeflate"
	"github.com/kvikgo/kvik/internal/testkit/childtest"
	"github.com/kvikgo/kvik/internal/testkit/fielddata"
	"github.com/kvikgo/kvik/internal/testkit/libtest"
)

// needDeflate skips the test where libdeflate cannot be loaded (failing
// with KVIK_TEST_LIBDEFLATE=require, as .ci/run sets after installing
// it).
func needDeflate(t testing.TB) {
	libtest.Need(t, "libdeflate.so.0", libdeflate.Load, "KVIK_TEST_LIBDEFLATE")
}

// deflateCases returns gzip and zlib chunks of src, whole and spoiled:
// two gzip members back to back, trailing bytes, truncations, flipped
// bits, an empty input, random bytes.
func deflateCases(t testing.TB, rng *rand.Rand, src []byte) (gz, zl [][]byte) {
	g, err := gzipCodec{level: 1 + rng.IntN(9)}.encode(src, nil)
	if err != nil {
		t.Fatal(err)
	}
	z, err := zlibCodec{level: rng.IntN(10)}.encode(src, nil)
	if err != nil {
		t.Fatal(err)
	}
	half, err := gzipCodec{level: 5}.encode(src[:len(src)/2], nil)
	if err != nil {
		t.Fatal(err)
	}
	rest, err := gzipCodec{level: 5}.encode(src[len(src)/2:], nil)
	if err != nil {
		t.Fatal(err)
	}
	spoil := func(c []byte) [][]byte {
		out := [][]byte{c, append(bytes.Clone(c), 0), append(bytes.Clone(c), "junk after it"...), c[:len(c)/2], c[:len(c)-1], nil, {0x1f}}
		for range 12 {
			b := bytes.Clone(c)
			b[rng.IntN(len(b))] ^= 1 << rng.IntN(8)
			out = append(out, b)
		}
		junk := make([]byte, 1+rng.IntN(2000))
		for i := range junk {
			junk[i] = byte(rng.Uint32())
		}
		return append(out, junk)
	}
	return append(spoil(g), append(bytes.Clone(half), rest...)), spoil(z)
}

// TestDeflateImplsAgree decodes gzip and zlib chunks of field data of
// random sizes, whole and spoiled (deflateCases), with libdeflate and
// with klauspost/compress, into a buffer of the chunk's size and into
// one too small: the two give the same bytes or both fail with
// ErrCorruptChunk (a stream cut short too: klauspost's reader says so,
// and readLimited no longer takes it for one that ended early), but
// where libdeflate decodes the chunk's own bytes from a stream that
// klauspost/compress refuses (see intact); and Blosc-zlib chunks decode
// to the input both ways. KVIK_TEST_SEED repeats a run's chunks.
func TestDeflateImplsAgree(t *testing.T) {
	needDeflate(t)
	seed := rand.Uint64()
	if v, err := strconv.ParseUint(os.Getenv("KVIK_TEST_SEED"), 10, 64); err == nil {
		seed = v
	}
	t.Logf("seed %d (KVIK_TEST_SEED repeats it)", seed)
	rng := rand.New(rand.NewPCG(seed, 42))
	field := fielddata.Float32(256, 512, rng.Uint64())
	decoders := map[string]func(native bool, src, dst []byte, limit int) ([]byte, error){
		"gzip": func(native bool, src, dst []byte, limit int) ([]byte, error) {
			if native {
				return gzipNative(src, dst, limit)
			}
			return goDecode(gzipCodec{}, src, dst, limit)
		},
		"zlib": func(native bool, src, dst []byte, limit int) ([]byte, error) {
			if native {
				return zlibNative(src, dst, limit)
			}
			return goDecode(zlibCodec{}, src, dst, limit)
		},
	}
	for i := range 16 {
		n := 1 + rng.IntN(len(field)-1)
		off := rng.IntN(len(field) - n + 1)
		src := field[off : off+n]
		gz, zl := deflateCases(t, rng, src)
		for _, f := range []struct {
			name  string
			cases [][]byte
		}{{"gzip", gz}, {"zlib", zl}} { // in order: a seed repeats the run
			name := f.name
			for j, c := range f.cases {
				for _, limit := range []int{n, n - 1 - rng.IntN(n)} {
					goOut, goErr := decoders[name](false, c, make([]byte, 0, limit), limit)
					nOut, nErr := decoders[name](true, c, make([]byte, 0, limit), limit)
					if (goErr == nil) != (nErr == nil) && intact(goOut, goErr, nOut, src) {
						// A flipped bit that lengthens the last repeat of a
						// dynamic block's code lengths past their count:
						// zlib and klauspost/compress refuse the stream,
						// libdeflate ignores the lengths past it, and the
						// data (its checksum checked) is the chunk's.
						t.Logf("%d %s case %d: go %v; libdeflate decodes the chunk's bytes", i, name, j, goErr)
					} else if (goErr == nil) != (nErr == nil) || !bytes.Equal(goOut, nOut) {
						t.Errorf("%d %s case %d (%d bytes, limit %d): go %d bytes, %v; libdeflate %d bytes, %v", i, name, j, len(c), limit, len(goOut), goErr, len(nOut), nErr)
					}
					if nErr != nil && !errors.Is(nErr, ErrCorruptChunk) {
						t.Errorf("%s case %d: %v, not ErrCorruptChunk", name, j, nErr)
					}
				}
			}
		}
		c := bloscCodec{cname: "zlib", clevel: 1 + i%9, shuffle: i % 3, typesize: 4, blocksize: []int{0, 1 << 13}[i%2]}
		enc, err := c.encode(src[:n&^3], nil)
		if err != nil {
			t.Fatal(err)
		}
		if dec, err := c.decode(enc, nil, n&^3); err != nil || !bytes.Equal(dec, src[:n&^3]) {
			t.Errorf("Blosc-zlib, %d bytes: %v, or other bytes", n&^3, err)
		}
	}
}

// intact reports whether, of a decode with klauspost/compress (goOut,
// goErr) and one with libdeflate (nOut) that disagree, the one that
// succeeded is libdeflate's and decoded src, the chunk's bytes.
func intact(goOut []byte, goErr error, nOut, src []byte) bool {
	return goErr != nil && bytes.Equal(nOut, src)
}

// goDecode decodes with klauspost/compress whatever DeflateEnv says.
func goDecode(c bytesCodec, src, dst []byte, limit int) ([]byte, error) {
	switch c.(type) {
	case gzipCodec:
		return gzipGo(src, dst, limit)
	}
	return zlibGo(src, dst, limit)
}

// TestDeflateEnv runs, in fresh processes, KVIK_DEFLATE=native with
// libdeflate missing: opening a gzip, zlib or Blosc-zlib array fails
// with kvik.ErrBadEnv naming the variable; and KVIK_DEFLATE=go and auto
// with it missing, which read back what they write, the implementation
// named with why.
func TestDeflateEnv(t *testing.T) {
	if mode := childtest.Mode(); mode != "" {
		deflateEnvChildTest(t, mode)
		return
	}
	missing := filepath.Join(t.TempDir(), "no-libdeflate.so.0")
	childtest.Run(t, "TestDeflateEnv", []string{"native", "go", "auto"}, func(mode string) []string {
		return []string{DeflateEnv + "=" + mode, libdeflate.LibraryEnv + "=" + missing}
	})
}

func deflateEnvChildTest(t *testing.T, mode string) {
	impl, ierr := DeflateImplementation()
	t.Logf("%s=%s: %q, %v", DeflateEnv, mode, impl, ierr)
	checkEnvChains(t, mode, DeflateEnv, "libdeflate.so.0", [][]Codec{
		{{Name: "bytes"}, {Name: "gzip", Configuration: map[string]any{"level": 5}}},
		{{Name: "bytes"}, {Name: "blosc", Configuration: map[string]any{"cname": "zlib", "clevel": 5, "shuffle": "shuffle", "typesize": 4, "blocksize": 0}}},
	})
	switch mode {
	case "native":
		if !errors.Is(ierr, kvik.ErrBadEnv) {
			t.Errorf("DeflateImplementation: %q, %v", impl, ierr)
		}
		if _, err := (zlibCodec{}).decode([]byte{0x78, 0x9c, 3, 0, 0, 0, 0, 1}, nil, 0); !errors.Is(err, kvik.ErrBadEnv) {
			t.Errorf("zlib decode: %v", err)
		}
	case "go":
		if ierr != nil || impl != "go (klauspost/compress; KVIK_DEFLATE=go)" {
			t.Errorf("DeflateImplementation: %q, %v", impl, ierr)
		}
	case "auto":
		if ierr != nil || !strings.HasPrefix(impl, "go (klauspost/compress; ") || !strings.Contains(impl, "no-libdeflate.so.0") {
			t.Errorf("DeflateImplementation: %q, %v", impl, ierr)
		}
	}
}

// FuzzDeflateImpls decodes arbitrary bytes as a gzip and as a zlib chunk
// with klauspost/compress and with libdeflate, seeded with
// deflateCases' chunks: neither panics nor gives more than the limit,
// failures are ErrCorruptChunk, and the two agree: the same bytes, or
// both fail.
//
//	go test -run '^$' -fuzz FuzzDeflateImpls -fuzztime 10m ./zarr
func FuzzDeflateImpls(f *testing.F) {
	needDeflate(f)
	rng := rand.New(rand.NewPCG(7, 8))
	src := fielddata.Float32(16, 64, 9)
	gz, zl := deflateCases(f, rng, src)
	for _, c := range append(gz, zl...) {
		f.Add(c, uint32(len(src)), false)
		f.Add(c, uint32(len(src)), true)
	}
	f.Fuzz(func(t *testing.T, in []byte, want uint32, zlibFormat bool) {
		n := int(want % (1 << 18))
		dec := [2]func(src, dst []byte, limit int) ([]byte, error){gzipGo, gzipNative}
		if zlibFormat {
			dec = [2]func(src, dst []byte, limit int) ([]byte, error){zlibGo, zlibNative}
		}
		var out [2][]byte
		var err [2]error
		for i, d := range dec {
			out[i], err[i] = d(in, nil, n)
			if err[i] != nil && !errors.Is(err[i], ErrCorruptChunk) {
				t.Fatalf("decoder %d: %v, not ErrCorruptChunk", i, err[i])
			}
			if len(out[i]) > n {
				t.Fatalf("decoder %d: %d bytes, more than %d", i, len(out[i]), n)
			}
		}
		if (err[0] == nil) != (err[1] == nil) || !bytes.Equal(out[0], out[1]) {
			t.Errorf("go %d bytes, %v; libdeflate %d bytes, %v", len(out[0]), err[0], len(out[1]), err[1])
		}
	})
}
