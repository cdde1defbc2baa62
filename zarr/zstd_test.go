package zarr

import (
	"bytes"
	"encoding/binary"
	"errors"
	"fmt"
	"math/rand/v2"
	"path/filepath"
	"runtime"
	"strings"
	"testing"

	"github.com/klauspost/compress/zstd"
	"github.com/kvikgo/kvik"
	"github.com/kvikgo/kvik/internal/libzstd"
	"github.com/kvikgo/kvik/internal/testkit/childtest"
	"github.com/kvikgo/kvik/internal/testkit/fielddata"
	"github.com/kvikgo/kvik/internal/testkit/libtest"
)

// zstdImpl names for tests: each implementation with its name.
type namedZstd struct {
	name string
	z    zstdImpl
}

// bothZstd returns Go's and libzstd's implementations, skipping the test,
// saying why, where libzstd cannot be loaded (under CI=true failing: CI
// runs on Debian, which always has it).
func bothZstd(t testing.TB) []namedZstd {
	t.Helper()
	libtest.Need(t, "libzstd.so.1", libzstd.Load, "")
	return []namedZstd{{"go", goZstd{}}, {"native", nativeZstd{}}}
}

// zstdSample returns n bytes of kind k: 0 field data from a random,
// unaligned offset; 1 random bytes; 2 field data with a random run of
// random bytes in it.
func zstdSample(rng *rand.Rand, field []byte, k, n int) []byte {
	b := make([]byte, n)
	if k == 1 {
		for i := range b {
			b[i] = byte(rng.Uint32())
		}
		return b
	}
	off := rng.IntN(len(field) - n + 1)
	copy(b, field[off:off+n])
	if k == 2 && n > 0 {
		i := rng.IntN(n)
		for j := i; j < min(n, i+1+rng.IntN(n-i)); j++ {
			b[j] = byte(rng.Uint32())
		}
	}
	return b
}

// TestZstdImplsRoundTrip encodes inputs of random sizes (0 to 3 MiB,
// unaligned; field data, random bytes and both) at levels from -5 to 12
// with each implementation, as zstd chunks and as Blosc-zstd chunks, and
// decodes each with each: every frame declares its content size (and a
// checksum where asked), every decode gives the input back, and a limit
// one byte short fails with ErrCorruptChunk.
func TestZstdImplsRoundTrip(t *testing.T) {
	impls := bothZstd(t)
	rng := rand.New(rand.NewPCG(40, 1))
	field := fielddata.Float32(1024, 1024, 7)
	sizes := []int{0, 1, 3<<20 + 5}
	for range 13 {
		sizes = append(sizes, rng.IntN(1<<rng.IntN(22)+1))
	}
	for i, n := range sizes {
		src := zstdSample(rng, field, i%3, n)
		level := []int{-5, -1, 1, 3, 6, 12}[rng.IntN(6)]
		ck := rng.IntN(2) == 0
		for _, enc := range impls {
			frame, err := enc.z.encode(src, nil, level, ck)
			if err != nil {
				t.Fatalf("%s encode of %d bytes at level %d: %v", enc.name, n, level, err)
			}
			var h zstd.Header
			if err := h.Decode(frame); err != nil || !h.HasFCS || h.FrameContentSize != uint64(n) || h.HasCheckSum != ck {
				t.Errorf("%s, %d bytes, level %d, checksum %v: header %+v, %v", enc.name, n, level, ck, h, err)
			}
			blosc, err := bloscCodec{cname: "zstd", clevel: 1 + i%9, shuffle: i % 3, typesize: 4, blocksize: rng.IntN(2) << 16, zstd: enc.z}.encode(src, nil)
			if err != nil {
				t.Fatalf("%s: blosc encode: %v", enc.name, err)
			}
			for _, dec := range impls {
				what := fmt.Sprintf("%s -> %s, %d bytes of kind %d, level %d, checksum %v", enc.name, dec.name, n, i%3, level, ck)
				var dst []byte
				if rng.IntN(2) == 0 {
					dst = make([]byte, 0, n)
				}
				out, err := zstdDecode(dec.z, frame, dst, n)
				if err != nil || !bytes.Equal(out, src) {
					t.Errorf("%s: %d bytes, %v", what, len(out), err)
				}
				if n > 0 {
					if _, err := zstdDecode(dec.z, frame, nil, n-1); !errors.Is(err, ErrCorruptChunk) {
						t.Errorf("%s: a limit one byte short: %v", what, err)
					}
				}
				out, err = bloscCodec{zstd: dec.z}.decode(blosc, nil, n)
				if err != nil || !bytes.Equal(out, src) {
					t.Errorf("%s: blosc: %d bytes, %v", what, len(out), err)
				}
			}
		}
	}
}

// zstdCase is a hostile zstd chunk and the limit it is decoded under.
type zstdCase struct {
	name  string
	src   []byte
	limit int
	// lenient: libzstd may accept the chunk where Go rejects it. Without a
	// checksum it does not check that an entropy-coded stream ends where
	// its block does (a flipped bit can decode to other bytes of the
	// declared size, which no decoder can tell from the data), and it
	// decodes RLE blocks past the 128 KiB block maximum.
	lenient bool
}

// zstdMagic starts every zstd frame; skippable frames start with
// 0x184D2A50 to 0x184D2A5F.
var zstdMagic = []byte{0x28, 0xb5, 0x2f, 0xfd}

// skippable returns a skippable frame holding payload.
func skippable(payload []byte) []byte {
	b := binary.LittleEndian.AppendUint32(nil, 0x184D2A53)
	b = binary.LittleEndian.AppendUint32(b, uint32(len(payload)))
	return append(b, payload...)
}

// rawFrame returns a frame of one raw block of content with the frame
// header descriptor fhd and the header fields that follow it.
func rawFrame(fhd byte, fields []byte, content []byte) []byte {
	b := append(bytes.Clone(zstdMagic), fhd)
	b = append(b, fields...)
	bh := uint32(1 | len(content)<<3) // the last block, raw
	b = append(b, byte(bh), byte(bh>>8), byte(bh>>16))
	return append(b, content...)
}

// zstdHostile returns hostile chunks built from valid frames of both
// implementations: truncated, bit-flipped, with trailing bytes, in
// several frames, behind and before skippable frames, declaring content
// sizes and windows that lie, with reserved bits and dictionaries, and
// blocks that expand past the limit.
func zstdHostile(t testing.TB, impls []namedZstd) []zstdCase {
	rng := rand.New(rand.NewPCG(41, 2))
	field := fielddata.Float32(256, 256, 3)
	var cases []zstdCase
	add := func(name string, src []byte, limit int) {
		cases = append(cases, zstdCase{name: name, src: src, limit: limit})
	}
	var stream bytes.Buffer
	w, err := zstd.NewWriter(&stream, zstd.WithEncoderCRC(true))
	if err != nil {
		t.Fatal(err)
	}
	w.Write(field[:200000])
	w.Close()
	add("unsized", stream.Bytes(), 200000)
	add("unsized/short limit", stream.Bytes(), 199999)
	for _, im := range impls {
		for _, n := range []int{0, 1, 100, 5000, 60001} {
			for _, ck := range []bool{false, true} {
				src := zstdSample(rng, field, n%3, n)
				f, err := im.z.encode(src, nil, 3, ck)
				if err != nil {
					t.Fatal(err)
				}
				name := fmt.Sprintf("%s/%d/checksum=%v", im.name, n, ck)
				add(name, f, n)
				add(name+"/limit+1", f, n+1)
				for _, cut := range []int{1, 4, 5, 6, len(f) / 2, len(f) - 4, len(f) - 1} {
					if cut > 0 && cut < len(f) {
						add(fmt.Sprintf("%s/cut at %d", name, cut), f[:cut], n)
					}
				}
				for k := range 12 {
					bad := bytes.Clone(f)
					bad[rng.IntN(len(bad))] ^= 1 << rng.IntN(8)
					cases = append(cases, zstdCase{fmt.Sprintf("%s/flip %d", name, k), bad, n, !ck})
				}
				add(name+"/trailing byte", append(bytes.Clone(f), 0), n+1)
				add(name+"/trailing magic", append(bytes.Clone(f), zstdMagic...), n+1)
				add(name+"/twice", append(bytes.Clone(f), f...), 2*n)
				add(name+"/twice, first's bound", append(bytes.Clone(f), f...), 2*n+1)
				add(name+"/skippable after", append(bytes.Clone(f), skippable([]byte("meta"))...), n)
				add(name+"/skippable before", append(skippable([]byte("meta")), f...), n)
				add(name+"/empty skippable before", append(skippable(nil), f...), n)
				add(name+"/skippable before, short limit", append(skippable(nil), f...), max(n-1, 0))
				add(name+"/truncated skippable before", append(skippable(make([]byte, 10))[:12], f...), n)
			}
		}
	}
	content := []byte("abcdefghijklmnop")
	// Frame header descriptor: bits 7-6 the content size field's size
	// flag, 5 single segment, 4 unused, 3 reserved, 2 checksum, 1-0 the
	// dictionary ID's size flag.
	add("raw, single segment, size 16", rawFrame(0x20, []byte{16}, content), 16)
	add("raw, size says 15", rawFrame(0x20, []byte{15}, content), 16)
	add("raw, size says 17", rawFrame(0x20, []byte{17}, content), 17)
	add("raw, size says 17, limit 16", rawFrame(0x20, []byte{17}, content), 16)
	add("raw, reserved bit", rawFrame(0x28, []byte{16}, content), 16)
	add("raw, unused bit", rawFrame(0x30, []byte{16}, content), 16)
	add("raw, dictionary 7", rawFrame(0x21, []byte{7, 16}, content), 16)
	add("raw, dictionary 0 in a byte", rawFrame(0x21, []byte{0, 16}, content), 16)
	add("raw, checksum flag, none", rawFrame(0x24, []byte{16}, content), 16)
	for _, log := range []byte{10, 20, 23, 24, 27, 30, 31, 41} {
		add(fmt.Sprintf("raw, unsized, window 2^%d", log), rawFrame(0x00, []byte{(log - 10) << 3}, content), 1<<20)
	}
	add("raw, unsized, window 2^20, limit 15", rawFrame(0x00, []byte{10 << 3}, content), 15)
	add("raw, sized 2 bytes", rawFrame(0x60, []byte{16 - 0, 0, 10 << 3}[:2], content), 1<<20)
	// An RLE block of 128 KiB, as many as fit in 4 KiB: megabytes out.
	rle := append(bytes.Clone(zstdMagic), 0x00, 10<<3)
	for i := range 1000 {
		last := 0
		if i == 999 {
			last = 1
		}
		bh := uint32(last | 1<<1 | (128<<10)<<3)
		rle = append(rle, byte(bh), byte(bh>>8), byte(bh>>16), 'x')
	}
	add("RLE blocks, 125 MiB unsized", rle, 1<<20)
	big := uint32(1 | 1<<1 | (128<<10+1)<<3)
	cases = append(cases, zstdCase{"RLE block past 128 KiB", append(bytes.Clone(zstdMagic), 0x00, 10<<3, byte(big), byte(big>>8), byte(big>>16), 'x'), 1 << 20, true})
	add("magic only", bytes.Clone(zstdMagic), 100)
	add("empty", nil, 100)
	add("garbage", []byte("not a zstd frame at all"), 100)
	return cases
}

// TestZstdImplsAgree decodes the chunks of zstdHostile with Go's and
// libzstd's implementations: both accept the same ones, with the same
// bytes, within the bound (the first frame's content size, else the
// limit), and reject the others with ErrCorruptChunk and a message that
// says zstd. libzstd may accept what Go rejects only where the case
// says so (lenient), and never allocates more than the bound.
func TestZstdImplsAgree(t *testing.T) {
	impls := bothZstd(t)
	for _, c := range zstdHostile(t, impls) {
		var out [2][]byte
		var err [2]error
		for i, im := range impls {
			var m0, m1 runtime.MemStats
			runtime.ReadMemStats(&m0)
			out[i], err[i] = zstdDecode(im.z, c.src, nil, c.limit)
			runtime.ReadMemStats(&m1)
			if grew := m1.TotalAlloc - m0.TotalAlloc; im.name == "native" && grew > uint64(c.limit)+1<<20 {
				t.Errorf("%s, limit %d: native allocated %d bytes", c.name, c.limit, grew)
			}
			checkZstdResult(t, c, im.name, out[i], err[i])
		}
		switch {
		case err[0] == nil && err[1] == nil && !bytes.Equal(out[0], out[1]):
			t.Errorf("%s: go and native decode to different bytes", c.name)
		case err[0] == nil && err[1] != nil:
			t.Errorf("%s, limit %d: native rejects what go accepts: %v", c.name, c.limit, err[1])
		case err[0] != nil && err[1] == nil && !c.lenient:
			t.Errorf("%s, limit %d: native accepts %d bytes where go fails: %v", c.name, c.limit, len(out[1]), err[0])
		}
	}
}

// checkZstdResult fails t when a decode of c by impl gave more than the
// bound, or an error that is not ErrCorruptChunk naming zstd.
func checkZstdResult(t testing.TB, c zstdCase, impl string, out []byte, err error) {
	t.Helper()
	bound := c.limit
	var h zstd.Header
	if h.Decode(c.src) == nil && h.HasFCS {
		bound = min(bound, int(h.FrameContentSize))
	}
	if err == nil && len(out) > bound {
		t.Errorf("%s, limit %d: %s gives %d bytes, more than %d", c.name, c.limit, impl, len(out), bound)
	}
	if err != nil && (!errors.Is(err, ErrCorruptChunk) || !strings.Contains(err.Error(), "zstd")) {
		t.Errorf("%s, limit %d: %s: %v, want ErrCorruptChunk about zstd", c.name, c.limit, impl, err)
	}
}

// FuzzZstdImpls decodes arbitrary bytes as a zstd chunk with Go's and
// libzstd's implementations, seeded with zstdHostile's chunks: neither
// panics nor gives more than the bound, errors are ErrCorruptChunk, and
// where both accept they give the same bytes. (Where they disagree,
// zstdHostile keeps the case, with what TestZstdImplsAgree expects.)
//
//	go test -run '^$' -fuzz FuzzZstdImpls -fuzztime 10m ./zarr
func FuzzZstdImpls(f *testing.F) {
	impls := bothZstd(f)
	for _, c := range zstdHostile(f, impls) {
		f.Add(c.src, uint32(c.limit))
	}
	f.Fuzz(func(t *testing.T, src []byte, limit uint32) {
		c := zstdCase{name: "fuzz", src: src, limit: int(limit % (1 << 20))}
		var out [2][]byte
		var err [2]error
		for i, im := range impls {
			out[i], err[i] = zstdDecode(im.z, c.src, nil, c.limit)
			checkZstdResult(t, c, im.name, out[i], err[i])
		}
		if err[0] == nil && err[1] == nil && !bytes.Equal(out[0], out[1]) {
			t.Errorf("go and native decode %x to different bytes", src)
		}
	})
}

// TestZstdNativeLevels checks that libzstd gets the level as given:
// field data compresses smaller at level 19 than at 3, and at 3 than at
// -5 (numcodecs' levels are zstd's own).
func TestZstdNativeLevels(t *testing.T) {
	bothZstd(t)
	src := fielddata.Float32(256, 256, 9)
	var sizes []int
	for _, level := range []int{-5, 3, 19} {
		f, err := nativeZstd{}.encode(src, nil, level, false)
		if err != nil {
			t.Fatal(err)
		}
		sizes = append(sizes, len(f))
	}
	if sizes[0] <= sizes[1] || sizes[1] <= sizes[2] {
		t.Errorf("%d bytes at levels -5, 3, 19: %v; want each smaller", len(src), sizes)
	}
}

// TestPickZstd checks ZstdEnv's values: unset and auto pick libzstd
// where it loads and Go's otherwise; go and native pick those (case and
// surrounding space aside); native without the library, an empty value
// and an unknown one are errors wrapping kvik.ErrBadEnv that name the
// variable.
func TestPickZstd(t *testing.T) {
	missing := errors.New("no libzstd here")
	loads := func() error { return nil }
	fails := func() error { return missing }
	for _, c := range []struct {
		v    string
		set  bool
		load func() error
		want zstdImpl
	}{
		{"", false, loads, nativeZstd{}},
		{"", false, fails, goZstd{}},
		{"auto", true, loads, nativeZstd{}},
		{" Auto ", true, fails, goZstd{}},
		{"go", true, loads, goZstd{}},
		{"GO", true, fails, goZstd{}},
		{"native", true, loads, nativeZstd{}},
	} {
		if z, err := pickZstd(c.v, c.set, c.load); err != nil || z != c.want {
			t.Errorf("%q (set %v): %T, %v; want %T", c.v, c.set, z, err, c.want)
		}
	}
	for _, c := range []struct{ v, msg string }{{"native", "no libzstd here"}, {"", "set but empty"}, {" ", "set but empty"}, {"fast", `"fast"`}} {
		z, err := pickZstd(c.v, true, fails)
		if z != nil || !errors.Is(err, kvik.ErrBadEnv) || !strings.Contains(err.Error(), ZstdEnv) || !strings.Contains(err.Error(), c.msg) {
			t.Errorf("%q: %v, %v", c.v, z, err)
		}
	}
	if _, err := pickZstd("native", true, fails); !errors.Is(err, missing) {
		t.Errorf("native without the library: %v does not wrap the load error", err)
	}
}

// TestZstdEnv runs, in fresh processes (ZstdEnv and the library are read
// once), KVIK_ZSTD=native with libzstd missing: opening a zstd array or
// a Blosc-zstd one fails with kvik.ErrBadEnv naming the variable, and so
// does decoding a zstd chunk; and KVIK_ZSTD=go and auto with it missing,
// where ZstdImplementation says go and why.
func TestZstdEnv(t *testing.T) {
	if mode := childtest.Mode(); mode != "" {
		zstdEnvChildTest(t, mode)
		return
	}
	missing := filepath.Join(t.TempDir(), "no-libzstd.so.1")
	childtest.Run(t, "TestZstdEnv", []string{"native", "go", "auto"}, func(mode string) []string {
		return []string{ZstdEnv + "=" + mode, libzstd.LibraryEnv + "=" + missing}
	})
}

func zstdEnvChildTest(t *testing.T, mode string) {
	impl, err := ZstdImplementation()
	t.Logf("%s=%s: %q, %v", ZstdEnv, mode, impl, err)
	checkEnvChains(t, mode, ZstdEnv, "libzstd.so.1", [][]Codec{
		{{Name: "bytes"}, {Name: "zstd", Configuration: map[string]any{"level": 3}}},
		{{Name: "bytes"}, {Name: "blosc", Configuration: map[string]any{"cname": "zstd", "clevel": 3, "shuffle": "shuffle", "typesize": 4, "blocksize": 0}}},
	})
	switch mode {
	case "native":
		if !errors.Is(err, kvik.ErrBadEnv) {
			t.Errorf("ZstdImplementation: %q, %v", impl, err)
		}
		f, _ := goZstd{}.encode([]byte("abc"), nil, 3, false)
		if _, err := (zstdCodec{}).decode(f, nil, 3); !errors.Is(err, kvik.ErrBadEnv) {
			t.Errorf("decode: %v", err)
		}
	case "go":
		if err != nil || impl != "go (klauspost/compress; KVIK_ZSTD=go)" {
			t.Errorf("ZstdImplementation: %q, %v", impl, err)
		}
	case "auto":
		if err != nil || !strings.HasPrefix(impl, "go (klauspost/compress; ") || !strings.Contains(impl, "libzstd.so.1") {
			t.Errorf("ZstdImplementation: %q, %v", impl, err)
		}
	}
}

// checkEnvChains creates a small array in each codec chain of chains in
// a new DirStore, in a child process of an Env test whose variable env
// has the value mode and whose library lib is missing: with mode native
// each Create fails with kvik.ErrBadEnv naming env=native and lib; with
// another each array reads back what it was written.
func checkEnvChains(t *testing.T, mode, env, lib string, chains [][]Codec) {
	t.Helper()
	s, err := NewDirStore(t.TempDir())
	if err != nil {
		t.Fatal(err)
	}
	for i, codecs := range chains {
		a, err := Create(bg, s, fmt.Sprint("a", i), Metadata{Shape: []int{100}, ChunkShape: []int{30}, DataType: DataType{Kind: Float, Size: 4}, Codecs: codecs})
		if mode == "native" {
			if !errors.Is(err, kvik.ErrBadEnv) || !strings.Contains(fmt.Sprint(err), env+"=native") || !strings.Contains(fmt.Sprint(err), lib) {
				t.Errorf("Create with %s: %v; want kvik.ErrBadEnv naming %s", codecs[1].Name, err, env)
			}
			continue
		}
		if err != nil {
			t.Fatal(err)
		}
		data := fielddata.Float32(1, 100, 4)
		if err := a.WriteRegion(bg, []int{0}, []int{100}, data); err != nil {
			t.Fatal(err)
		}
		got := make([]byte, len(data))
		if err := a.ReadRegion(bg, []int{0}, []int{100}, got); err != nil || !bytes.Equal(got, data) {
			t.Errorf("%s read back: %v", codecs[1].Name, err)
		}
	}
}
