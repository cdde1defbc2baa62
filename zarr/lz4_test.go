package zarr

import (
	"bytes"
	"errors"
	"fmt"
	"math/rand/v2"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/kvikgo/kvik"
	"github.com/kvikgo/kvik/internal/formatkit/codecpick"
	"github.com/kvikgo/kvik/internal/liblz4"
	"github.com/kvikgo/kvik/internal/testkit/childtest"
	"github.com/kvikgo/kvik/internal/testkit/fielddata"
	"github.com/kvikgo/kvik/internal/testkit/libtest"
)

// needLZ4 skips the test where liblz4 cannot be loaded (failing under
// CI=true: Debian always has it).
func needLZ4(t testing.TB) { libtest.Need(t, "liblz4.so.1", liblz4.Load, "") }

// TestLZ4ImplsAgree encodes samples of random sizes (field data from an
// unaligned offset, random bytes, field data with random bytes in it)
// with Blosc "lz4" through liblz4 and through pierrec/lz4, at levels 1,
// 5 and 9, each shuffle and a random block size: each chunk decodes to
// the input, and the two implementations' chunks are within 2% of each
// other's size (both write LZ4_compress_fast's blocks).
func TestLZ4ImplsAgree(t *testing.T) {
	needLZ4(t)
	rng := rand.New(rand.NewPCG(rand.Uint64(), 41))
	field := fielddata.Float32(512, 512, rng.Uint64())
	for i := range 24 {
		n := 4 * rng.IntN(len(field)/4)
		src := zstdSample(rng, field, i%3, n)
		level, shuffle := []int{1, 5, 9}[i%3], i%3
		bs := []int{0, 1 << 14, 1 << 17}[rng.IntN(3)]
		var sizes [2]int
		for j, impl := range []lz4Impl{goLZ4{}, nativeLZ4{}} {
			c := bloscCodec{cname: "lz4", clevel: level, shuffle: shuffle, typesize: 4, blocksize: bs, lz4: impl}
			enc, err := c.encode(src, nil)
			if err != nil {
				t.Fatalf("%T, %d bytes: %v", impl, n, err)
			}
			dec, err := c.decode(enc, nil, n)
			if err != nil || !bytes.Equal(dec, src) {
				t.Fatalf("%T, %d bytes, level %d, shuffle %d: decodes to other bytes (%v)", impl, n, level, shuffle, err)
			}
			sizes[j] = len(enc)
		}
		if d := sizes[1] - sizes[0]; d*50 > sizes[0] || -d*50 > sizes[0] {
			t.Errorf("%d bytes, level %d, shuffle %d: pierrec/lz4 %d bytes, liblz4 %d", n, level, shuffle, sizes[0], sizes[1])
		}
	}
}

// TestPickLZ4 checks that LZ4Env's values pick as ZstdEnv's do
// (TestPickZstd) and that its errors name it.
func TestPickLZ4(t *testing.T) {
	fails := func() error { return errors.New("no liblz4 here") }
	for _, v := range []string{"native", "", "fast"} {
		if _, err := codecpick.Native(LZ4Env, v, true, fails); !errors.Is(err, kvik.ErrBadEnv) || !strings.Contains(err.Error(), LZ4Env) {
			t.Errorf("%q: %v", v, err)
		}
	}
	if native, err := codecpick.Native(LZ4Env, "", false, func() error { return nil }); !native || err != nil {
		t.Errorf("unset with the library: native %v, %v", native, err)
	}
}

// TestLZ4Env runs, in fresh processes (LZ4Env and the library are read
// once), KVIK_LZ4=native with liblz4 missing: writing a Blosc-lz4 array
// fails with kvik.ErrBadEnv naming the variable, while reading one
// written before works (reads never use liblz4); and KVIK_LZ4=go and
// auto with it missing, which write and read back, LZ4Implementation
// saying go and why.
func TestLZ4Env(t *testing.T) {
	if mode := childtest.Mode(); mode != "" {
		lz4EnvChildTest(t, mode)
		return
	}
	dir := t.TempDir()
	s, err := NewDirStore(dir)
	if err != nil {
		t.Fatal(err)
	}
	a, err := Create(bg, s, "old", lz4EnvMeta())
	if err != nil {
		t.Fatal(err)
	}
	if err := a.WriteRegion(bg, []int{0}, []int{300}, fielddata.Float32(1, 300, 7)); err != nil {
		t.Fatal(err)
	}
	missing := filepath.Join(t.TempDir(), "no-liblz4.so.1")
	childtest.Run(t, "TestLZ4Env", []string{"native", "go", "auto"}, func(mode string) []string {
		return []string{LZ4Env + "=" + mode, liblz4.LibraryEnv + "=" + missing, "KVIK_LZ4_TEST_DIR=" + dir}
	})
}

func lz4EnvMeta() Metadata {
	return Metadata{Shape: []int{300}, ChunkShape: []int{70}, DataType: DataType{Kind: Float, Size: 4}, Codecs: []Codec{{Name: "bytes"},
		{Name: "blosc", Configuration: map[string]any{"cname": "lz4", "clevel": 5, "shuffle": "shuffle", "typesize": 4, "blocksize": 0}}}}
}

func lz4EnvChildTest(t *testing.T, mode string) {
	impl, ierr := LZ4Implementation()
	t.Logf("%s=%s: %q, %v", LZ4Env, mode, impl, ierr)
	s, err := NewDirStore(os.Getenv("KVIK_LZ4_TEST_DIR"))
	if err != nil {
		t.Fatal(err)
	}
	old, err := Open(bg, s, "old")
	if err != nil {
		t.Fatal(err)
	}
	got := make([]byte, 300*4)
	if err := old.ReadRegion(bg, []int{0}, []int{300}, got); err != nil || !bytes.Equal(got, fielddata.Float32(1, 300, 7)) {
		t.Errorf("reading the array written before: %v", err)
	}
	a, err := Create(bg, s, "new-"+mode, lz4EnvMeta())
	if err != nil {
		t.Fatal(err)
	}
	data := fielddata.Float32(1, 300, 8)
	werr := a.WriteRegion(bg, []int{0}, []int{300}, data)
	switch mode {
	case "native":
		if !errors.Is(werr, kvik.ErrBadEnv) || !strings.Contains(fmt.Sprint(werr), LZ4Env+"=native") || !strings.Contains(fmt.Sprint(werr), "liblz4.so.1") {
			t.Errorf("write: %v; want kvik.ErrBadEnv naming %s", werr, LZ4Env)
		}
		if !errors.Is(ierr, kvik.ErrBadEnv) {
			t.Errorf("LZ4Implementation: %q, %v", impl, ierr)
		}
		return
	case "go":
		if ierr != nil || impl != "go (pierrec/lz4; KVIK_LZ4=go)" {
			t.Errorf("LZ4Implementation: %q, %v", impl, ierr)
		}
	case "auto":
		if ierr != nil || !strings.HasPrefix(impl, "go (pierrec/lz4; ") || !strings.Contains(impl, "no-liblz4.so.1") {
			t.Errorf("LZ4Implementation: %q, %v", impl, ierr)
		}
	}
	if werr != nil {
		t.Fatal(werr)
	}
	if err := a.ReadRegion(bg, []int{0}, []int{300}, got); err != nil || !bytes.Equal(got, data) {
		t.Errorf("read back: %v", err)
	}
}
