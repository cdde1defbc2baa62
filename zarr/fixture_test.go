package zarr

import (
	"bytes"
	"encoding/binary"
	"encoding/json"
	"errors"
	"fmt"
	"io/fs"
	"math"
	"math/rand/v2"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"slices"
	"strings"
	"testing"
	"time"
)

// npyArray is a .npy file: its descr, shape, order and raw data.
type npyArray struct {
	descr   string
	shape   []int
	fortran bool
	data    []byte
}

var npyHeaderRe = regexp.MustCompile(`'descr':\s*'([^']*)'.*'fortran_order':\s*(True|False).*'shape':\s*\(([^)]*)\)`)

func readNpy(t *testing.T, path string) npyArray {
	t.Helper()
	b, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	if !bytes.HasPrefix(b, []byte("\x93NUMPY")) {
		t.Fatalf("%s: not a .npy file", path)
	}
	var hlen, off int
	if b[6] == 1 {
		hlen, off = int(binary.LittleEndian.Uint16(b[8:])), 10
	} else {
		hlen, off = int(binary.LittleEndian.Uint32(b[8:])), 12
	}
	m := npyHeaderRe.FindStringSubmatch(string(b[off : off+hlen]))
	if m == nil {
		t.Fatalf("%s: header %q", path, b[off:off+hlen])
	}
	a := npyArray{descr: m[1], fortran: m[2] == "True", data: b[off+hlen:]}
	for _, s := range strings.Split(m[3], ",") {
		if s = strings.TrimSpace(s); s != "" {
			var n int
			fmt.Sscan(s, &n)
			a.shape = append(a.shape, n)
		}
	}
	return a
}

// TestNumcodecsFixtures decodes numcodecs' fixture encodings (see
// testdata/README.md) and compares them with the arrays they encode.
func TestNumcodecsFixtures(t *testing.T) {
	root := filepath.Join("testdata", "numcodecs")
	dirs, _ := filepath.Glob(filepath.Join(root, "*", "codec.*"))
	delta, _ := filepath.Glob(filepath.Join(root, "delta", "*", "codec.*"))
	dirs = append(dirs, delta...)
	if len(dirs) < 20 {
		t.Fatalf("only %d fixture codecs found", len(dirs))
	}
	checked := 0
	for _, dir := range dirs {
		cfgRaw, err := os.ReadFile(filepath.Join(dir, "config.json"))
		if err != nil {
			t.Fatal(err)
		}
		c, err := parseCodecV2(cfgRaw)
		if err != nil {
			t.Fatal(dir, err)
		}
		encs, _ := filepath.Glob(filepath.Join(dir, "encoded.*.dat"))
		for _, enc := range encs {
			n := strings.TrimSuffix(strings.TrimPrefix(filepath.Base(enc), "encoded."), ".dat")
			arr := readNpy(t, filepath.Join(filepath.Dir(dir), "array."+n+".npy"))
			dt := DataType{Kind: Uint, Size: 1}
			if d, _, err := parseV2Type(arr.descr); err == nil {
				dt = d
			} else if m := regexp.MustCompile(`^[<>|][a-zA-Z](\d+)`).FindStringSubmatch(arr.descr); m != nil {
				fmt.Sscan(m[1], &dt.Size) // datetimes and strings: only the item size matters here
			}
			bc, err := newBytesCodec(*c, dt, false)
			name := dir + "/" + filepath.Base(enc)
			switch {
			case c.Name == "delta" && arr.descr == "|b1":
				if !errors.Is(err, ErrUnsupportedCodec) {
					t.Errorf("%s: bool delta: got %v, want ErrUnsupportedCodec", name, err)
				}
				continue
			case err != nil:
				t.Errorf("%s: %v", name, err)
				continue
			}
			got, err := bc.decode(mustRead(t, enc), nil, len(arr.data)+64)
			if err != nil {
				t.Errorf("%s: decode: %v", name, err)
				continue
			}
			if !bytes.Equal(got, arr.data) {
				t.Errorf("%s: decoded %d bytes differ from the %d bytes of array.%s.npy", name, len(got), len(arr.data), n)
			}
			checked++
		}
	}
	t.Logf("%d numcodecs fixture encodings decoded and matched", checked)
}

func mustRead(t *testing.T, p string) []byte {
	t.Helper()
	b, err := os.ReadFile(p)
	if err != nil {
		t.Fatal(err)
	}
	return b
}

// element returns the little-endian bytes of v as an element of t.
func element(t DataType, v float64) []byte {
	b := make([]byte, t.Size)
	switch t.Kind {
	case Float:
		putFloat(b, v)
	default:
		putUint(b, uint64(int64(v)))
	}
	return b
}

// linspace follows NumPy's linspace(start, stop, num) in float64.
func linspace(start, stop float64, num, i int) float64 {
	if i == num-1 {
		return stop
	}
	step := (stop - start) / float64(num-1)
	return float64(i)*step + start
}

// expectZarrPython returns the values the zarr-python fixture script
// (test_format_compatibility) stores in array i at flat C index k of
// shape, or ok=false for random arrays (checked against the uncompressed
// copy instead).
func expectZarrPython(i int, shape []int, k int) (float64, bool) {
	idx := make([]int, len(shape))
	unflatten(k, shape, idx)
	switch i {
	case 0, 1, 2, 3:
		return float64(k), true
	case 8, 9, 10:
		return linspace(0, 1, 3333, k), true
	case 18, 20, 22:
		return float64(k), true
	case 19, 21, 23: // reshape(..., order='F'): column-major fill
		v, mul := 0, 1
		for d := range shape {
			v += idx[d] * mul
			mul *= shape[d]
		}
		return float64(v), true
	}
	return 0, false
}

func readWhole(t *testing.T, a *Array) []byte {
	t.Helper()
	shape := a.Shape()
	buf := make([]byte, numElements(shape)*a.DataType().Size)
	if err := a.ReadRegion(bg, make([]int, len(shape)), shape, buf); err != nil {
		t.Fatalf("%s: %v", a.path, err)
	}
	return buf
}

// TestZarrPythonV2Fixtures reads zarr-python's v2 format-compatibility
// fixtures (every compressor it used that this package supports, BZ2's
// first chunk) and checks each value against the generating rule.
func TestZarrPythonV2Fixtures(t *testing.T) {
	s, err := NewDirStore(filepath.Join("testdata", "zarr-python-v2"))
	if err != nil {
		t.Fatal(err)
	}
	arrays, _ := filepath.Glob(filepath.Join(s.Root(), "[0-9]*", "[0-9]"))
	checked := 0
	for _, dir := range arrays {
		rel, _ := filepath.Rel(s.Root(), dir)
		rel = filepath.ToSlash(rel)
		var i, j int
		fmt.Sscanf(rel, "%d/%d", &i, &j)
		a, err := Open(bg, s, rel)
		if err != nil {
			t.Errorf("%s: %v", rel, err)
			continue
		}
		got := readWhole(t, a)
		ref, err := Open(bg, s, fmt.Sprintf("%d/0", i))
		if err != nil {
			t.Fatal(err)
		}
		refBytes := readWhole(t, ref)
		if j == 2 {
			// BZ2 (0/2): only its first chunk is kept here (it was
			// unsupported when the subset was taken); the rest reads as
			// the fill value, 0.
			n := a.Metadata().ChunkShape[0] * a.DataType().Size
			clear(refBytes[n:])
		}
		if !bytes.Equal(got, refBytes) {
			t.Errorf("%s differs from the uncompressed %d/0", rel, i)
		}
		shape, dt := a.Shape(), a.DataType()
		rule := numElements(shape)
		if j == 2 {
			rule = a.Metadata().ChunkShape[0]
		}
		for k := 0; k < rule; k++ {
			v, ok := expectZarrPython(i, shape, k)
			if !ok {
				break
			}
			if e := element(dt, v); !bytes.Equal(got[k*dt.Size:(k+1)*dt.Size], e) {
				t.Errorf("%s: element %d is %x, want %x (%v)", rel, k, got[k*dt.Size:(k+1)*dt.Size], e, v)
				break
			}
		}
		checkRandomFixture(t, rel, i, dt, got)
		checked++
	}
	if checked < 30 {
		t.Fatalf("only %d fixture arrays checked", checked)
	}
	t.Logf("%d zarr-python v2 fixture arrays checked", checked)
}

// checkRandomFixture checks what the script's rule says of random arrays.
func checkRandomFixture(t *testing.T, rel string, i int, dt DataType, b []byte) {
	n := len(b) / dt.Size
	for k := 0; k < n; k++ {
		e := b[k*dt.Size : (k+1)*dt.Size]
		switch i {
		case 16: // choice([0, 1/3, 1/7, 1/9, nan])
			f := math.Float64frombits(binary.LittleEndian.Uint64(e))
			if !math.IsNaN(f) && f != 0 && f != 1.0/3 && f != 1.0/7 && f != 1.0/9 {
				t.Fatalf("%s: element %d = %v not in the choice set", rel, k, f)
			}
		case 17: // randint(0, 2, dtype=bool)
			if e[0] > 1 {
				t.Fatalf("%s: bool element %d = %d", rel, k, e[0])
			}
		case 11: // normal(0, 1) as float16: finite and small
			if f := Float16ToFloat64(binary.LittleEndian.Uint16(e)); math.IsNaN(f) || math.Abs(f) > 10 {
				t.Fatalf("%s: element %d = %v", rel, k, f)
			}
		}
	}
}

// TestDimensionSeparatorFixtures reads zarr-python's flat and nested
// fixtures; the legacy nested one (no dimension_separator in .zarray)
// needs the store's separator, as with KvikIO's GDSStore.
func TestDimensionSeparatorFixtures(t *testing.T) {
	want := []byte{}
	for _, v := range []int64{1, 2, 3, 4} {
		want = binary.LittleEndian.AppendUint64(want, uint64(v))
	}
	root := filepath.Join("testdata", "zarr-python-v2")
	for _, c := range []struct {
		path, sep string
		ok        bool
	}{
		{"flat", ".", true}, {"flat_legacy", ".", true}, {"nested", ".", true},
		{"nested_legacy", "/", true}, {"nested_legacy", ".", false},
	} {
		s, err := NewDirStore(root, WithDimensionSeparator(c.sep))
		if err != nil {
			t.Fatal(err)
		}
		a, err := Open(bg, s, c.path)
		if err != nil {
			t.Fatal(err)
		}
		got := readWhole(t, a)
		if bytes.Equal(got, want) != c.ok {
			t.Errorf("%s with store separator %q: got %x", c.path, c.sep, got)
		}
		if !c.ok && !bytes.Equal(got, make([]byte, 32)) {
			t.Errorf("%s with the wrong separator should read as fill value, got %x", c.path, got)
		}
	}
	if _, err := NewDirStore(t.TempDir(), WithDimensionSeparator("-")); !errors.Is(err, ErrInvalidMetadata) {
		t.Errorf("separator \"-\": %v", err)
	}
}

// TestZarrsFixtures reads zarr-python-written v2 and v3 arrays kept by
// zarrs (values: row*10+col as float32, by their generating scripts;
// bz2 ones among them) and the zarrs-written sharded array (uint16
// y*8+x).
func TestZarrsFixtures(t *testing.T) {
	s, err := NewDirStore(filepath.Join("testdata", "zarrs"))
	if err != nil {
		t.Fatal(err)
	}
	arrays, _ := filepath.Glob(filepath.Join(s.Root(), "*", "*.zarr"))
	arrays = append(arrays, filepath.Join(s.Root(), "sharded_array_write_read.zarr", "group", "array"))
	checked := 0
	for _, dir := range arrays {
		rel, _ := filepath.Rel(s.Root(), dir)
		rel = filepath.ToSlash(rel)
		a, err := Open(bg, s, rel) // bz2 ones too, since bz2Codec reads them
		if err != nil {
			t.Errorf("%s: %v", rel, err)
			continue
		}
		shape := a.Shape()
		value := func(r, c int) []byte { return element(a.DataType(), float64(r*10+c)) }
		if strings.Contains(rel, "sharded") {
			value = func(r, c int) []byte { return element(a.DataType(), float64(r*8+c)) }
		}
		// Every region with corners on a 3-step lattice, whole array included.
		for r0 := 0; r0 < shape[0]; r0 += 3 {
			for c0 := 0; c0 < shape[1]; c0 += 2 {
				for _, stop := range [][2]int{{shape[0], shape[1]}, {min(r0+3, shape[0]), min(c0+5, shape[1])}} {
					checkRegion(t, a, rel, []int{r0, c0}, stop[:], value)
				}
			}
		}
		checkRegion(t, a, rel, []int{0, 0}, shape, value)
		checked++
	}
	if checked < 10 {
		t.Fatalf("only %d arrays checked", checked)
	}
}

func checkRegion(t *testing.T, a *Array, rel string, start, stop []int, value func(r, c int) []byte) {
	t.Helper()
	es := a.DataType().Size
	buf := make([]byte, (stop[0]-start[0])*(stop[1]-start[1])*es)
	if err := a.ReadRegion(bg, start, stop, buf); err != nil {
		t.Fatalf("%s %v-%v: %v", rel, start, stop, err)
	}
	k := 0
	for r := start[0]; r < stop[0]; r++ {
		for c := start[1]; c < stop[1]; c++ {
			if got, want := buf[k:k+es], value(r, c); !bytes.Equal(got, want) {
				t.Fatalf("%s region %v-%v: [%d,%d] = %x, want %x", rel, start, stop, r, c, got, want)
			}
			k += es
		}
	}
}

var _ = json.Marshal

// TestTypeFixturesZarrPython3 reads arrays zarr-python 3 wrote (kept by
// zarrs, testdata/README.md): v3 numpy.datetime64 and numpy.timedelta64
// of several units and scale factors (zstd), their values those of the
// generating script cast to each unit, as NumPy casts (calendar years,
// whole weeks, exact multiples), NaT where it put NaT; and
// fixed_length_utf32 (v3) and <U4, >U4 (v2) holding "abc", "🎉", "hi",
// "te", "". Each array written again by kvik stores the same chunks.
func TestTypeFixturesZarrPython3(t *testing.T) {
	s, out := fixtureStores(t, "zarrs-types")
	const nat = math.MinInt64
	dates := []time.Time{time.Unix(0, 0).UTC(), {}, time.Date(2005, 2, 3, 0, 0, 0, 0, time.UTC),
		time.Date(2005, 2, 3, 4, 5, 0, 0, time.UTC), time.Date(2005, 2, 3, 4, 5, 6, 0, time.UTC), {}}
	durations := []time.Duration{8760 * time.Hour, 2 * 7 * 24 * time.Hour, 3 * 24 * time.Hour, 4 * time.Hour,
		5 * time.Minute, 6 * time.Second, 7000 * time.Millisecond, 8_000_000 * time.Microsecond, 9_000_000_000, 0, -1}
	// perUnit is a unit's length in nanoseconds; a picosecond is
	// 1/1000 of one (Go's time stops at nanoseconds).
	perUnit := map[string]int64{"W": 7 * 86400e9, "D": 86400e9, "h": 3600e9, "m": 60e9, "s": 1e9, "ms": 1e6, "us": 1e3, "ns": 1}
	paths, _ := filepath.Glob(filepath.Join(s.Root(), "*64[[]*].zarr"))
	for _, p := range paths {
		name := filepath.Base(p)
		a, err := Open(bg, s, name)
		if err != nil {
			t.Fatal(err)
		}
		dt := a.DataType()
		var want []int64
		step := perUnit[dt.Unit] * int64(dt.scale())
		if dt.Kind == DateTime {
			for _, d := range dates {
				switch {
				case d.IsZero():
					want = append(want, nat)
				case dt.Unit == "Y":
					want = append(want, int64(d.Year()-1970))
				default:
					want = append(want, d.UnixNano()/step)
				}
			}
		} else {
			for _, d := range durations {
				switch {
				case d < 0:
					want = append(want, nat)
				case dt.Unit == "ps":
					// NumPy multiplies without a check: 8760 h
					// in ps wraps, as an int64 product does.
					want = append(want, int64(d)*1000)
				default:
					want = append(want, int64(d)/step)
				}
			}
		}
		shape := a.Shape()
		buf := make([]byte, 8*shape[0])
		if err := a.ReadRegion(bg, []int{0}, shape, buf); err != nil {
			t.Fatalf("%s: %v", name, err)
		}
		for i, w := range want {
			if got := int64(binary.LittleEndian.Uint64(buf[8*i:])); got != w || len(want) != shape[0] {
				t.Errorf("%s (%v): [%d] = %d, want %d", name, dt, i, got, w)
			}
		}
		rewriteFixture(t, s, out, name, a, buf)
	}
	if len(paths) != 17 {
		t.Errorf("%d temporal arrays, want 17", len(paths))
	}
	for _, name := range []string{"fixed_length_utf32_v3_le.zarr", "fixed_length_utf32_v2_le.zarr", "fixed_length_utf32_v2_be.zarr"} {
		a, err := Open(bg, s, name)
		if err != nil {
			t.Fatal(err)
		}
		got, err := a.ReadStrings(bg, []int{0}, a.Shape())
		if err != nil || a.DataType() != (DataType{Kind: Unicode, Size: 16}) || !slices.Equal(got, []string{"abc", "🎉", "hi", "te", ""}) {
			t.Errorf("%s (%v): %q, %v", name, a.DataType(), got, err)
		}
		buf := make([]byte, 16*5)
		if err := a.ReadRegion(bg, []int{0}, a.Shape(), buf); err != nil {
			t.Fatal(err)
		}
		rewriteFixture(t, s, out, name, a, buf)
	}
}

// fixtureStores opens testdata/dir and a new store in a temporary
// directory, for a fixture's arrays written again.
func fixtureStores(t *testing.T, dir string) (fixtures, out *DirStore) {
	t.Helper()
	fixtures, err := NewDirStore(filepath.Join("testdata", dir))
	if err != nil {
		t.Fatal(err)
	}
	if out, err = NewDirStore(t.TempDir()); err != nil {
		t.Fatal(err)
	}
	return fixtures, out
}

// rewriteFixture creates array name in out with a's metadata, writes
// data (the whole array) there, and checks that every chunk it stored
// is the fixture's: byte for byte where no compressor is in the chain
// (checksums are none), else decoded (encoders differ in their bytes: libzstd's matched
// zarr-python's here, klauspost's did not). zarr-python 3 leaves out
// chunks all of the fill value (its write_empty_chunks=False), as kvik
// does: kvik must store the very chunks it stored.
func rewriteFixture(t *testing.T, s, out *DirStore, name string, a *Array, data []byte) {
	t.Helper()
	b, err := Create(bg, out, name, *a.Metadata())
	if err != nil {
		t.Fatal(err)
	}
	if err := b.WriteRegion(bg, make([]int, len(a.Shape())), a.Shape(), data); err != nil {
		t.Fatal(err)
	}
	keys, err := out.List(bg, name+"/")
	if err != nil {
		t.Fatal(err)
	}
	theirKeys, err := s.List(bg, name+"/")
	if err != nil {
		t.Fatal(err)
	}
	for _, k := range theirKeys {
		if _, err := out.Get(bg, k, nil); errors.Is(err, fs.ErrNotExist) {
			t.Errorf("%s: zarr-python stored a chunk kvik left out", k)
		}
	}
	for _, k := range keys {
		if strings.HasSuffix(k, "zarr.json") || strings.HasSuffix(k, ".zarray") || strings.HasSuffix(k, ".zattrs") {
			continue
		}
		mine, _ := out.Get(bg, k, nil)
		theirs, err := s.Get(bg, k, nil)
		if errors.Is(err, fs.ErrNotExist) {
			t.Errorf("%s: kvik stored a chunk zarr-python left out", k)
			continue
		}
		if err != nil {
			t.Fatal(err)
		}
		if slices.ContainsFunc(a.pipe.bb, func(c bytesCodec) bool { _, sum := c.(checksumCodec); return !sum }) {
			n := numElements(a.meta.ChunkShape) * a.meta.DataType.Size
			x, y := make([]byte, n), make([]byte, n)
			if err := errors.Join(a.DecodeChunk(mine, x), a.DecodeChunk(theirs, y)); err != nil || !bytes.Equal(x, y) {
				t.Errorf("%s: kvik's chunk decodes otherwise than zarr-python's (%v)", k, err)
			}
			continue
		}
		if !bytes.Equal(mine, theirs) {
			t.Errorf("%s: kvik stored %d bytes, zarr-python %d: not the same", k, len(mine), len(theirs))
		}
	}
}

// TestChecksumFixtures reads the uint16 arange(10000) (100 x 100, chunks
// 50 x 50) that zarr-python 3 stored under numcodecs' adler32 (checksum
// first) and fletcher32 (HDF5's, last) compressors (kept by zarrs):
// each value where it belongs; kvik writing the same values stores the
// same chunks, byte for byte; a chunk with one byte changed fails with
// ErrCorruptChunk.
func TestChecksumFixtures(t *testing.T) {
	s, out := fixtureStores(t, "zarrs-types")
	for _, name := range []string{"adler32.zarr", "fletcher32.zarr"} {
		a, err := Open(bg, s, name)
		if err != nil {
			t.Fatal(err)
		}
		checkRegion(t, a, name, []int{0, 0}, []int{100, 100}, func(r, c int) []byte {
			return binary.LittleEndian.AppendUint16(nil, uint16(r*100+c))
		})
		buf := make([]byte, 2*100*100)
		if err := a.ReadRegion(bg, []int{0, 0}, []int{100, 100}, buf); err != nil {
			t.Fatal(err)
		}
		rewriteFixture(t, s, out, name, a, buf)
		chunk, err := s.Get(bg, name+"/1.0", nil)
		if err != nil {
			t.Fatal(err)
		}
		for _, at := range []int{0, 3, 4, len(chunk) / 2, len(chunk) - 5, len(chunk) - 1} {
			bad := slices.Clone(chunk)
			bad[at] ^= 0x10
			if err := a.DecodeChunk(bad, make([]byte, 2*50*50)); !errors.Is(err, ErrCorruptChunk) {
				t.Errorf("%s: byte %d of %d changed: %v, want ErrCorruptChunk", name, at, len(chunk), err)
			}
		}
	}
}

// TestChecksumsZarrPython: zarr-python 2 with numcodecs' crc32 and
// adler32 (as the compressor, and as a filter before zlib) and shuffle
// (of 4- and 2-byte elements, a filter before zlib or crc32) writes
// random int32 arrays that kvik reads, and reads back the arrays kvik
// writes with the same codecs, element for element.
func TestChecksumsZarrPython(t *testing.T) {
	py := zarrPython(t)
	dir := t.TempDir()
	const script = `
import sys, zarr, numcodecs, numpy as np
mode, root = sys.argv[1], sys.argv[2]
codecs = {"crc32": (None, numcodecs.CRC32()), "adler32": (None, numcodecs.Adler32()),
          "adler32-zlib": ([numcodecs.Adler32()], numcodecs.Zlib(level=3)), "crc32-zlib": ([numcodecs.CRC32()], numcodecs.Zlib(level=1)),
          "shuffle-zlib": ([numcodecs.Shuffle(elementsize=4)], numcodecs.Zlib(level=5)), "shuffle2-crc32": ([numcodecs.Shuffle(elementsize=2)], numcodecs.CRC32())}
for name, (filters, comp) in codecs.items():
    path = root + "/" + name
    if mode == "write":
        z = zarr.open(path, mode="w", shape=(37, 23), chunks=(10, 8), dtype="<i4", compressor=comp, filters=filters)
        z[:] = np.random.default_rng(len(name)).integers(-2**31, 2**31, size=(37, 23), dtype="<i4")
        np.save(path + ".npy", z[:])
    else:
        z = zarr.open(path, mode="r")
        if (z.compressor is None) != (comp is None) or not (z[:] == np.load(path + ".npy")).all():
            raise SystemExit("%s: zarr-python reads otherwise" % name)
print("ok")
`
	run := func(mode, root string) {
		t.Helper()
		if out, err := exec.Command(py, "-c", script, mode, root).CombinedOutput(); err != nil {
			t.Fatalf("%s: %v\n%s", mode, err, out)
		}
	}
	run("write", filepath.Join(dir, "py"))
	ps, err := NewDirStore(filepath.Join(dir, "py"))
	if err != nil {
		t.Fatal(err)
	}
	ks, err := NewDirStore(filepath.Join(dir, "kvik"))
	if err != nil {
		t.Fatal(err)
	}
	for _, name := range []string{"crc32", "adler32", "adler32-zlib", "crc32-zlib", "shuffle-zlib", "shuffle2-crc32"} {
		a, err := Open(bg, ps, name)
		if err != nil {
			t.Fatal(err)
		}
		want := mustRead(t, filepath.Join(dir, "py", name+".npy"))
		want = want[len(want)-37*23*4:] // the .npy's data, after its header
		got := make([]byte, len(want))
		if err := a.ReadRegion(bg, []int{0, 0}, []int{37, 23}, got); err != nil || !bytes.Equal(got, want) {
			t.Fatalf("%s: kvik reads otherwise than zarr-python wrote (%v)", name, err)
		}
		m := *a.Metadata()
		b, err := Create(bg, ks, name, m)
		if err != nil {
			t.Fatal(err)
		}
		if err := b.WriteRegion(bg, []int{0, 0}, []int{37, 23}, got); err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(filepath.Join(dir, "kvik", name+".npy"), mustRead(t, filepath.Join(dir, "py", name+".npy")), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	run("read", filepath.Join(dir, "kvik"))
}

// TestChecksumCodecs round-trips random bytes of random lengths (odd
// ones for Fletcher-32's last byte) through each checksum codec, its
// checksum first or last as configured, and fails every changed byte,
// a cut chunk and a bad location; v3 takes numcodecs' checksums by
// their numcodecs. names and their bare ids alike.
func TestChecksumCodecs(t *testing.T) {
	rng := rand.New(rand.NewPCG(21, 22))
	for _, c := range []struct {
		name string
		cfg  map[string]any
		end  bool
	}{
		{"crc32", nil, false}, {"crc32", map[string]any{"location": "end"}, true},
		{"adler32", map[string]any{"location": "start"}, false}, {"adler32", map[string]any{"location": "end"}, true},
		{"fletcher32", nil, true},
	} {
		codec, err := newBytesCodec(Codec{Name: c.name, Configuration: c.cfg}, DataType{Kind: Uint, Size: 1}, false)
		if err != nil {
			t.Fatal(err)
		}
		for range 20 {
			src := make([]byte, rng.IntN(3000))
			for i := range src {
				src[i] = byte(rng.Uint32())
			}
			enc, err := codec.encode(src, nil)
			if err != nil || len(enc) != len(src)+4 {
				t.Fatalf("%s: %d bytes encoded to %d, %v", c.name, len(src), len(enc), err)
			}
			payload := enc[4:]
			if c.end {
				payload = enc[:len(src)]
			}
			if !bytes.Equal(payload, src) {
				t.Fatalf("%s %v: the bytes are not where the location says", c.name, c.cfg)
			}
			if dec, err := codec.decode(enc, nil, len(src)); err != nil || !bytes.Equal(dec, src) {
				t.Fatalf("%s: %d bytes decoded to %d, %v", c.name, len(src), len(dec), err)
			}
			bad := slices.Clone(enc)
			bad[rng.IntN(len(bad))] ^= byte(1 + rng.IntN(255))
			if _, err := codec.decode(bad, nil, len(src)); !errors.Is(err, ErrCorruptChunk) {
				t.Fatalf("%s: a changed byte: %v", c.name, err)
			}
		}
		if _, err := codec.decode([]byte{1, 2, 3}, nil, 10); !errors.Is(err, ErrCorruptChunk) {
			t.Errorf("%s: 3 bytes: %v", c.name, err)
		}
		for _, name := range []string{c.name, "numcodecs." + c.name} {
			v3, err := newBytesCodec(Codec{Name: name, Configuration: c.cfg}, DataType{Kind: Uint, Size: 1}, true)
			if err != nil || fmt.Sprint(v3) != fmt.Sprint(codec) {
				t.Errorf("v3 %s: %v, %v; want %v", name, v3, err, codec)
			}
		}
	}
	if _, err := newBytesCodec(Codec{Name: "crc32", Configuration: map[string]any{"location": "middle"}}, DataType{Kind: Uint, Size: 1}, false); !errors.Is(err, ErrInvalidMetadata) {
		t.Errorf("location middle: %v", err)
	}
}

// TestLossyFiltersZarrPython: zarr-python 2 stores float arrays through
// numcodecs' FixedScaleOffset (to uint16 and int16), Quantize and
// BitRound, no compressor after them;
// kvik reads every element as zarr-python reads it, and, given the same
// original values, stores the same chunks byte for byte: its rounding is
// NumPy's.
func TestLossyFiltersZarrPython(t *testing.T) {
	py := zarrPython(t)
	dir := t.TempDir()
	const script = `
import sys, zarr, numcodecs, numpy as np
root = sys.argv[1]
rng = np.random.default_rng(7)
arrays = {
    "fso-u2": ("<f8", [numcodecs.FixedScaleOffset(offset=1000, scale=10, dtype="<f8", astype="<u2")], 1000 + rng.random((41, 17)) * 6000),
    "fso-i2": ("<f4", [numcodecs.FixedScaleOffset(offset=-3.5, scale=100, dtype="<f4", astype="<i2")], (rng.random((41, 17)) * 600 - 300).astype("<f4")),
    "quantize-f8": ("<f8", [numcodecs.Quantize(digits=3, dtype="<f8")], rng.normal(size=(41, 17)) * 50),
    "quantize-f4": ("<f4", [numcodecs.Quantize(digits=1, dtype="<f4")], (rng.normal(size=(41, 17)) * 5).astype("<f4")),
    "bitround-f4": ("<f4", [numcodecs.BitRound(keepbits=7)], (rng.normal(size=(41, 17)) * 1e3).astype("<f4")),
    "bitround-f8": ("<f8", [numcodecs.BitRound(keepbits=20)], rng.normal(size=(41, 17)) * 1e-3),
}
for name, (dtype, filters, data) in arrays.items():
    z = zarr.open(root + "/" + name, mode="w", shape=data.shape, chunks=(10, 8), dtype=dtype, compressor=None, filters=filters)
    z[:] = data
    np.save(root + "/" + name + ".orig.npy", data.astype(dtype.replace(">", "<")))
    np.save(root + "/" + name + ".read.npy", z[:].astype(dtype.replace(">", "<")))
`
	s, out := runPythonArrays(t, py, script, dir)
	for _, name := range []string{"fso-u2", "fso-i2", "quantize-f8", "quantize-f4", "bitround-f4", "bitround-f8"} {
		if orig, want := rewritePythonArray(t, s, out, dir, name, []int{41, 17}); bytes.Equal(orig, want) {
			t.Errorf("%s: the filter changed nothing: a test that cannot fail", name)
		}
	}
	// A value a FixedScaleOffset's stored type cannot hold fails the
	// write, where NumPy would wrap it.
	a, err := Open(bg, s, "fso-u2")
	if err != nil {
		t.Fatal(err)
	}
	b, err := Create(bg, out, "wrap", *a.Metadata())
	if err != nil {
		t.Fatal(err)
	}
	big := binary.LittleEndian.AppendUint64(nil, math.Float64bits(1000+7000)) // 70000 > 65535
	if err := b.WriteRegion(bg, []int{0, 0}, []int{1, 1}, big); !errors.Is(err, ErrInvalidRegion) {
		t.Errorf("a value past uint16: %v, want ErrInvalidRegion", err)
	}
}

// runPythonArrays runs the Python script with dir as its argument (it
// writes arrays there) and returns dir's store and a new one to write
// them again in.
func runPythonArrays(t *testing.T, py, script, dir string) (s, out *DirStore) {
	t.Helper()
	if b, err := exec.Command(py, "-c", script, dir).CombinedOutput(); err != nil {
		t.Fatalf("%v\n%s", err, b)
	}
	s, err := NewDirStore(dir)
	if err != nil {
		t.Fatal(err)
	}
	if out, err = NewDirStore(t.TempDir()); err != nil {
		t.Fatal(err)
	}
	return s, out
}

// rewritePythonArray checks array name of the store s in dir, which
// zarr-python wrote beside NAME.orig.npy (the values it was given) and
// NAME.read.npy (what it reads back): kvik reads the latter; writing the
// former into out stores the same chunks, byte for byte. It returns the
// two files' data.
func rewritePythonArray(t *testing.T, s, out *DirStore, dir, name string, shape []int) (orig, read []byte) {
	t.Helper()
	a, err := Open(bg, s, name)
	if err != nil {
		t.Fatal(err)
	}
	n := numElements(shape) * a.DataType().Size
	tail := func(path string) []byte { b := mustRead(t, path); return b[len(b)-n:] }
	read, orig = tail(filepath.Join(dir, name+".read.npy")), tail(filepath.Join(dir, name+".orig.npy"))
	got := make([]byte, n)
	if err := a.ReadRegion(bg, make([]int, len(shape)), shape, got); err != nil || !bytes.Equal(got, read) {
		t.Errorf("%s: kvik reads otherwise than zarr-python (%v)", name, err)
	}
	b, err := Create(bg, out, name, *a.Metadata())
	if err != nil {
		t.Fatal(err)
	}
	if err := b.WriteRegion(bg, make([]int, len(shape)), shape, orig); err != nil {
		t.Fatalf("%s: %v", name, err)
	}
	keys, _ := s.List(bg, name+"/")
	for _, k := range keys {
		if strings.Contains(k, ".z") {
			continue
		}
		mine, err := out.Get(bg, k, nil)
		if theirs := mustRead(t, filepath.Join(dir, k)); err != nil || !bytes.Equal(mine, theirs) {
			t.Errorf("%s: kvik stored %d bytes (%v), zarr-python %d: not the same", k, len(mine), err, len(theirs))
			break
		}
	}
	return orig, read
}

// TestLossyFiltersRefuse: configurations numcodecs would not run (a zero
// scale, a quantize of integers, bitround keeping more bits than the
// float has, a type that is no number), and a stored value the array's
// type cannot hold (their v3 forms: TestV3Filters).
func TestLossyFiltersRefuse(t *testing.T) {
	f8 := DataType{Kind: Float, Size: 8}
	for _, c := range []struct {
		codec Codec
		dt    DataType
		want  error
	}{
		{Codec{Name: "fixedscaleoffset", Configuration: map[string]any{"scale": 0.0, "offset": 1.0, "dtype": "<f8", "astype": "<u1"}}, f8, ErrInvalidMetadata},
		{Codec{Name: "fixedscaleoffset", Configuration: map[string]any{"scale": "x", "dtype": "<f8"}}, f8, ErrInvalidMetadata},
		{Codec{Name: "fixedscaleoffset", Configuration: map[string]any{"scale": 2.0, "dtype": "<M8[s]"}}, f8, ErrUnsupportedCodec},
		{Codec{Name: "fixedscaleoffset", Configuration: map[string]any{"scale": 2.0, "dtype": "<q9"}}, f8, ErrUnsupportedDataType},
		{Codec{Name: "quantize", Configuration: map[string]any{"digits": 2.0, "dtype": "<i4"}}, f8, ErrInvalidMetadata},
		{Codec{Name: "bitround", Configuration: map[string]any{"keepbits": 53.0}}, f8, ErrInvalidMetadata},
		{Codec{Name: "bitround", Configuration: map[string]any{"keepbits": 3.0}}, DataType{Kind: Int, Size: 4}, ErrInvalidMetadata},
		{Codec{Name: "packbits"}, DataType{Kind: Uint, Size: 1}, ErrInvalidMetadata},
		{Codec{Name: "astype", Configuration: map[string]any{"encode_dtype": "<f4"}}, f8, ErrUnsupportedDataType},
	} {
		if _, err := newBytesCodec(c.codec, c.dt, false); !errors.Is(err, c.want) {
			t.Errorf("%v: %v, want %v", c.codec, err, c.want)
		}
	}
	for _, b := range [][]byte{{}, {8, 0xff}, {3}} {
		if _, err := (packBitsCodec{}).decode(b, nil, 100); !errors.Is(err, ErrCorruptChunk) {
			t.Errorf("packbits %x: %v, want ErrCorruptChunk", b, err)
		}
	}
	if _, err := (packBitsCodec{}).decode([]byte{0, 1, 2, 3}, nil, 16); !errors.Is(err, ErrCorruptChunk) {
		t.Errorf("packbits past the limit: %v, want ErrCorruptChunk", err)
	}
	// int16 stored, read back as int8: 300 does not fit.
	c, err := newBytesCodec(Codec{Name: "fixedscaleoffset", Configuration: map[string]any{"scale": 1.0, "offset": 0.0, "dtype": "|i1", "astype": "<i2"}}, DataType{Kind: Int, Size: 1}, false)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := c.decode(binary.LittleEndian.AppendUint16(nil, 300), nil, 10); !errors.Is(err, ErrCorruptChunk) {
		t.Errorf("a stored 300 into int8: %v, want ErrCorruptChunk", err)
	}
	if got, err := c.decode(binary.LittleEndian.AppendUint16(nil, uint16(0xffff&-7)), nil, 10); err != nil || len(got) != 1 || int8(got[0]) != -7 {
		t.Errorf("a stored -7: %v, %v", got, err)
	}
}

// TestPackingFiltersZarrPython: zarr-python 2 stores arrays through
// numcodecs' AsType (float64 as float32, int64 as int16, uint8 as
// float32) and PackBits (bools); kvik reads them as zarr-python does and
// writes the same values to the same chunks, byte for byte. An int64
// that int16 cannot hold fails the write.
func TestPackingFiltersZarrPython(t *testing.T) {
	py := zarrPython(t)
	dir := t.TempDir()
	const script = `
import sys, zarr, numcodecs, numpy as np
root = sys.argv[1]
rng = np.random.default_rng(9)
arrays = {
    "astype-f4": ("<f8", [numcodecs.AsType(encode_dtype="<f4", decode_dtype="<f8")], rng.normal(size=(29, 13)) * 1e5),
    "astype-i2": ("<i8", [numcodecs.AsType(encode_dtype="<i2", decode_dtype="<i8")], rng.integers(-30000, 30000, size=(29, 13))),
    "astype-u1f4": ("|u1", [numcodecs.AsType(encode_dtype="<f4", decode_dtype="|u1")], rng.integers(0, 256, size=(29, 13)).astype("u1")),
    "packbits": ("|b1", [numcodecs.PackBits()], rng.random((29, 13)) < 0.3),
}
for name, (dtype, filters, data) in arrays.items():
    z = zarr.open(root + "/" + name, mode="w", shape=data.shape, chunks=(10, 6), dtype=dtype, compressor=None, filters=filters)
    z[:] = data
    np.save(root + "/" + name + ".orig.npy", data)
    np.save(root + "/" + name + ".read.npy", z[:])
`
	s, out := runPythonArrays(t, py, script, dir)
	for _, name := range []string{"astype-f4", "astype-i2", "astype-u1f4", "packbits"} {
		rewritePythonArray(t, s, out, dir, name, []int{29, 13})
	}
	a, err := Open(bg, out, "astype-i2")
	if err != nil {
		t.Fatal(err)
	}
	if err := a.WriteRegion(bg, []int{0, 0}, []int{1, 1}, binary.LittleEndian.AppendUint64(nil, 40000)); !errors.Is(err, ErrInvalidRegion) {
		t.Errorf("40000 as int16: %v, want ErrInvalidRegion", err)
	}
}
