package zarr

import (
	"bytes"
	"encoding/base64"
	"encoding/json"
	"errors"
	"fmt"
	"math/rand/v2"
	"os"
	"path/filepath"
	"reflect"
	"strconv"
	"strings"
	"testing"

	"github.com/kvikgo/kvik/internal/formatkit/npydescr"
)

// structTypes are structured types as kvik spells them (NumPy's descr
// lists): fields back to back with a big-endian subarray, padding, a
// nested record beside a 2 x 2 subarray of bytes, times and strings.
var structTypes = []string{
	"[('x', '<f4'), ('n', '>i2', (3,))]",
	"[('a', '|u1'), ('', '|V7'), ('b', '<f8')]",
	"[('p', [('x', '<f4'), ('y', '>f4')]), ('id', '<u8'), ('tag', '|S3', (2, 2))]",
	"[('t', '<M8[us]'), ('s', '<U2', (2,)), ('ok', '|b1')]",
}

// structType returns the DataType of descr, a structured type.
func structType(t *testing.T, descr string) DataType {
	t.Helper()
	st, err := npydescr.ParseRepr(descr)
	if err != nil {
		t.Fatal(err)
	}
	return DataType{Kind: Raw, Size: st.Size, Struct: descr}
}

// randRecords returns n random records of size bytes, never all zero.
func randRecords(rng *rand.Rand, size, n int) []byte {
	b := make([]byte, size*n)
	for i := range b {
		b[i] = byte(rng.Uint32())
	}
	if n > 0 {
		b[rng.IntN(len(b))] |= 1
	}
	return b
}

// TestStructuredMetadata checks v2 documents of structured dtypes: the
// descr list parsed into a Raw type of the record's size and NumPy's
// spelling, its fields, the document written back, and what is refused:
// malformed lists, object fields, records past the bound, a v3 array, a
// DataType whose Struct does not match its Size.
func TestStructuredMetadata(t *testing.T) {
	doc := func(dtype string) []byte {
		return []byte(`{"zarr_format": 2, "shape": [10], "chunks": [4], "dtype": ` + dtype + `, "compressor": null, "fill_value": null, "order": "C", "filters": null}`)
	}
	m, err := ParseMetadataV2(doc(`[["p", [["x", "<f4"], ["y", ">f4"]]], ["id", "<u8"], ["", "|V4"], ["tag", "|S3", [2, 2]]]`), ".")
	if err != nil {
		t.Fatal(err)
	}
	want := DataType{Kind: Raw, Size: 32, Struct: "[('p', [('x', '<f4'), ('y', '>f4')]), ('id', '<u8'), ('', '|V4'), ('tag', '|S3', (2, 2))]"}
	if m.DataType != want || m.BigEndian || m.DataType.NumPy() != want.Struct || m.v2DType() != want.Struct {
		t.Fatalf("DataType %+v (big-endian %v), want %+v", m.DataType, m.BigEndian, want)
	}
	fields := []Field{{"p", "[('x', '<f4'), ('y', '>f4')]", nil, 0, 8}, {"id", "<u8", nil, 8, 8}, {"", "|V4", nil, 16, 4}, {"tag", "|S3", []int{2, 2}, 20, 12}}
	if got := m.DataType.Fields(); !reflect.DeepEqual(got, fields) {
		t.Errorf("Fields() = %+v, want %+v", got, fields)
	}
	if f := (DataType{Kind: Float, Size: 4}).Fields(); f != nil {
		t.Errorf("float32 has fields %v", f)
	}
	docs, err := m.marshal()
	if err != nil {
		t.Fatal(err)
	}
	var back struct {
		DType []any `json:"dtype"`
	}
	if err := json.Unmarshal(docs[".zarray"], &back); err != nil {
		t.Fatal(err)
	}
	var wantList []any
	json.Unmarshal([]byte(`[["p",[["x","<f4"],["y",">f4"]]],["id","<u8"],["","|V4"],["tag","|S3",[2,2]]]`), &wantList)
	if !reflect.DeepEqual(back.DType, wantList) {
		t.Errorf("written dtype %v, want %v", back.DType, wantList)
	}
	for _, bad := range []string{`[]`, `[["x"]]`, `[["x", "<f3"]]`, `[["x", "<f4"], ["x", "<f4"]]`, `[["", "<f4"]]`, `[["x", "<f4", [-1]]]`,
		`[["x", "|V1048577"]]`, `[["z", "|S3", [0]]]`, `{"x": "<f4"}`, `[["x", "O"]]`, `[["x", "|O"]]`} {
		if _, err := ParseMetadataV2(doc(bad), "."); !errors.Is(err, ErrUnsupportedDataType) && !errors.Is(err, ErrInvalidMetadata) {
			t.Errorf("dtype %s: %v, want ErrUnsupportedDataType", bad, err)
		}
	}
	s, err := NewDirStore(t.TempDir())
	if err != nil {
		t.Fatal(err)
	}
	for i, dt := range []DataType{
		{Kind: Raw, Size: 8, Struct: "[('x', '<f4')]"},             // size
		{Kind: Raw, Size: 4, Struct: "[(\"x\", \"<f4\")]"},         // spelling
		{Kind: Bytes, Size: 4, Struct: "[('x', '<f4')]"},           // kind
		{Kind: Float, Size: 4, Struct: "[('x', '<f4')]"},           // kind
		{Kind: Raw, Size: 4, Struct: "[('x', '<f4')"},              // syntax
		{Kind: Raw, Size: 4, Struct: "[('x', 'O')]"},               // objects
		{Kind: Raw, Size: 1 << 21, Struct: "[('x', '|V2097152')]"}, // too large
	} {
		if _, err := Create(bg, s, fmt.Sprint("bad", i), Metadata{ZarrFormat: 2, Shape: []int{4}, ChunkShape: []int{2}, DataType: dt}); !errors.Is(err, ErrUnsupportedDataType) {
			t.Errorf("Create of %+v: %v, want ErrUnsupportedDataType", dt, err)
		}
	}
	if _, err := Create(bg, s, "v3", Metadata{Shape: []int{4}, ChunkShape: []int{2}, DataType: structType(t, structTypes[0])}); !errors.Is(err, ErrUnsupportedDataType) {
		t.Errorf("Create of a structured v3 array: %v, want ErrUnsupportedDataType", err)
	}
}

// TestStructuredRoundTrip writes random regions of random records into
// v2 arrays of each structured type, compressor, order and fill value,
// and reads whole arrays and random regions back against a model.
func TestStructuredRoundTrip(t *testing.T) {
	rng := rand.New(rand.NewPCG(81, 82))
	comps := []*Codec{nil, {Name: "zlib", Configuration: map[string]any{"level": 1}}, {Name: "zstd", Configuration: map[string]any{"level": 3}},
		{Name: "blosc", Configuration: map[string]any{"cname": "lz4", "clevel": 5, "shuffle": 1}},
		{Name: "blosc", Configuration: map[string]any{"cname": "zstd", "clevel": 3, "shuffle": 2}}}
	for i, descr := range structTypes {
		dt := structType(t, descr)
		for j, comp := range comps {
			shape, chunks := interopShape(rng, 1+(i+j)%3)
			var fill any
			if j%2 == 1 {
				fill = base64.StdEncoding.EncodeToString(randRecords(rng, dt.Size, 1))
			}
			m := Metadata{ZarrFormat: 2, Shape: shape, ChunkShape: chunks, DataType: dt, Compressor: comp, Order: "CF"[j%2], FillValue: fill}
			t.Run(fmt.Sprintf("%d/%d", i, j), func(t *testing.T) { roundTrip(t, rng, m) })
		}
	}
}

// TestZarrPythonStructured checks v2 arrays of structured types both ways
// against zarr-python (testdata/struct_interop.py): kvik reads what
// zarr-python wrote (every structured type with each compressor, C and F
// order: dtype, shape, every record, random regions), and zarr-python
// reads what kvik wrote, in part, with and without a fill value
// (chunks of the fill value left out), comparing dtype, record size and
// every byte.
func TestZarrPythonStructured(t *testing.T) {
	py := zarrPython(t)
	seed := testSeed(t)
	rng := rand.New(rand.NewPCG(seed, 83))
	dir := t.TempDir()
	script, _ := filepath.Abs(filepath.Join("testdata", "struct_interop.py"))
	if out, err := execPython(py, script, "write", dir, strconv.FormatUint(seed%(1<<31), 10)); err != nil {
		t.Fatalf("%v\n%s", err, out)
	}
	var pm struct {
		Arrays []interopArray `json:"arrays"`
	}
	if err := json.Unmarshal(mustRead(t, filepath.Join(dir, "py-manifest.json")), &pm); err != nil {
		t.Fatal(err)
	}
	if len(pm.Arrays) < 20 {
		t.Fatalf("zarr-python wrote %d arrays", len(pm.Arrays))
	}
	s, err := NewDirStore(filepath.Join(dir, "py.zarr"))
	if err != nil {
		t.Fatal(err)
	}
	types := map[string]DataType{}
	for _, pa := range pm.Arrays {
		a, err := Open(bg, s, pa.Path)
		if err != nil {
			t.Errorf("%s: %v", pa.Path, err)
			continue
		}
		dt := a.DataType()
		if dt.Struct != pa.DType || dt.Kind != Raw || !reflect.DeepEqual(a.Shape(), pa.Shape) {
			t.Errorf("%s: %+v of shape %v, want %s of %v", pa.Path, dt, a.Shape(), pa.DType, pa.Shape)
			continue
		}
		types[dt.Struct] = dt
		ref := model{shape: pa.Shape, es: dt.Size, buf: mustRead(t, filepath.Join(dir, pa.Expect))}
		for r := range 4 {
			start, stop := make([]int, len(pa.Shape)), pa.Shape
			if r > 0 {
				start, stop = randomBox(rng, pa.Shape)
			}
			want := ref.region(start, stop)
			got := make([]byte, len(want))
			if err := a.ReadRegion(bg, start, stop, got); err != nil || !bytes.Equal(got, want) {
				t.Errorf("%s: region %v-%v: %v (equal %v)", pa.Path, start, stop, err, bytes.Equal(got, want))
				break
			}
		}
	}
	if len(types) != len(structTypes) {
		t.Fatalf("zarr-python's arrays have %d structured types, want %d", len(types), len(structTypes))
	}

	// kvik writes, zarr-python reads.
	type kvikArray struct {
		Path     string `json:"path"`
		DType    any    `json:"dtype"`
		Itemsize int    `json:"itemsize"`
		Shape    []int  `json:"shape"`
		Expect   string `json:"expect"`
	}
	var km struct {
		Arrays []kvikArray `json:"arrays"`
	}
	ks, err := NewDirStore(filepath.Join(dir, "kvik.zarr"))
	if err != nil {
		t.Fatal(err)
	}
	comps := []*Codec{nil, {Name: "zlib", Configuration: map[string]any{"level": 5}}, {Name: "zstd", Configuration: map[string]any{"level": 1}},
		{Name: "blosc", Configuration: map[string]any{"cname": "lz4", "clevel": 5, "shuffle": 1}}, {Name: "lz4", Configuration: map[string]any{"acceleration": 1}}}
	k := 0
	for _, descr := range structTypes {
		dt := types[descr]
		st, _ := npydescr.ParseRepr(descr)
		for j, comp := range comps {
			shape, chunks := interopShape(rng, 1+k%3)
			var fill any
			if k%2 == 1 {
				fill = base64.StdEncoding.EncodeToString(randRecords(rng, dt.Size, 1))
			}
			path := fmt.Sprintf("k%02d", k)
			m := Metadata{ZarrFormat: 2, Shape: shape, ChunkShape: chunks, DataType: dt, Compressor: comp, Order: "CF"[j%2], FillValue: fill}
			a, err := Create(bg, ks, path, m)
			if err != nil {
				t.Fatal(err)
			}
			ref := model{shape: shape, es: dt.Size, buf: chunkFill(a.pipe.fill, shape)}
			for range 3 {
				start, stop := randomBox(rng, shape)
				src := randRecords(rng, dt.Size, numElements(boxCount(start, stop)))
				if err := a.WriteRegion(bg, start, stop, src); err != nil {
					t.Fatal(err)
				}
				ref.write(start, stop, src)
			}
			expect := filepath.Join("expect", path+".bin")
			if err := os.MkdirAll(filepath.Join(dir, "expect"), 0o755); err != nil {
				t.Fatal(err)
			}
			if err := os.WriteFile(filepath.Join(dir, expect), ref.buf, 0o644); err != nil {
				t.Fatal(err)
			}
			km.Arrays = append(km.Arrays, kvikArray{Path: filepath.Join("kvik.zarr", path), DType: st.List(), Itemsize: dt.Size, Shape: shape, Expect: expect})
			k++
		}
	}
	b, _ := json.Marshal(km)
	if err := os.WriteFile(filepath.Join(dir, "kvik-manifest.json"), b, 0o644); err != nil {
		t.Fatal(err)
	}
	out, err := execPython(py, script, "check", dir)
	var res struct {
		Checked  int      `json:"checked"`
		Failures []string `json:"failures"`
	}
	if jerr := json.Unmarshal(out, &res); jerr != nil || err != nil || len(res.Failures) > 0 || res.Checked != len(km.Arrays) {
		t.Fatalf("zarr-python's reads of kvik's arrays: %v; checked %d of %d; failures:\n%s\n%s", err, res.Checked, len(km.Arrays), strings.Join(res.Failures, "\n"), out)
	}
	t.Logf("zarr-python read %d arrays kvik wrote; kvik read %d zarr-python wrote", res.Checked, len(pm.Arrays))
}

// TestDeviceStructured reads and writes v2 arrays of structured types
// between a directory and device memory (checkDeviceRegions: regions
// against host reads and a model), Blosc's byte shuffle of the records
// among them (unshuffled on the GPU).
func TestDeviceStructured(t *testing.T) {
	ctx := needGPU(t)
	rng := rand.New(rand.NewPCG(85, 86))
	for i, descr := range structTypes {
		for j, comp := range []*Codec{{Name: "blosc", Configuration: map[string]any{"cname": "lz4", "clevel": 5, "shuffle": 1}}, {Name: "zstd", Configuration: map[string]any{"level": 1}}} {
			m := Metadata{ZarrFormat: 2, DataType: structType(t, descr), Compressor: comp, Order: "CF"[(i+j)%2], Shape: []int{150, 70}, ChunkShape: []int{32, 16}}
			t.Run(fmt.Sprintf("%d/%d", i, j), func(t *testing.T) {
				s, err := NewDirStore(t.TempDir())
				if err != nil {
					t.Fatal(err)
				}
				checkDeviceRegions(t, ctx, rng, s, m)
			})
		}
	}
}

// TestTensorStoreStructured checks v2 arrays of structured types against
// TensorStore, whose zarr driver opens one field at a time: kvik writes
// arrays of records (a big-endian subarray field among them; Blosc,
// zstd, none; C and F order; a chunk left missing) and TensorStore reads
// every field bit for bit; TensorStore writes the same records field by
// field into arrays of the same metadata, and kvik reads them whole and
// in a region. Where no TensorStore is installed (CI), it skips.
func TestTensorStoreStructured(t *testing.T) {
	py := tensorStorePython(t)
	dir := t.TempDir()
	rng := rand.New(rand.NewPCG(87, 88))
	type entry struct {
		Kvik string `json:"kvik"`
		TS   string `json:"ts"`
		Data string `json:"data"`
	}
	var manifest []entry
	datas := map[string][]byte{}
	comps := []*Codec{{Name: "blosc", Configuration: map[string]any{"cname": "lz4", "clevel": 5, "shuffle": 1, "blocksize": 0}},
		{Name: "zstd", Configuration: map[string]any{"level": 3}}, nil}
	shape := []int{37, 29}
	for i, descr := range []string{"[('x', '<f4'), ('n', '>i2', (3,))]", "[('t', '<i8'), ('v', '>f8', (2,)), ('c', '|u1')]", "[('b', '|b1'), ('u', '<u4')]"} {
		dt := structType(t, descr)
		name := fmt.Sprintf("s%d", i)
		s, err := NewDirStore(filepath.Join(dir, "kvik-"+name))
		if err != nil {
			t.Fatal(err)
		}
		a, err := Create(bg, s, "", Metadata{ZarrFormat: 2, Shape: shape, ChunkShape: []int{16, 10}, DataType: dt, Compressor: comps[i], Order: "CF"[i%2]})
		if err != nil {
			t.Fatal(err)
		}
		data := randRecords(rng, dt.Size, numElements(shape))
		if strings.Contains(descr, "|b1") { // bools as NumPy holds them
			for k := 0; k < len(data); k += dt.Size {
				data[k] &= 1
			}
		}
		clear(data[dt.Size*32*29:]) // the last chunk row: the fill value (zeros), not stored
		if err := a.WriteRegion(bg, []int{0, 0}, shape, data); err != nil {
			t.Fatal(err)
		}
		e := entry{s.Root(), filepath.Join(dir, "ts-"+name), filepath.Join(dir, name+".bin")}
		if err := os.WriteFile(e.Data, data, 0o644); err != nil {
			t.Fatal(err)
		}
		manifest = append(manifest, e)
		datas[e.TS] = data
	}
	m, _ := json.Marshal(manifest)
	mf := filepath.Join(dir, "manifest.json")
	if err := os.WriteFile(mf, m, 0o644); err != nil {
		t.Fatal(err)
	}
	script, _ := filepath.Abs(filepath.Join("testdata", "tensorstore_struct.py"))
	out, err := execPython(py, script, mf)
	t.Logf("%s", out)
	if err != nil {
		t.Fatal(err)
	}
	for _, e := range manifest {
		s, err := NewDirStore(e.TS)
		if err != nil {
			t.Fatal(err)
		}
		a, err := Open(bg, s, "")
		if err != nil {
			t.Fatalf("%s: %v", e.TS, err)
		}
		data := datas[e.TS]
		got := make([]byte, len(data))
		if err := a.ReadRegion(bg, []int{0, 0}, shape, got); err != nil || !bytes.Equal(got, data) {
			at := 0
			for at < len(got) && got[at] == data[at] {
				at++
			}
			es := a.DataType().Size
			r := at / es * es
			t.Fatalf("%s: kvik reads other records than TensorStore wrote (%v): record %d, byte %d of it: % x, want % x; %s", e.TS, err, at/es, at%es,
				got[r:min(r+es, len(got))], data[r:min(r+es, len(data))], mustRead(t, filepath.Join(e.TS, ".zarray")))
		}
		start, stop := randRegion(rng, shape)
		want := model{shape: shape, es: a.DataType().Size, buf: data}.region(start, stop)
		part := make([]byte, len(want))
		if err := a.ReadRegion(bg, start, stop, part); err != nil || !bytes.Equal(part, want) {
			t.Fatalf("%s: region %v-%v differs (%v)", e.TS, start, stop, err)
		}
	}
}
