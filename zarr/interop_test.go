package zarr

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"math"
	"math/rand/v2"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"testing"

	"github.com/klauspost/compress/zstd"

	"github.com/kvikgo/kvik/internal/testkit/pyfind"
)

// zarrPython returns a Python interpreter that imports zarr 2 and
// numcodecs (Debian's python3-zarr, python3-numcodecs). Without one the
// test skips with the reason, except under CI=true, where it fails: CI
// installs them; the GPU machine, which has CI set for its other tests
// but no zarr-python and no network, opts out with
// KVIK_TEST_ZARR_PYTHON=skip.
func zarrPython(t *testing.T) string {
	t.Helper()
	zarr2 := func(last string) string {
		if !strings.HasPrefix(last, "2.") {
			return fmt.Sprintf("zarr %s (the interop script needs zarr-python 2)", last)
		}
		return ""
	}
	return pyfind.Find(t, "import zarr, numcodecs, numpy; print(zarr.__version__, numcodecs.__version__, numpy.__version__)",
		"zarr, numcodecs, numpy", zarr2, "KVIK_TEST_ZARR_PYTHON",
		"zarr-python interop needs python3 with zarr-python 2 and numcodecs (apt-get install python3-zarr python3-numcodecs)")
}

// testSeed returns a random seed, or KVIK_TEST_SEED's, and logs it.
func testSeed(t *testing.T) uint64 {
	seed := uint64(rand.Int64())
	if s := os.Getenv("KVIK_TEST_SEED"); s != "" {
		seed, _ = strconv.ParseUint(s, 10, 64)
	}
	t.Logf("seed %d (KVIK_TEST_SEED repeats it)", seed)
	return seed
}

// runInterop runs testdata/interop.py with args and returns its stdout.
func runInterop(t *testing.T, py string, args ...string) ([]byte, error) {
	t.Helper()
	script, err := filepath.Abs(filepath.Join("testdata", "interop.py"))
	if err != nil {
		t.Fatal(err)
	}
	return execPython(py, script, args...)
}

// interopArray is an array of a manifest: its store (kvik's manifest
// only), path, dtype as NumPy spells it, shape, the file holding its
// values (little-endian, C order) and attributes.
type interopArray struct {
	Store  string         `json:"store,omitempty"`
	Path   string         `json:"path"`
	DType  string         `json:"dtype"`
	Shape  []int          `json:"shape"`
	Expect string         `json:"expect"`
	Attrs  map[string]any `json:"attrs,omitempty"`
}

// sameValues reports whether a and b hold the same elements of t, NaN
// equal to NaN, and otherwise where they first differ.
func sameValues(t DataType, a, b []byte) (bool, string) {
	if len(a) != len(b) {
		return false, fmt.Sprintf("%d bytes, want %d", len(a), len(b))
	}
	es := t.Size
	if t.Kind == Complex { // each part a float
		t, es = DataType{Kind: Float, Size: t.Size / 2}, t.Size/2
	}
	for i := 0; i < len(a); i += es {
		x, y := a[i:i+es], b[i:i+es]
		if bytes.Equal(x, y) {
			continue
		}
		if t.Kind == Float && math.IsNaN(loadFloat(x, false)) && math.IsNaN(loadFloat(y, false)) {
			continue
		}
		return false, fmt.Sprintf("element %d: %x, want %x", i/es, x, y)
	}
	return true, ""
}

// readBack compares an array read back (little-endian elements) with what was written into it:
// byte for byte where m's filters are lossless, within deltaSlack for a
// float Delta, not at all where they are not lossless.
func readBack(m *Metadata, got, want []byte) (bool, string) {
	if !lossless(m) {
		return true, ""
	}
	slack := deltaSlack(m, want)
	if slack == 0 {
		return sameValues(m.DataType, got, want)
	}
	if len(got) != len(want) {
		return false, fmt.Sprintf("%d bytes, want %d", len(got), len(want))
	}
	es := m.DataType.Size
	mant := map[int]int{2: 10, 4: 23, 8: 52}[es]
	for i := 0; i < len(got); i += es {
		x, y := loadFloat(got[i:i+es], false), loadFloat(want[i:i+es], false)
		if x == y || math.IsNaN(x) && math.IsNaN(y) || math.Abs(x-y) <= slack+math.Ldexp(math.Abs(y), -mant) {
			continue
		}
		return false, fmt.Sprintf("element %d: %v, want %v (slack %g)", i/es, x, y, slack)
	}
	return true, ""
}

// deltaSlack is how far an element of a float array with a Delta filter
// whose astype is wider than dtype may come back from what was written
// (want): the decoder's running sum is kept in astype, so an element
// that follows a much larger one in chunk order is rounded to astype's
// precision at that larger one (numcodecs sums the same way); within a
// few of astype's units in the last place of the array's largest
// magnitude. 0 for other arrays.
func deltaSlack(m *Metadata, want []byte) float64 {
	for _, f := range m.Filters {
		if f.Name != "delta" || m.DataType.Kind != Float {
			continue
		}
		d, err := newDelta(f.Configuration, m.DataType)
		if err != nil {
			return 0
		}
		as := d.(deltaCodec).as
		if as.Size <= m.DataType.Size {
			continue
		}
		var most float64
		es := m.DataType.Size
		for i := 0; i+es <= len(want); i += es {
			if v := math.Abs(loadFloat(want[i:i+es], false)); !math.IsInf(v, 0) && !math.IsNaN(v) {
				most = max(most, v)
			}
		}
		return 4 * most * math.Ldexp(1, -map[int]int{4: 24, 8: 53}[as.Size])
	}
	return 0
}

// lossless reports whether m's filters give back what was written: a
// float Delta only with an astype wider than dtype (exact where the data
// stay within a range where differences are, else within deltaSlack) and
// a finite fill value (a chunk written in part holds it), an integer
// Delta only with an astype at least as wide.
func lossless(m *Metadata) bool {
	if f := loadFloat(m.fill, false); m.DataType.Kind == Float && len(m.Filters) > 0 && (math.IsNaN(f) || math.IsInf(f, 0)) {
		return false
	}
	for _, f := range m.Filters {
		if f.Name != "delta" {
			continue
		}
		d, err := newDelta(f.Configuration, m.DataType)
		if err != nil {
			return false
		}
		dc := d.(deltaCodec)
		if dc.dt.Kind == Float && dc.as.Size <= dc.dt.Size || dc.as.Size < dc.dt.Size {
			return false
		}
	}
	return true
}

// interopValues returns n random elements of t, never all zero. Floats
// are random at full precision with NaN, ±Inf and -0 among them when
// specials is set; without, they are 1 to 1000 in magnitude, so that a
// Delta with a wider astype stores exact differences.
func interopValues(rng *rand.Rand, t DataType, n int, specials bool) []byte {
	if t.isString() {
		return stringValues(rng, t, n)
	}
	if t.Kind == Complex { // real and imaginary parts, each a float's
		half := DataType{Kind: Float, Size: t.Size / 2}
		re, im := interopValues(rng, half, n, specials), interopValues(rng, half, n, specials)
		b := make([]byte, 0, n*t.Size)
		for i := range n {
			b = append(append(b, re[i*half.Size:(i+1)*half.Size]...), im[i*half.Size:(i+1)*half.Size]...)
		}
		return b
	}
	b := make([]byte, n*t.Size)
	for i := 0; i < n; i++ {
		e := b[i*t.Size : (i+1)*t.Size]
		switch t.Kind {
		case Bool:
			e[0] = byte(rng.IntN(2))
		case Float:
			f := rng.NormFloat64() * 100 * []float64{1e-3, 1}[rng.IntN(2)]
			if !specials {
				f = (1 + 999*rng.Float64()) * float64(1-2*rng.IntN(2))
			}
			putFloat(e, f)
		default:
			putUint(e, rng.Uint64()|1)
		}
	}
	if t.Kind == Bool {
		b[rng.IntN(n)] = 1
	}
	if t.Kind == Float && specials && n > 4 {
		for _, f := range []float64{math.NaN(), math.Inf(1), math.Inf(-1), math.Copysign(0, -1)} {
			putFloat(b[rng.IntN(n)*t.Size:][:t.Size], f)
		}
	}
	return b
}

// randomBox returns a random non-empty box of shape.
func randomBox(rng *rand.Rand, shape []int) (start, stop []int) {
	start, stop = make([]int, len(shape)), make([]int, len(shape))
	for d, s := range shape {
		start[d] = rng.IntN(s)
		stop[d] = start[d] + 1 + rng.IntN(s-start[d])
	}
	return start, stop
}

// interopRead reads the whole of a.
func interopRead(t *testing.T, a *Array) ([]byte, error) {
	t.Helper()
	out := make([]byte, numElements(a.Shape())*a.DataType().Size)
	return out, a.ReadRegion(bg, make([]int, len(a.Shape())), a.Shape(), out)
}

// TestZarrPythonInterop checks Zarr v2 stores both ways against
// zarr-python (testdata/interop.py): kvik reads what zarr-python wrote
// (from a directory, and over HTTP from consolidated metadata) and
// lists the same arrays; kvik writes into arrays zarr-python created,
// and creates a store of its own, with consolidated metadata, that
// zarr-python then reads, consolidated and not, comparing every value
// and attribute. The matrix: 14 dtypes in both byte orders (complex64
// and complex128 too), zlib, gzip,
// zstd, LZ4 and blosc with each inner compressor and shuffle, Delta filters
// with narrower and wider astypes, fill values incl. NaN, ±Infinity and
// null, C and F order, both separators, ranks 0 to 5, partial writes
// (through a store WithProcessLocks), nested groups.
func TestZarrPythonInterop(t *testing.T) {
	py := zarrPython(t)
	seed := testSeed(t)
	rng := rand.New(rand.NewPCG(seed, 27))
	dir := t.TempDir()
	if _, err := runInterop(t, py, "write", dir, strconv.FormatUint(seed%(1<<31), 10)); err != nil {
		t.Fatal(err)
	}
	var pm struct {
		Arrays   []interopArray    `json:"arrays"`
		Tree     []string          `json:"tree"`
		Versions map[string]string `json:"versions"`
	}
	if err := json.Unmarshal(mustRead(t, filepath.Join(dir, "py-manifest.json")), &pm); err != nil {
		t.Fatal(err)
	}
	t.Logf("zarr-python wrote %d arrays (versions %v)", len(pm.Arrays), pm.Versions)
	if len(pm.Arrays) < 250 || len(pm.Tree) >= len(pm.Arrays) {
		t.Fatalf("%d arrays, %d in zarr-python's tree", len(pm.Arrays), len(pm.Tree))
	}
	pyDir := filepath.Join(dir, "py.zarr")
	s, err := NewDirStore(pyDir)
	if err != nil {
		t.Fatal(err)
	}

	// zarr-python writes, kvik reads: whole arrays and random regions.
	want := make([][]byte, len(pm.Arrays))
	for i, pa := range pm.Arrays {
		a, err := Open(bg, s, pa.Path)
		if err != nil {
			t.Errorf("%s: %v", pa.Path, err)
			continue
		}
		if got := a.Metadata().v2DType(); got != pa.DType || !slices.Equal(a.Shape(), pa.Shape) {
			t.Errorf("%s: %s %v, want %s %v", pa.Path, got, a.Shape(), pa.DType, pa.Shape)
			continue
		}
		want[i] = mustRead(t, filepath.Join(dir, pa.Expect))
		got, err := interopRead(t, a)
		if ok, why := sameValues(a.DataType(), got, want[i]); err != nil || !ok {
			t.Errorf("%s (%s): %v %s", pa.Path, a.Metadata().v2DType(), err, why)
			continue
		}
		if len(pa.Shape) > 0 {
			start, stop := randomBox(rng, pa.Shape)
			ref := model{shape: pa.Shape, es: a.DataType().Size, buf: want[i]}
			got := make([]byte, len(ref.region(start, stop)))
			if err := a.ReadRegion(bg, start, stop, got); err != nil {
				t.Errorf("%s region %v-%v: %v", pa.Path, start, stop, err)
			} else if ok, why := sameValues(a.DataType(), got, ref.region(start, stop)); !ok {
				t.Errorf("%s region %v-%v: %s", pa.Path, start, stop, why)
			}
		}
	}
	if paths, err := ArrayPaths(bg, s); err != nil || !slices.Equal(paths, pm.Tree) {
		t.Errorf("ArrayPaths: %v, %d paths, zarr-python's tree has %d: %s", err, len(paths), len(pm.Tree), pathsDiff(paths, pm.Tree))
	}

	// The same over HTTP, from zarr-python's consolidated metadata.
	web := httptest.NewServer(http.FileServer(http.Dir(pyDir)))
	defer web.Close()
	rs, err := OpenURL(bg, web.URL)
	if err != nil || !rs.Consolidated() {
		t.Fatalf("HTTP: %v, consolidated %v", err, rs != nil && rs.Consolidated())
	}
	defer rs.Close()
	if paths, err := ArrayPaths(bg, rs); err != nil || !slices.Equal(paths, pm.Tree) {
		t.Errorf("ArrayPaths over HTTP: %v: %s", err, pathsDiff(paths, pm.Tree))
	}
	for i := 0; i < len(pm.Arrays); i += 7 {
		pa := pm.Arrays[i]
		a, err := Open(bg, rs, pa.Path)
		if err != nil {
			t.Errorf("HTTP %s: %v", pa.Path, err)
			continue
		}
		got, err := interopRead(t, a)
		if ok, why := sameValues(a.DataType(), got, want[i]); err != nil || !ok {
			t.Errorf("HTTP %s: %v %s", pa.Path, err, why)
		}
	}
	if t.Failed() {
		return
	}

	// kvik writes into every third array zarr-python created, with
	// process locks (whose lock files zarr-python must read past).
	ls, err := NewDirStore(pyDir, WithProcessLocks())
	if err != nil {
		t.Fatal(err)
	}
	var km []interopArray
	expect := func(store, path string, m *Metadata, b []byte, attrs map[string]any) {
		name := filepath.Join("expect", "kvik", strconv.Itoa(len(km))+".bin")
		if err := os.MkdirAll(filepath.Join(dir, "expect", "kvik"), 0o755); err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(filepath.Join(dir, name), b, 0o644); err != nil {
			t.Fatal(err)
		}
		shape := m.Shape
		if shape == nil {
			shape = []int{}
		}
		km = append(km, interopArray{Store: store, Path: path, DType: m.v2DType(), Shape: shape, Expect: name, Attrs: attrs})
	}
	refused := 0
	for i := 0; i < len(pm.Arrays); i += 3 {
		pa := pm.Arrays[i]
		a, err := Open(bg, ls, pa.Path)
		if err != nil {
			t.Fatal(err)
		}
		m := a.Metadata()
		ref := model{shape: pa.Shape, es: m.DataType.Size, buf: want[i]}
		start, stop := randomBox(rng, pa.Shape)
		specials := len(m.Filters) == 0
		src := interopValues(rng, m.DataType, len(ref.region(start, stop))/m.DataType.Size, specials)
		err = a.WriteRegion(bg, start, stop, src)
		// A read-only codec refuses the write, unless the chunks it
		// touches come out all fill value (deleted, nothing to encode;
		// checked with the others below).
		if c := m.Compressor; c != nil && (c.Configuration["cname"] == "blosclz" || c.Name == "bz2") && err != nil {
			if !errors.Is(err, ErrUnsupportedCodec) {
				t.Errorf("%s: writing %v: %v, want ErrUnsupportedCodec", pa.Path, c, err)
			}
			refused++
			continue
		}
		if err != nil {
			t.Errorf("%s: write %v-%v: %v", pa.Path, start, stop, err)
			continue
		}
		ref.write(start, stop, src)
		got, err := interopRead(t, a)
		if err != nil {
			t.Errorf("%s: read back: %v", pa.Path, err)
			continue
		}
		if ok, why := readBack(m, got, ref.buf); !ok {
			t.Errorf("%s (%s, filters %v): read back: %s", pa.Path, m.v2DType(), m.Filters, why)
		}
		expect("py.zarr", pa.Path, m, got, nil)
	}
	if refused == 0 {
		t.Errorf("no blosclz or bz2 array among those written into")
	}

	// kvik creates a store of its own.
	kDir := filepath.Join(dir, "kvik.zarr")
	ks, err := NewDirStore(kDir)
	if err != nil {
		t.Fatal(err)
	}
	var kvikPaths []string
	for i, spec := range kvikSpecs(rng) {
		path := fmt.Sprintf("%sk%d", []string{"", "g1/", "g1/g2/", "g1/g2/g3/", "g4/"}[i%5], i)
		a, err := Create(bg, ks, path, spec)
		if err != nil {
			t.Fatalf("create %s %+v: %v", path, spec, err)
		}
		m := a.Metadata()
		ref := model{shape: m.Shape, es: m.DataType.Size, buf: chunkFill(m.fill, m.Shape)}
		boxes := 1
		if len(m.Shape) > 0 && rng.IntN(3) == 0 {
			boxes = 2
		}
		for range boxes {
			start, stop := make([]int, len(m.Shape)), slices.Clone(m.Shape)
			if boxes > 1 {
				start, stop = randomBox(rng, m.Shape)
			}
			src := interopValues(rng, m.DataType, len(ref.region(start, stop))/m.DataType.Size, len(m.Filters) == 0)
			if err := a.WriteRegion(bg, start, stop, src); err != nil {
				t.Fatalf("%s: write: %v", path, err)
			}
			ref.write(start, stop, src)
		}
		got, err := interopRead(t, a)
		if err != nil {
			t.Fatalf("%s: read back: %v", path, err)
		}
		if ok, why := readBack(m, got, ref.buf); !ok {
			t.Errorf("%s (%s, filters %v): read back: %s", path, m.v2DType(), m.Filters, why)
		}
		var attrs map[string]any
		if m.Attributes != nil {
			b, _ := json.Marshal(m.Attributes)
			json.Unmarshal(b, &attrs)
		}
		expect("kvik.zarr", path, m, got, attrs)
		kvikPaths = append(kvikPaths, path)
	}
	slices.Sort(kvikPaths)
	if paths, err := ArrayPaths(bg, ks); err != nil || !slices.Equal(paths, kvikPaths) {
		t.Fatalf("ArrayPaths of kvik's store: %v: %s", err, pathsDiff(paths, kvikPaths))
	}
	if err := Consolidate(bg, ks); err != nil {
		t.Fatal(err)
	}
	b, err := json.Marshal(map[string]any{"arrays": km, "trees": map[string][]string{"py.zarr": pm.Tree, "kvik.zarr": kvikPaths}})
	if err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(dir, "kvik-manifest.json"), b, 0o644); err != nil {
		t.Fatal(err)
	}

	// zarr-python reads it all, consolidated and not.
	out, err := runInterop(t, py, "check", dir)
	var res struct {
		Checked  int      `json:"checked"`
		Failures []string `json:"failures"`
	}
	if jerr := json.Unmarshal(out, &res); jerr != nil {
		t.Fatalf("%v; output %q: %v", err, out, jerr)
	}
	for i, f := range res.Failures {
		if i == 40 {
			t.Errorf("... and %d more", len(res.Failures)-i)
			break
		}
		t.Errorf("zarr-python: %s", f)
	}
	wantChecked := 0
	for _, a := range km {
		wantChecked++
		if slices.Contains(map[string][]string{"py.zarr": pm.Tree, "kvik.zarr": kvikPaths}[a.Store], a.Path) {
			wantChecked++ // consolidated and not
		}
	}
	if res.Checked != wantChecked {
		t.Errorf("zarr-python checked %d arrays, want %d (%v)", res.Checked, wantChecked, err)
	}
	t.Logf("kvik wrote into %d of zarr-python's arrays (%d blosclz or bz2 refused) and created %d; zarr-python read them %d times", len(km)-len(kvikPaths), refused, len(kvikPaths), res.Checked)
}

// pathsDiff describes how got differs from want.
func pathsDiff(got, want []string) string {
	var extra, missing []string
	for _, p := range got {
		if !slices.Contains(want, p) {
			extra = append(extra, p)
		}
	}
	for _, p := range want {
		if !slices.Contains(got, p) {
			missing = append(missing, p)
		}
	}
	return fmt.Sprintf("extra %q, missing %q", extra, missing)
}

// interopDTypes are the v2 dtypes of the interop matrix: 14 types, both
// byte orders, datetime64 and timedelta64 of several units and scales,
// and fixed-length bytes and UTF-32 strings (void is tested only here:
// zarr-python 2.13 fills a V array with what memory held).
var interopDTypes = []string{"|b1", "|i1", "|u1", "<i2", ">i2", "<u2", ">u2", "<i4", ">i4", "<u4", ">u4", "<i8", ">i8", "<u8", ">u8", "<f2", ">f2", "<f4", ">f4", "<f8", ">f8",
	"<c8", ">c8", "<c16", ">c16", "<M8[ns]", ">M8[s]", "<M8[10us]", ">M8[D]", "<m8[ms]", ">m8[3h]", "<m8[us]", "|S1", "|S7", "<U3", ">U5"}

// kvikSpecs returns the arrays kvik creates for zarr-python to read:
// for each dtype every compressor kvik writes but blosc, and blosc with
// each shuffle (the inner compressor turning), a Delta of the same type,
// and Deltas with wider and narrower astypes; random shapes of rank 0 to
// 5, chunks, order, separator and fill value; non-ASCII attributes on
// some.
func kvikSpecs(rng *rand.Rand) []Metadata {
	level := func(name string, l int) *Codec {
		return &Codec{Name: name, Configuration: map[string]any{"level": l}}
	}
	comps := func(k int) []*Codec {
		lz4 := func(acceleration int) *Codec {
			return &Codec{Name: "lz4", Configuration: map[string]any{"acceleration": acceleration}}
		}
		out := []*Codec{nil, level("zlib", 1), level("zlib", 9), level("gzip", 5), level("zstd", 1), level("zstd", 5), level("zstd", -3),
			lz4(1), lz4(12)}
		cnames := []string{"lz4", "lz4hc", "zstd", "zlib"}
		for j, shuffle := range []int{0, 1, 2, -1} {
			out = append(out, &Codec{Name: "blosc", Configuration: map[string]any{
				"cname": cnames[(k+j)%len(cnames)], "clevel": 1 + (k+j)%9, "shuffle": shuffle, "blocksize": 0}})
		}
		return out
	}
	type spec struct {
		dtype string
		comp  *Codec
		delta []string
	}
	var specs []spec
	for k, dt := range interopDTypes {
		for _, c := range comps(k) {
			specs = append(specs, spec{dt, c, nil})
		}
		if dt != "|b1" && !strings.ContainsRune("cmMSU", rune(dt[1])) { // no Delta of bools, complex numbers, times or strings
			specs = append(specs, spec{dt, comps(k)[k%11], []string{dt, dt}})
		}
	}
	for _, p := range [][]string{{"<f4", "<f8"}, {"<f2", "<f4"}, {"<f2", "<f8"}, {">f4", "<f8"}, {"<f8", "<f4"}, {"<f4", "<f2"},
		{"<i2", "<i4"}, {"|u1", "<u2"}, {">i4", ">i8"}, {"<i4", "<i2"}, {"<u4", "<i8"}, {"|i1", "<i2"}} {
		for _, c := range []*Codec{nil, level("zstd", 1), {Name: "blosc", Configuration: map[string]any{"cname": "lz4", "clevel": 5, "shuffle": 1}}} {
			specs = append(specs, spec{p[0], c, p})
		}
	}
	out := make([]Metadata, len(specs))
	for i, sp := range specs {
		dt, big, err := parseV2Type(sp.dtype)
		if err != nil {
			panic(err)
		}
		m := Metadata{ZarrFormat: 2, DataType: dt, BigEndian: big, Compressor: sp.comp,
			Order: "CF"[rng.IntN(2)], Separator: []string{".", "/"}[rng.IntN(2)]}
		if sp.delta != nil {
			m.Filters = []Codec{{Name: "delta", Configuration: map[string]any{"dtype": sp.delta[0], "astype": sp.delta[1]}}}
		}
		if ndim := rng.IntN(6); i%10 != 0 {
			m.Shape, m.ChunkShape = interopShape(rng, ndim)
		}
		fills := []any{nil, 0}
		switch dt.Kind {
		case Bool:
			fills = []any{nil, true, false}
		case Float:
			fills = append(fills, loadFloat(interopValues(rng, dt, 1, false), false))
			if sp.delta == nil { // a Delta over NaN or ±Inf gives NaN
				fills = append(fills, "NaN", "Infinity", "-Infinity")
			}
		case Complex:
			// Imaginary parts finite: zarr-python 2 reads [re, im] as
			// re + 1j*im, which makes the real part NaN for an infinite im.
			fills = append(fills, fillJSON(dt, interopValues(rng, dt, 1, false)), []any{"NaN", 1.5}, []any{"-Infinity", 2})
		case DateTime, TimeDelta:
			fills = append(fills, fillJSON(dt, interopValues(rng, dt, 1, false)), "NaT")
		case Bytes, Raw:
			fills = []any{nil, interopValues(rng, dt, 1, false)}
		case Unicode:
			fills = []any{nil, "", fillJSON(dt, interopValues(rng, dt, 1, false)), 0}
		default:
			fills = append(fills, fillJSON(dt, interopValues(rng, dt, 1, false)))
		}
		m.FillValue = fills[rng.IntN(len(fills))]
		if i%7 == 0 {
			m.Attributes = map[string]any{"name": fmt.Sprint("k", i), "unit": "°C", "note": "température ✓ 𝄞 \u2028 \"q\" <&>",
				"n": 3, "list": []any{1, 2.5, "x", nil}, "nested": map[string]any{"ü": true}}
		}
		out[i] = m
	}
	return out
}

// interopShape returns a shape of rank ndim and chunks that do not always
// divide it: at most 4000 elements in at most 24 chunks.
func interopShape(rng *rand.Rand, ndim int) (shape, chunks []int) {
	for {
		shape, chunks = make([]int, ndim), make([]int, ndim)
		n, grid := 1, 1
		for d := range shape {
			shape[d] = 1 + rng.IntN([]int{1, 200, 40, 14, 8, 6}[ndim])
			chunks[d] = 1 + rng.IntN(shape[d]+2)
			n *= shape[d]
			grid *= (shape[d] + chunks[d] - 1) / chunks[d]
		}
		if n <= 4000 && grid <= 24 {
			return shape, chunks
		}
	}
}

// TestDeltaNumcodecs checks the delta filter against numcodecs 0.11
// (Delta.encode and Delta.decode of the arrays below, little-endian
// hex): decoding sums floats in the wider of dtype and astype, rounding
// each partial sum to dtype, as np.cumsum(enc, out=dec) does. Encoding
// gives numcodecs' bytes unless astype is wider than dtype; then the
// exact differences, which read back exactly.
func TestDeltaNumcodecs(t *testing.T) {
	for _, c := range []struct{ dtype, astype, data, enc, dec string }{
		// zarr-python's Delta(dtype='<f4', astype='<f8') of [0.1, 0.3, 0.1].
		{"<f4", "<f8", "cdcccc3d9a99993ecdcccc3d", "000000a09999b93f000000c09999c93f000000c09999c9bf", "cdcccc3d9a99993ecdcccc3d"},
		{"<f4", "<f8", "c391a03f62619b4214f07c3a07262dc1d9f45d3fdec189bc36a93dc315265740", "000000603812f43f00000060e31b5340000000801c6c53c0000000603fa525c0000000a0aa602740000000005d48ecbf000000009db467c0000000c0b9206840", "c391a03f62619b4200187c3a0b262dc1a6f45d3f40c889bc36a93dc3f0255740"},
		{"<f2", "<f4", "fdb6ffd7b18ffcc95cbf74a3395e7cc6", "00a0dfbe0000ffc200e0ff4200803fc10000224100a0e93f0020c7430060cac3", "fdb6ffd70012fcc95fbf90a4395e85c6"},
		{"<f2", "<f8", "6a23614ead095acafab4c4a4c45eb9c3", "0000000000a88d3f000000000080394000000000008439c000000000006829c00000000000c828400000000000b8d23f0000000000107b4000000000004c7bc0", "6a23614eb0945aca05b56ba5c45e8bc3"},
		{"<f8", "<f4", "12e59fb5d589d83fdfc81e3f08cc584099b0f7438abd62bf047f44f945ea0140dc0b2c2f026df8bf733eb930b07491bf155a1ddb2f4185c0ca2be0be36910e40", "ae4ec43ef39bc5426e61c6c2ab770f40390671c07b39c13f68082ac409fe2a44", "000000c0d589d83f0000c03508cc58400000000020c562bf0000001844ea014000000010066df8bf00000000ac7591bf000058eb2f4185c0000000a834910e40"},
		{"<f4", "<f2", "ccea693dc80e9f42133489ba655e93404f10b63fa2d890bdec77264491d8b83f", "4f2bf854f8d49b445ec2f9bd346131e1", "00e0693d3c1d9f4200e0693dc0339540004fbd3f008068bc187f26440030be3f"},
		{"<f4", "<f4", "ca7384bd774cfac24e6d9439fdfb2cc0f71d1a3fdf839f3d48d1bf446f9e20c0", "ca7384bd5a2bfac29c4cfa42a0002dc07b8353407b2d06bfcacebf449721c0c4", "ca7384bd774cfac20000943900fc2cc0ec1d1a3f88839f3d48d1bf44009e20c0"},
	} {
		hexBytes := func(s string) []byte {
			b := make([]byte, len(s)/2)
			for i := range b {
				v, err := strconv.ParseUint(s[2*i:2*i+2], 16, 8)
				if err != nil {
					t.Fatal(err)
				}
				b[i] = byte(v)
			}
			return b
		}
		name := c.dtype + "<-" + c.astype
		dt, _, _ := parseV2Type(c.dtype)
		d, err := newDelta(map[string]any{"dtype": c.dtype, "astype": c.astype}, dt)
		if err != nil {
			t.Fatal(err)
		}
		data, enc, dec := hexBytes(c.data), hexBytes(c.enc), hexBytes(c.dec)
		got, err := d.decode(enc, nil, 1<<20)
		if err != nil || !bytes.Equal(got, dec) {
			t.Errorf("%s: decode %x, %v, numcodecs %x", name, got, err, dec)
		}
		ours, _ := d.encode(data, nil)
		as, _, _ := parseV2Type(c.astype)
		if as.Size <= dt.Size {
			if !bytes.Equal(ours, enc) {
				t.Errorf("%s: encode %x, numcodecs %x", name, ours, enc)
			}
			continue
		}
		// A float64 holds the difference of any two narrower floats;
		// a float32 not always that of two float16s (values 2^13 apart).
		if back, err := d.decode(ours, nil, 1<<20); as.Size == 8 && (err != nil || !bytes.Equal(back, data)) {
			t.Errorf("%s: own encoding decodes to %x, %v, want %x", name, back, err, data)
		}
		rng := rand.New(rand.NewPCG(27, uint64(dt.Size)))
		data = interopValues(rng, dt, 5000, false) // 1 to 1000 in magnitude
		ours, _ = d.encode(data, nil)
		if back, err := d.decode(ours, nil, 1<<20); err != nil || !bytes.Equal(back, data) {
			t.Errorf("%s: own encoding of values 1 to 1000 does not read back: %v", name, err)
		}
	}
	// Integers: differences wrap in dtype and are sign-extended into a
	// wider astype, as np.diff and NumPy's casts do; sums are modular.
	rng := rand.New(rand.NewPCG(27, 1))
	for _, p := range [][2]string{{"|i1", "<i2"}, {"<i2", "<i8"}, {"<u2", "<u4"}, {"<u4", "<i8"}, {">i4", "<i2"}, {"<i8", ">i8"}} {
		dt, _, _ := parseV2Type(p[0])
		as, _, _ := parseV2Type(p[1])
		d, err := newDelta(map[string]any{"dtype": p[0], "astype": p[1]}, dt)
		if err != nil {
			t.Fatal(err)
		}
		data := interopValues(rng, dt, 200, false)
		enc, _ := d.encode(data, nil)
		dc := d.(deltaCodec)
		for i := 1; i < 200; i++ {
			x := signExtendIf(loadUint(data[i*dt.Size:][:dt.Size], dc.dtBig), dt)
			y := signExtendIf(loadUint(data[(i-1)*dt.Size:][:dt.Size], dc.dtBig), dt)
			want := signExtendIf((x-y)&sizeMask(dt.Size), dt) & sizeMask(as.Size)
			if got := loadUint(enc[i*as.Size:][:as.Size], dc.asBig); got != want {
				t.Fatalf("%s<-%s: difference %d is %#x, want %#x", p[0], p[1], i, got, want)
			}
		}
		back, err := d.decode(enc, nil, 1<<20)
		if as.Size >= dt.Size && (err != nil || !bytes.Equal(back, data)) {
			t.Errorf("%s<-%s: read back %v", p[0], p[1], err)
		}
	}
}

func sizeMask(size int) uint64 { return math.MaxUint64 >> (64 - 8*size) }

func signExtendIf(u uint64, t DataType) uint64 {
	if t.Kind == Int {
		return signExtend(u, t.Size)
	}
	return u
}

// TestZstdContentSize checks that every zstd frame written declares its
// content size, small ones included: numcodecs before 0.16.2 cannot
// decode a frame without it.
func TestZstdContentSize(t *testing.T) {
	rng := rand.New(rand.NewPCG(27, 2))
	for _, n := range []int{1, 2, 17, 100, 255, 256, 257, 1000, 1024, 1025, 4096, 70000, 1 << 20} {
		src := make([]byte, n)
		for i := range src {
			src[i] = byte(rng.IntN(1 + i%7)) // compressible, not constant
		}
		for _, c := range []zstdCodec{{level: 1}, {level: 5, checksum: true}, {level: -3}} {
			enc, err := c.encode(src, nil)
			if err != nil {
				t.Fatal(err)
			}
			var h zstd.Header
			if err := h.Decode(enc); err != nil || !h.HasFCS || h.FrameContentSize != uint64(n) {
				t.Errorf("%d bytes, %+v: header %x: content size %v %d, %v", n, c, enc[:min(len(enc), 8)], h.HasFCS, h.FrameContentSize, err)
			}
			got, err := c.decode(enc, nil, n)
			if err != nil || !bytes.Equal(got, src) {
				t.Errorf("%d bytes, %+v: read back %v", n, c, err)
			}
		}
	}
}

// TestCreateMetadataForZarrPython checks what zarr-python 2.13 needs of
// the documents Create writes: a 0-d array's shape and chunks are [],
// never null; non-ASCII attribute text is \u-escaped (zarr-python before
// 2.14 decodes metadata as ASCII), also in consolidated metadata; a NaN
// fill is NumPy's np.nan.
func TestCreateMetadataForZarrPython(t *testing.T) {
	dir := t.TempDir()
	s, err := NewDirStore(dir)
	if err != nil {
		t.Fatal(err)
	}
	attrs := map[string]any{"unit": "°C", "clef": "𝄞", "note": "température\u2028ok", "ascii": "plain <&>"}
	for _, f := range []int{2, 3} {
		path := fmt.Sprintf("g/scalar%d", f)
		if _, err := Create(bg, s, path, Metadata{ZarrFormat: f, DataType: DataType{Kind: Int, Size: 2}, Attributes: attrs}); err != nil {
			t.Fatal(err)
		}
		key := map[int]string{2: "/.zarray", 3: "/zarr.json"}[f]
		var doc map[string]any
		if err := json.Unmarshal(mustRead(t, filepath.Join(dir, path+key)), &doc); err != nil {
			t.Fatal(err)
		}
		chunks := doc["chunks"]
		if f == 3 {
			chunks = doc["chunk_grid"].(map[string]any)["configuration"].(map[string]any)["chunk_shape"]
		}
		if shape, ok := doc["shape"].([]any); !ok || len(shape) != 0 {
			t.Errorf("v%d 0-d shape %#v, want []", f, doc["shape"])
		}
		if c, ok := chunks.([]any); !ok || len(c) != 0 {
			t.Errorf("v%d 0-d chunks %#v, want []", f, chunks)
		}
	}
	if err := Consolidate(bg, s); err != nil {
		t.Fatal(err)
	}
	for _, key := range []string{"g/scalar2/.zattrs", "g/scalar3/zarr.json", ".zmetadata", "zarr.json"} {
		b := mustRead(t, filepath.Join(dir, key))
		if i := bytes.IndexFunc(b, func(r rune) bool { return r > 0x7f }); i >= 0 {
			t.Errorf("%s: non-ASCII at %d: %q", key, i, b[max(i-10, 0):min(i+10, len(b))])
		}
		if key != "zarr.json" && !bytes.Contains(b, []byte(`\u00b0C`)) || key == "g/scalar2/.zattrs" && !bytes.Contains(b, []byte(`"\ud834\udd1e"`)) {
			t.Errorf("%s: escapes missing: %s", key, b)
		}
	}
	for f := 2; f <= 3; f++ {
		a, err := Open(bg, s, fmt.Sprintf("g/scalar%d", f))
		if err != nil {
			t.Fatal(err)
		}
		if got := a.Metadata().Attributes; fmt.Sprint(got) != fmt.Sprint(attrs) {
			t.Errorf("v%d attributes read back %v, want %v", f, got, attrs)
		}
	}

	// NaN fills, given as "NaN" or as a float, read back as np.nan.
	for _, c := range []struct {
		size int
		fill any
		want string
	}{
		{8, "NaN", "000000000000f87f"}, {8, math.NaN(), "000000000000f87f"}, {8, math.Float64frombits(0x7ff8000000000001), "000000000000f87f"},
		{4, "NaN", "0000c07f"}, {4, float32(math.NaN()), "0000c07f"}, {2, "NaN", "007e"},
	} {
		for _, f := range []int{2, 3} {
			a, err := Create(bg, s, "nan", Metadata{ZarrFormat: f, Shape: []int{3}, ChunkShape: []int{2}, DataType: DataType{Kind: Float, Size: c.size}, FillValue: c.fill})
			if err != nil {
				t.Fatal(err)
			}
			if err := a.WriteRegion(bg, []int{0}, []int{1}, make([]byte, c.size)); err != nil {
				t.Fatal(err)
			}
			got, err := interopRead(t, a)
			if err != nil {
				t.Fatal(err)
			}
			if h := fmt.Sprintf("%x", got); h != strings.Repeat("00", c.size)+strings.Repeat(c.want, 2) {
				t.Errorf("v%d float%d fill %v: %s, want a zero and np.nan (%s) twice", f, 8*c.size, c.fill, h, c.want)
			}
			for _, k := range []string{"nan/.zarray", "nan/.zattrs", "nan/zarr.json", "nan/0", "nan/c/0", "nan/1", "nan/c/1"} {
				s.Delete(bg, k)
			}
		}
	}
}

// TestCreateRefusesUnwritable checks that Create refuses a codec chain
// it can read but not write (blosc with blosclz or snappy, also inside
// shards; bz2) with ErrUnsupportedCodec before writing anything.
func TestCreateRefusesUnwritable(t *testing.T) {
	bz2 := map[string]Metadata{
		"v2 bz2": {ZarrFormat: 2, Compressor: &Codec{Name: "bz2", Configuration: map[string]any{"level": 5}}},
		"v3 bz2": {Codecs: []Codec{{Name: "bytes"}, {Name: "numcodecs.bz2", Configuration: map[string]any{"level": 9}}}},
	}
	for name, m := range bz2 {
		m.Shape, m.ChunkShape, m.DataType = []int{8}, []int{4}, DataType{Kind: Float, Size: 4}
		s, _ := NewDirStore(t.TempDir())
		if _, err := Create(bg, s, "a", m); !errors.Is(err, ErrUnsupportedCodec) || !strings.Contains(err.Error(), "bz2") {
			t.Errorf("%s: %v, want ErrUnsupportedCodec", name, err)
		}
		if keys, _ := s.List(bg, ""); len(keys) != 0 {
			t.Errorf("%s: refused Create wrote %q", name, keys)
		}
	}
	for _, cname := range []string{"blosclz", "snappy"} {
		blosc := Codec{Name: "blosc", Configuration: map[string]any{"cname": cname, "clevel": 5, "shuffle": 1}}
		v3 := Codec{Name: "blosc", Configuration: map[string]any{"cname": cname, "clevel": 5, "shuffle": "shuffle", "typesize": 4}}
		for name, m := range map[string]Metadata{
			"v2 compressor": {ZarrFormat: 2, Compressor: &blosc},
			"v2 filter":     {ZarrFormat: 2, Filters: []Codec{blosc}},
			"v3":            {Codecs: []Codec{{Name: "bytes"}, v3}},
			"v3 sharded":    {Codecs: shardCodecs([]int{2}, false, []Codec{{Name: "bytes"}, v3})},
		} {
			m.Shape, m.ChunkShape, m.DataType = []int{8}, []int{4}, DataType{Kind: Float, Size: 4}
			dir := t.TempDir()
			s, _ := NewDirStore(dir)
			_, err := Create(bg, s, "g/a", m)
			if !errors.Is(err, ErrUnsupportedCodec) || !strings.Contains(err.Error(), cname) {
				t.Errorf("%s %s: %v, want ErrUnsupportedCodec", cname, name, err)
			}
			if keys, _ := s.List(bg, ""); len(keys) != 0 {
				t.Errorf("%s %s: refused Create wrote %q", cname, name, keys)
			}
		}
	}
}
