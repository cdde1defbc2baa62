package npy

import (
	"archive/zip"
	"bytes"
	"context"
	"encoding/binary"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"math/rand/v2"
	"net/http"
	"net/http/httptest"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strings"
	"testing"

	"github.com/kvikgo/kvik"
	"github.com/kvikgo/kvik/internal/formatkit/codecpick"
	"github.com/kvikgo/kvik/internal/hostmem"
	"github.com/kvikgo/kvik/internal/libdeflate"
	"github.com/kvikgo/kvik/internal/testkit/s3test"
)

// eachInflate runs f with deflated members inflated by
// klauspost/compress and, where libdeflate loads, by libdeflate (which
// must load under KVIK_TEST_LIBDEFLATE=require, as in CI).
func eachInflate(t *testing.T, f func(t *testing.T)) {
	old := nativeInflate
	t.Cleanup(func() { nativeInflate = old })
	for _, native := range []bool{false, true} {
		if err := libdeflate.Load(); native && err != nil {
			if os.Getenv("KVIK_TEST_LIBDEFLATE") == "require" {
				t.Fatalf("libdeflate: %v", err)
			}
			t.Logf("deflated members through klauspost/compress only: %v", err)
			continue
		}
		nativeInflate = func() (bool, error) { return native, nil }
		t.Run(map[bool]string{false: "go", true: "libdeflate"}[native], f)
	}
}

// npzExpected is testdata/npz/expected.json: per archive, per key.
type npzExpected struct {
	Generator string                             `json:"generator"`
	Archives  map[string]map[string]expectedFile `json:"archives"`
}

func readNpzExpected(t *testing.T, dir string) npzExpected {
	t.Helper()
	b, err := os.ReadFile(filepath.Join(dir, "expected.json"))
	if err != nil {
		t.Fatal(err)
	}
	var e npzExpected
	if err := json.Unmarshal(b, &e); err != nil || len(e.Archives) == 0 {
		t.Fatalf("expected.json: %v (%d archives)", err, len(e.Archives))
	}
	return e
}

// checkArchive compares a loaded archive with what NumPy loaded; data
// returns an array's bytes.
func checkArchive(t *testing.T, name string, a *Archive, want map[string]expectedFile, data func(*Array) []byte) {
	t.Helper()
	if len(a.Names) != len(want) || len(a.Arrays) != len(want) {
		t.Errorf("%s: arrays %v, want %d", name, a.Names, len(want))
	}
	for k, w := range want {
		arr := a.Arrays[k]
		if arr == nil {
			t.Errorf("%s: no array %q (%v)", name, k, a.Names)
			continue
		}
		d, _ := ParseDtype(w.Descr)
		if arr.Dtype != d || arr.FortranOrder != w.FortranOrder || !slices.Equal(arr.Shape, w.Shape) || sum(data(arr)) != w.Sha256 {
			t.Errorf("%s[%s]: %s fortran=%v shape=%v sha %s, want %+v", name, k, arr.Dtype, arr.FortranOrder, arr.Shape, sum(data(arr))[:8], w)
		}
	}
}

// TestNpzFiles loads the archives NumPy wrote (savez, stored, and
// savez_compressed, deflated) into host memory and compares every array
// with what NumPy loaded; a member that is not a .npy file is listed in
// Other, not read.
func TestNpzFiles(t *testing.T) { eachInflate(t, testNpzFiles) }

func testNpzFiles(t *testing.T) {
	dir := filepath.Join("testdata", "npz")
	e := readNpzExpected(t, dir)
	for name, want := range e.Archives {
		a, err := LoadNpzHost(context.Background(), filepath.Join(dir, name), nil)
		if err != nil {
			t.Errorf("%s: %v", name, err)
			continue
		}
		checkArchive(t, name, a, want, func(arr *Array) []byte { return arr.Data })
		if wantOther := name == "other.npz"; wantOther != slices.Equal(a.Other, []string{"notes.txt"}) {
			t.Errorf("%s: other members %v", name, a.Other)
		}
	}
}

// randNpz returns random arrays of every dtype, with names NumPy allows:
// a path, non-ASCII.
func randNpz(rng *rand.Rand) []NpzArray {
	var arrays []NpzArray
	for i, ds := range allDtypes {
		d, _ := ParseDtype(ds)
		shape := [][]int64{{}, {0}, {int64(1 + rng.IntN(9))}, {3, int64(1 + rng.IntN(5))}, {2, 3, int64(1 + rng.IntN(4))}}[i%5]
		name := fmt.Sprintf("a%02d", i)
		switch i {
		case 3:
			name = "group/c"
		case 4:
			name = "größe"
		}
		data := randData(rng, d, shape)
		// NumPy's load from an archive copies records field by field
		// into memory it does not clear, which check-npz compares with
		// the padding cleared.
		for _, f := range d.Fields() {
			for r := 0; f.Name == "" && r < len(data); r += d.Size() {
				clear(data[r+f.Offset : r+f.Offset+f.Size])
			}
		}
		arrays = append(arrays, NpzArray{name, SaveArray{Dtype: d, Shape: shape, Fortran: len(shape) >= 2 && i%2 == 1, Data: data}})
	}
	return arrays
}

// TestSaveNpz saves random arrays of every dtype as a .npz, plain and
// with every member in ZIP64's records, and checks them loaded back by
// LoadNpzHost, listed and CRC-checked by archive/zip, and loaded by NumPy
// (bench/loaders_xcheck.py check-npz) where python3 has it.
func TestSaveNpz(t *testing.T) {
	rng := rand.New(rand.NewPCG(71, 72))
	dir := t.TempDir()
	arrays := randNpz(rng)
	e := npzExpected{Generator: "kvik npy.SaveNpz", Archives: map[string]map[string]expectedFile{}}
	for _, at := range []uint64{zip64Mark, 1} {
		name := fmt.Sprintf("z%d.npz", at)
		old := zip64At
		zip64At = at
		err := SaveNpz(context.Background(), filepath.Join(dir, name), arrays)
		zip64At = old
		if err != nil {
			t.Fatal(err)
		}
		want := map[string]expectedFile{}
		for _, a := range arrays {
			want[a.Name] = expectedFile{Descr: a.Dtype.String(), FortranOrder: a.Fortran, Shape: a.Shape, Sha256: sum(a.Data)}
		}
		e.Archives[name] = want
		got, err := LoadNpzHost(context.Background(), filepath.Join(dir, name), nil)
		if err != nil {
			t.Fatal(err)
		}
		checkArchive(t, name, got, want, func(arr *Array) []byte { return arr.Data })
		for i, a := range arrays {
			if got.Names[i] != a.Name {
				t.Errorf("%s: names %v, want the order saved", name, got.Names)
				break
			}
		}
		zr, err := zip.OpenReader(filepath.Join(dir, name))
		if err != nil {
			t.Fatal(err)
		}
		for _, f := range zr.File {
			rc, err := f.Open()
			if err == nil {
				_, err = io.Copy(io.Discard, rc) // checks the CRC-32
				rc.Close()
			}
			if err != nil || f.Method != zip.Store {
				t.Errorf("%s: %s: %v (method %d)", name, f.Name, err, f.Method)
			}
		}
		zr.Close()
	}
	b, _ := json.Marshal(e)
	if err := os.WriteFile(filepath.Join(dir, "expected.json"), b, 0o644); err != nil {
		t.Fatal(err)
	}
	if py := numpyPython(t); py != "" {
		out, err := exec.Command(py, "../bench/loaders_xcheck.py", "check-npz", dir).CombinedOutput()
		if err != nil || !strings.Contains(string(out), ": 2 passed, 0 failed") {
			t.Fatalf("NumPy's loads of the saved archives: %v\n%s", err, out)
		}
		t.Logf("%s", strings.TrimSpace(string(out)))
	}
}

// TestSaveNpzRejects checks names and arrays SaveNpz refuses, writing
// nothing.
func TestSaveNpzRejects(t *testing.T) {
	p := filepath.Join(t.TempDir(), "x.npz")
	ok := SaveArray{Dtype: Uint8, Shape: []int64{2}, Data: []byte{1, 2}}
	for _, arrays := range [][]NpzArray{
		{{"", ok}}, {{"a", ok}, {"a", ok}}, {{"a\x00", ok}}, {{"\xff", ok}},
		{{"a", SaveArray{Dtype: Uint8, Shape: []int64{3}, Data: []byte{1, 2}}}}, {{"a", SaveArray{Dtype: "<f3", Shape: []int64{1}, Data: []byte{1, 2, 3}}}},
	} {
		if err := SaveNpz(context.Background(), p, arrays); !errors.Is(err, ErrInvalidArgument) {
			t.Errorf("SaveNpz(%q): %v, want ErrInvalidArgument", arrays[0].Name, err)
		}
	}
	if _, err := os.Lstat(p); !errors.Is(err, fs.ErrNotExist) {
		t.Errorf("a refused save left %s: %v", p, err)
	}
}

// TestNpzFilesURL loads the archives over HTTP (ranged GETs) and checks
// them as TestNpzFiles does.
func TestNpzFilesURL(t *testing.T) {
	dir := filepath.Join("testdata", "npz")
	srv := httptest.NewServer(http.FileServer(http.Dir(dir)))
	defer srv.Close()
	e := readNpzExpected(t, dir)
	for name, want := range e.Archives {
		a, err := LoadNpzHost(context.Background(), srv.URL+"/"+name, nil)
		if err != nil {
			t.Fatalf("%s: %v", name, err)
		}
		checkArchive(t, name, a, want, func(arr *Array) []byte { return arr.Data })
	}
}

// zipOf returns an archive of members written by archive/zip: name,
// method and bytes each.
func zipOf(t *testing.T, members ...any) []byte {
	t.Helper()
	var b bytes.Buffer
	zw := zip.NewWriter(&b)
	for i := 0; i < len(members); i += 3 {
		w, err := zw.CreateHeader(&zip.FileHeader{Name: members[i].(string), Method: members[i+1].(uint16)})
		if err == nil {
			_, err = w.Write(members[i+2].([]byte))
		}
		if err != nil {
			t.Fatal(err)
		}
	}
	if err := zw.Close(); err != nil {
		t.Fatal(err)
	}
	return b.Bytes()
}

// npyBytes returns a .npy file of n float32s.
func npyBytes(n int) []byte {
	data := make([]byte, 4*n)
	for i := range data {
		data[i] = byte(i*7 + 1)
	}
	return append(encodeHeader(Float32, []int64{int64(n)}, false), data...)
}

// TestNpzHostile checks broken and hostile archives: each is a typed
// error, never a panic or an allocation of what a header claims, from
// host and (where a GPU is found) device loads.
func TestNpzHostile(t *testing.T) { eachInflate(t, testNpzHostile) }

func testNpzHostile(t *testing.T) {
	good := zipOf(t, "x.npy", zip.Store, npyBytes(100), "y.npy", zip.Deflate, npyBytes(300))
	dir := t.TempDir()
	cases := map[string]struct {
		b    []byte
		want error
	}{
		"empty":            {nil, ErrInvalidArchive},
		"not a zip":        {npyBytes(4), ErrInvalidArchive},
		"duplicate":        {zipOf(t, "x.npy", zip.Store, npyBytes(2), "x.npy", zip.Store, npyBytes(3)), ErrInvalidArchive},
		"not an npy":       {zipOf(t, "x.npy", zip.Store, []byte("hello, world")), ErrInvalidHeader},
		"npy cut short":    {zipOf(t, "x.npy", zip.Deflate, npyBytes(10)[:100]), ErrInvalidHeader},
		"bad method":       {setMethod(zipOf(t, "x.npy", zip.Store, npyBytes(3)), 12), ErrInvalidArchive},
		"stored bit flip":  {flipIn(good, npyBytes(100), 300), ErrInvalidArchive},
		"inflate bomb":     {setSize(zipOf(t, "x.npy", zip.Deflate, npyBytes(3)), 1<<40), ErrInvalidArchive},
		"inflates short":   {setSize(zipOf(t, "x.npy", zip.Deflate, npyBytes(3)), 500), ErrInvalidArchive},
		"inflates long":    {setSize(zipOf(t, "x.npy", zip.Deflate, npyBytes(30)), 100), ErrInvalidArchive},
		"stored size lies": {setSize(zipOf(t, "x.npy", zip.Store, npyBytes(3)), 1<<40), ErrInvalidArchive},
	}
	for n := 1; n < len(good); n += 97 {
		cases[fmt.Sprint("cut at ", n)] = struct {
			b    []byte
			want error
		}{good[:n], ErrInvalidArchive}
	}
	for name, c := range cases {
		p := filepath.Join(dir, "x.npz")
		if err := os.WriteFile(p, c.b, 0o644); err != nil {
			t.Fatal(err)
		}
		a, err := LoadNpzHost(context.Background(), p, nil)
		if !errors.Is(err, c.want) && !(c.want == ErrInvalidArchive && errors.Is(err, ErrInvalidHeader)) {
			t.Errorf("%s: %v (%v), want %v", name, err, a != nil, c.want)
		}
	}
	if a, err := LoadNpzHost(context.Background(), writeTemp(t, good), nil); err != nil || len(a.Names) != 2 {
		t.Fatalf("the good archive: %v", err)
	}
}

func writeTemp(t *testing.T, b []byte) string {
	p := filepath.Join(t.TempDir(), "a.npz")
	if err := os.WriteFile(p, b, 0o644); err != nil {
		t.Fatal(err)
	}
	return p
}

// flipIn flips a byte of the archive b at offset k into the bytes of
// member (found in b).
func flipIn(b, member []byte, k int) []byte {
	out := bytes.Clone(b)
	out[bytes.Index(b, member)+k] ^= 0x40
	return out
}

// centralRecords returns the offsets of the central directory records
// in b.
func centralRecords(b []byte) []int {
	var at []int
	for i := 0; i+4 <= len(b); i++ {
		if binary.LittleEndian.Uint32(b[i:]) == 0x02014b50 {
			at = append(at, i)
		}
	}
	return at
}

// setMethod sets the compression method of every member (local and
// central records).
func setMethod(b []byte, m uint16) []byte {
	out := bytes.Clone(b)
	for _, i := range centralRecords(out) {
		binary.LittleEndian.PutUint16(out[i+10:], m)
	}
	binary.LittleEndian.PutUint16(out[8:], m)
	return out
}

// setSize sets the uncompressed size the central directory gives every
// member (ZIP64's where it does not fit 32 bits: the record says so and
// an extra field holds it).
func setSize(b []byte, n uint64) []byte {
	out := bytes.Clone(b)
	for _, i := range centralRecords(out) {
		if n < zip64Mark {
			binary.LittleEndian.PutUint32(out[i+24:], uint32(n))
			continue
		}
		// Replace the record's extra field by a ZIP64 one of the size.
		binary.LittleEndian.PutUint32(out[i+24:], zip64Mark)
		nameLen, extraLen := int(binary.LittleEndian.Uint16(out[i+28:])), int(binary.LittleEndian.Uint16(out[i+30:]))
		extra := binary.LittleEndian.AppendUint64(appendUint16s(nil, 1, 8), n)
		rest := out[i+46+nameLen+extraLen:]
		binary.LittleEndian.PutUint16(out[i+30:], uint16(len(extra)))
		head := append(bytes.Clone(out[:i+46+nameLen]), extra...)
		grow := len(extra) - extraLen
		out = append(head, rest...)
		// The end record's directory size grows with it.
		end := bytes.LastIndex(out, []byte{0x50, 0x4b, 0x05, 0x06})
		binary.LittleEndian.PutUint32(out[end+12:], binary.LittleEndian.Uint32(out[end+12:])+uint32(grow))
		return out // one member
	}
	return out
}

// FuzzLoadNpzHost checks that no archive panics and that what loads is
// consistent: every array's bytes are its header's size (LoadNpzHost's
// path from the archive's bytes on), and that ReadNpzHeader's errors are
// typed too.
func FuzzLoadNpzHost(f *testing.F) {
	for _, name := range []string{"plain.npz", "compressed.npz", "other.npz"} {
		b, err := os.ReadFile(filepath.Join("testdata", "npz", name))
		if err != nil {
			f.Fatal(err)
		}
		f.Add(b)
	}
	f.Fuzz(func(t *testing.T, b []byte) {
		if _, err := readNpzHeader(bytes.NewReader(b), int64(len(b))); err != nil && !errors.Is(err, ErrInvalidArchive) &&
			!errors.Is(err, ErrInvalidHeader) && !errors.Is(err, ErrUnsupportedDtype) {
			t.Fatalf("ReadNpzHeader: untyped error: %v", err)
		}
		a, err := loadNpzAt(context.Background(), bytes.NewReader(b), int64(len(b)), nil, -1)
		if err != nil {
			if !errors.Is(err, ErrInvalidArchive) && !errors.Is(err, ErrInvalidHeader) && !errors.Is(err, ErrUnsupportedDtype) && !errors.Is(err, hostmem.ErrTooLarge) {
				t.Fatalf("untyped error: %v", err)
			}
			return
		}
		for k, arr := range a.Arrays {
			if int64(len(arr.Data)) != arr.Size() {
				t.Fatalf("%s: %d bytes for a header of %d", k, len(arr.Data), arr.Size())
			}
		}
	})
}

// TestReadNpzHeader reads the headers of NumPy's archives, stored and
// deflated, without their arrays, and checks each against the load's.
func TestReadNpzHeader(t *testing.T) {
	dir := filepath.Join("testdata", "npz")
	for _, name := range []string{"plain.npz", "compressed.npz", "other.npz"} {
		p := filepath.Join(dir, name)
		h, err := ReadNpzHeader(context.Background(), p, nil)
		if err != nil {
			t.Fatalf("%s: %v", name, err)
		}
		a, err := LoadNpzHost(context.Background(), p, nil)
		if err != nil {
			t.Fatal(err)
		}
		if !slices.Equal(h.Names, a.Names) || !slices.Equal(h.Other, a.Other) {
			t.Fatalf("%s: names %v %v, the load's %v %v", name, h.Names, h.Other, a.Names, a.Other)
		}
		for _, k := range h.Names {
			got, want := h.Headers[k], a.Arrays[k].Header
			if got.Dtype != want.Dtype || !slices.Equal(got.Shape, want.Shape) || got.FortranOrder != want.FortranOrder || h.Compressed[k] != (name == "compressed.npz") {
				t.Errorf("%s[%s]: %+v (compressed %v), the load's %+v", name, k, got, h.Compressed[k], want)
			}
			if !h.Compressed[k] && got.DataOffset != want.DataOffset {
				t.Errorf("%s[%s]: data at %d, the load's at %d", name, k, got.DataOffset, want.DataOffset)
			}
		}
	}
}

// TestS3Npz loads NumPy's archives from S3 (versitygw) into host memory
// and checks them as TestNpzFiles does, reads their headers there, and
// saves random arrays as a .npz object with SaveNpz that equals the same
// save to a file and loads back from its URL.
func TestS3Npz(t *testing.T) {
	v := s3test.Start(t)
	dir := filepath.Join("testdata", "npz")
	e := readNpzExpected(t, dir)
	for name, want := range e.Archives {
		b, err := os.ReadFile(filepath.Join(dir, name))
		if err != nil {
			t.Fatal(err)
		}
		v.Put(t, "npz/"+name, b)
		a, err := LoadNpzHost(context.Background(), v.URLOf("npz/"+name), nil, v.Opts()...)
		if err != nil {
			t.Fatalf("%s: %v", name, err)
		}
		checkArchive(t, name, a, want, func(arr *Array) []byte { return arr.Data })
		h, err := ReadNpzHeader(context.Background(), v.URLOf("npz/"+name), nil, v.Opts()...)
		if err != nil || !slices.Equal(h.Names, a.Names) {
			t.Fatalf("%s: header %+v, %v", name, h, err)
		}
	}
	arrays := randNpz(rand.New(rand.NewPCG(73, 74)))
	local := filepath.Join(t.TempDir(), "r.npz")
	if err := SaveNpz(context.Background(), local, arrays); err != nil {
		t.Fatal(err)
	}
	if err := SaveNpz(context.Background(), v.URLOf("saved/r.npz"), arrays, v.Opts()...); err != nil {
		t.Fatal(err)
	}
	want, _ := os.ReadFile(local)
	if got, ok := v.Object("saved/r.npz"); !ok || !bytes.Equal(got, want) {
		t.Fatalf("the object of %d bytes differs from the %d-byte file", len(got), len(want))
	}
	a, err := LoadNpzHost(context.Background(), v.URLOf("saved/r.npz"), nil, v.Opts()...)
	if err != nil || len(a.Names) != len(arrays) {
		t.Fatalf("loaded back: %v", err)
	}
	for _, x := range arrays {
		if got := a.Arrays[x.Name]; got == nil || !bytes.Equal(got.Data, x.Data) || got.Dtype != x.Dtype {
			t.Fatalf("%s differs loaded back from S3", x.Name)
		}
	}
}

// TestNpzDeflateEnv checks that KVIK_DEFLATE, which picks the inflater as
// it does for zarr, fails a load that needs it when its value is bad
// (kvik.ErrBadEnv), and that an archive of stored members loads anyway.
func TestNpzDeflateEnv(t *testing.T) {
	old := nativeInflate
	t.Cleanup(func() { nativeInflate = old })
	nativeInflate = func() (bool, error) { return codecpick.Native(codecpick.DeflateEnv, "bogus", true, libdeflate.Load) }
	dir := filepath.Join("testdata", "npz")
	if _, err := LoadNpzHost(context.Background(), filepath.Join(dir, "compressed.npz"), nil); !errors.Is(err, kvik.ErrBadEnv) || !strings.Contains(err.Error(), "KVIK_DEFLATE") {
		t.Errorf("deflated members with KVIK_DEFLATE=bogus: %v, want kvik.ErrBadEnv", err)
	}
	if _, err := LoadNpzHost(context.Background(), filepath.Join(dir, "plain.npz"), nil); err != nil {
		t.Errorf("stored members with KVIK_DEFLATE=bogus: %v", err)
	}
}
