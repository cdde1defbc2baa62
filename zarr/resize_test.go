package zarr

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"io/fs"
	"math/rand/v2"
	"os/exec"
	"slices"
	"strings"
	"testing"

	"github.com/kvikgo/kvik/cuda"
)

// resized returns ref at shape: the elements both shapes hold kept, the
// new ones the fill value.
func resized(ref model, shape []int, fill []byte) model {
	out := model{shape: slices.Clone(shape), es: ref.es, buf: chunkFill(fill, shape)}
	both := make([]int, len(shape))
	for d := range shape {
		both[d] = min(shape[d], ref.shape[d])
	}
	if numElements(both) > 0 {
		out.write(make([]int, len(shape)), both, ref.region(make([]int, len(shape)), both))
	}
	return out
}

// TestResize grows and shrinks arrays of each chain (random shapes, zero
// extents among them) between random writes, and after each step checks
// the reads, the array reopened from its store, and the stored chunks
// against a model: by default exactly those holding anything but the
// fill value (so a shrink leaves nothing outside the shape, and cut
// chunks hold the fill value past it: growing again shows it); with
// SetWriteEmptyChunks(true) those at least, and none outside the grid.
func TestResize(t *testing.T) {
	rng := rand.New(rand.NewPCG(50, 51))
	eachWay(t, emptyCases(), func(t *testing.T, s *DirStore, m Metadata, on bool) {
		checkResizes(t, rng, s, m, on, 14)
	})
}

// checkResizes creates a random array of m in s and resizes it between
// random writes, checking it after each step (see TestResize).
func checkResizes(t *testing.T, rng *rand.Rand, s Store, m Metadata, on bool, steps int) {
	t.Helper()
	a := randArray(t, rng, s, m, on, 1)
	m = *a.Metadata()
	fill := a.pipe.fill
	ref := model{shape: m.Shape, es: m.DataType.Size, buf: chunkFill(fill, m.Shape)}
	for step := range steps {
		if step%2 == 0 {
			start, stop := randRegion(rng, ref.shape)
			n := boxBytes(start, stop, ref.es) / ref.es
			src := randValues(rng, m.DataType, n)
			if err := a.WriteRegion(bg, start, stop, src); err != nil {
				t.Fatalf("write %v-%v: %v", start, stop, err)
			}
			ref.write(start, stop, src)
		} else {
			shape := make([]int, 2)
			for d := range shape {
				shape[d] = rng.IntN(2*ref.shape[d] + 4)
			}
			if err := a.Resize(bg, shape); err != nil {
				t.Fatalf("resize %v to %v: %v", ref.shape, shape, err)
			}
			ref = resized(ref, shape, fill)
			if !slices.Equal(a.Shape(), shape) {
				t.Fatalf("shape %v after a resize to %v", a.Shape(), shape)
			}
		}
		checkModel(t, a, ref)
		b, err := Open(bg, s, "arr")
		if err != nil {
			t.Fatal(err)
		}
		if !slices.Equal(b.Shape(), ref.shape) {
			t.Fatalf("reopened with shape %v, want %v", b.Shape(), ref.shape)
		}
		checkModel(t, b, ref)
		if !on {
			checkStoredKeys(t, a, ref, nil, false)
			continue
		}
		for _, k := range chunkKeys(t, a) {
			c, ok := a.chunkCoords(k)
			if !ok || c[0] >= a.grid[0] || c[1] >= a.grid[1] {
				t.Fatalf("chunk %s stored outside the grid %v", k, a.grid)
			}
		}
	}
}

// TestResizeKeepsDocument: a resize changes the metadata document's shape
// and nothing else (attributes, dimension names, codecs, fill value; v2's
// .zattrs untouched), and a second Array, opened before it, cannot
// resize on its stale shape (ErrInvalidMetadata, nothing written).
func TestResizeKeepsDocument(t *testing.T) {
	for _, m := range []Metadata{
		{Shape: []int{6, 5}, ChunkShape: []int{4, 4}, DataType: DataType{Kind: Int, Size: 4}, FillValue: 3, DimensionNames: []string{"time", "x"},
			Attributes: map[string]any{"units": "K", "scale": 0.5}, Codecs: roundTripCodecs["zstd+crc"]},
		{ZarrFormat: 2, Separator: ".", Shape: []int{6, 5}, ChunkShape: []int{4, 4}, DataType: DataType{Kind: Float, Size: 8}, FillValue: "NaN",
			Attributes: map[string]any{"_ARRAY_DIMENSIONS": []any{"time", "x"}}, Compressor: &Codec{Name: "zlib", Configuration: map[string]any{"level": 1}}},
	} {
		t.Run(map[int]string{0: "v3", 2: "v2"}[m.ZarrFormat], func(t *testing.T) {
			s, err := NewDirStore(t.TempDir())
			if err != nil {
				t.Fatal(err)
			}
			a, err := Create(bg, s, "g/arr", m)
			if err != nil {
				t.Fatal(err)
			}
			stale, err := Open(bg, s, "g/arr")
			if err != nil {
				t.Fatal(err)
			}
			key, before, err := a.storedDoc(bg)
			if err != nil {
				t.Fatal(err)
			}
			attrs, _ := s.Get(bg, "g/arr/.zattrs", nil)
			if err := a.Resize(bg, []int{9, 2}); err != nil {
				t.Fatal(err)
			}
			b, _ := s.Get(bg, key, nil)
			var after map[string]json.RawMessage
			if err := json.Unmarshal(b, &after); err != nil {
				t.Fatal(err)
			}
			if !jsonEqual(t, after["shape"], json.RawMessage("[9, 2]")) {
				t.Errorf("shape %s, want [9,2]", after["shape"])
			}
			for k, v := range before {
				if k != "shape" && !jsonEqual(t, v, after[k]) {
					t.Errorf("%s: %s became %s", k, v, after[k])
				}
			}
			if len(after) != len(before) {
				t.Errorf("fields %d, were %d", len(after), len(before))
			}
			if attrs2, _ := s.Get(bg, "g/arr/.zattrs", nil); !bytes.Equal(attrs, attrs2) {
				t.Errorf(".zattrs changed: %s", attrs2)
			}
			err = stale.Resize(bg, []int{1, 1})
			if !errors.Is(err, ErrInvalidMetadata) {
				t.Fatalf("resize on a stale shape: %v, want ErrInvalidMetadata", err)
			}
			if b2, _ := s.Get(bg, key, nil); !bytes.Equal(b, b2) {
				t.Errorf("a refused resize wrote %s", b2)
			}
			for _, bad := range [][]int{{1}, {1, 2, 3}, {-1, 2}} {
				if err := a.Resize(bg, bad); !errors.Is(err, ErrInvalidMetadata) {
					t.Errorf("resize to %v: %v, want ErrInvalidMetadata", bad, err)
				}
			}
		})
	}
}

// jsonEqual reports whether two JSON documents hold the same values.
func jsonEqual(t *testing.T, a, b json.RawMessage) bool {
	t.Helper()
	var x, y any
	if err := errors.Join(json.Unmarshal(a, &x), json.Unmarshal(b, &y)); err != nil {
		return false
	}
	return fmt.Sprint(x) == fmt.Sprint(y)
}

// TestResizeStrings: a variable-length string array shrunk through its
// chunks and grown again reads the fill value where it was cut, the
// chunks it cut to nothing but the fill value deleted.
func TestResizeStrings(t *testing.T) {
	s, err := NewDirStore(t.TempDir())
	if err != nil {
		t.Fatal(err)
	}
	a, err := Create(bg, s, "arr", Metadata{Shape: []int{6, 6}, ChunkShape: []int{4, 4}, DataType: DataType{Kind: VarString}, FillValue: "-"})
	if err != nil {
		t.Fatal(err)
	}
	ss := make([]string, 36)
	for i := range ss {
		ss[i] = strings.Repeat("é", i%5+1)
	}
	if err := a.WriteStrings(bg, []int{0, 0}, []int{6, 6}, ss); err != nil {
		t.Fatal(err)
	}
	if err := a.Resize(bg, []int{3, 5}); err != nil {
		t.Fatal(err)
	}
	if got, want := chunkKeys(t, a), []string{"arr/c/0/0", "arr/c/0/1"}; !slices.Equal(got, want) {
		t.Fatalf("stored %q, want %q", got, want)
	}
	if err := a.Resize(bg, []int{6, 6}); err != nil {
		t.Fatal(err)
	}
	got, err := a.ReadStrings(bg, []int{0, 0}, []int{6, 6})
	if err != nil {
		t.Fatal(err)
	}
	for i, v := range got {
		want := "-"
		if r, c := i/6, i%6; r < 3 && c < 5 {
			want = ss[i]
		}
		if v != want {
			t.Fatalf("element %d: %q, want %q", i, v, want)
		}
	}
	if err := a.Append(bg, 0, []byte{1}); !errors.Is(err, ErrUnsupportedDataType) {
		t.Errorf("Append of strings: %v, want ErrUnsupportedDataType", err)
	}
}

// TestAppend grows arrays along either axis by random numbers of slices
// (zero among them), against a model, and refuses an axis outside the
// array and bytes that are not whole slices with ErrInvalidRegion.
func TestAppend(t *testing.T) {
	rng := rand.New(rand.NewPCG(52, 53))
	for _, c := range emptyCases() {
		t.Run(c.name, func(t *testing.T) {
			s, err := NewDirStore(t.TempDir())
			if err != nil {
				t.Fatal(err)
			}
			m := c.m
			m.Shape, m.ChunkShape = []int{3, 5}, []int{4, 3}
			if len(m.Codecs) > 0 && m.Codecs[0].Name == "sharding_indexed" {
				m.ChunkShape = []int{4, 6}
			}
			a, err := Create(bg, s, "arr", m)
			if err != nil {
				t.Fatal(err)
			}
			ref := model{shape: m.Shape, es: m.DataType.Size, buf: chunkFill(a.pipe.fill, m.Shape)}
			for range 6 {
				axis, k := rng.IntN(2), rng.IntN(6)
				shape := slices.Clone(ref.shape)
				start := make([]int, 2)
				start[axis] = shape[axis]
				shape[axis] += k
				src := randValues(rng, m.DataType, numElements(shape)-numElements(ref.shape))
				if err := a.Append(bg, axis, src); err != nil {
					t.Fatal(err)
				}
				ref = resized(ref, shape, a.pipe.fill)
				ref.write(start, shape, src)
				checkModel(t, a, ref)
				checkStoredKeys(t, a, ref, nil, false)
			}
			slice := ref.shape[1] * ref.es
			for _, bad := range []struct {
				axis int
				n    int
			}{{-1, slice}, {2, slice}, {0, slice + 1}} {
				if err := a.Append(bg, bad.axis, make([]byte, bad.n)); !errors.Is(err, ErrInvalidRegion) {
					t.Errorf("append of %d bytes along %d: %v, want ErrInvalidRegion", bad.n, bad.axis, err)
				}
			}
		})
	}
}

// TestResizeRemote runs the resize checks on versitygw, with and without
// process locks.
func TestResizeRemote(t *testing.T) {
	rng := rand.New(rand.NewPCG(54, 55))
	for _, locks := range []bool{false, true} {
		t.Run(fmt.Sprintf("locks=%v", locks), func(t *testing.T) {
			var opts []StoreOption
			if locks {
				opts = append(opts, WithProcessLocks())
			}
			_, s := openS3(t, "resize", opts...)
			for _, c := range flatCases(emptyCases()[:3]) {
				// With locks, a part of a stored chunk left all fill
				// value is stored: the keys are checked without them.
				checkResizes(t, rng, s, c.m, locks, 8)
				if err := Delete(bg, s, "arr"); err != nil {
					t.Fatal(err)
				}
			}
		})
	}
}

// TestResizeZarrPython: zarr-python 2 reads a v2 array kvik shrank and
// grew again: its shape, and the fill value where it was cut.
func TestResizeZarrPython(t *testing.T) {
	py := zarrPython(t)
	dir := t.TempDir()
	s, err := NewDirStore(dir)
	if err != nil {
		t.Fatal(err)
	}
	m := Metadata{ZarrFormat: 2, Separator: ".", Shape: []int{7, 9}, ChunkShape: []int{3, 4}, DataType: DataType{Kind: Int, Size: 4}, FillValue: -1,
		Compressor: &Codec{Name: "zstd", Configuration: map[string]any{"level": 1}}}
	a, err := Create(bg, s, "arr", m)
	if err != nil {
		t.Fatal(err)
	}
	src := make([]byte, 0, 7*9*4)
	for i := range 7 * 9 {
		src = append(src, element(m.DataType, float64(i))...)
	}
	if err := a.WriteRegion(bg, []int{0, 0}, []int{7, 9}, src); err != nil {
		t.Fatal(err)
	}
	for _, shape := range [][]int{{4, 5}, {8, 10}} {
		if err := a.Resize(bg, shape); err != nil {
			t.Fatal(err)
		}
	}
	script := `
import sys, zarr
z = zarr.open(sys.argv[1] + "/arr", mode="r")
print(list(z.shape), z[:].ravel().tolist())
`
	out, err := exec.Command(py, "-c", script, dir).CombinedOutput()
	if err != nil {
		t.Fatalf("%v\n%s", err, out)
	}
	var want []string
	for r := range 8 {
		for c := range 10 {
			v := -1
			if r < 4 && c < 5 {
				v = r*9 + c
			}
			want = append(want, fmt.Sprint(v))
		}
	}
	if got, w := strings.TrimSpace(string(out)), "[8, 10] ["+strings.Join(want, ", ")+"]"; got != w {
		t.Errorf("zarr-python read\n%s\nwant\n%s", got, w)
	}
}

// TestAppendDevice appends rows from device memory to an uncompressed
// array (whole chunks go straight from the GPU, the fill value's left
// out) and to a compressed one, against a model.
func TestAppendDevice(t *testing.T) {
	ctx := needGPU(t)
	rng := rand.New(rand.NewPCG(56, 57))
	for _, c := range emptyCases()[:3] {
		t.Run(c.name, func(t *testing.T) {
			s, err := NewDirStore(t.TempDir())
			if err != nil {
				t.Fatal(err)
			}
			m := c.m
			m.Shape, m.ChunkShape = []int{0, 64}, []int{4, 64}
			a, err := Create(bg, s, "arr", m)
			if err != nil {
				t.Fatal(err)
			}
			es := m.DataType.Size
			ref := model{shape: m.Shape, es: es, buf: nil}
			for i := range 6 {
				rows := 1 + rng.IntN(9)
				src := randValues(rng, m.DataType, rows*64)
				if i%3 == 1 {
					src = chunkFill(a.pipe.fill, []int{rows * 64})
				}
				buf := devAlloc(t, ctx, len(src))
				if err := cuda.WithContext(ctx, func() error { return cuda.MemcpyHtoD(buf.Ptr(), src) }); err != nil {
					t.Fatal(err)
				}
				if err := a.AppendDevice(bg, 0, buf.Ptr(), len(src)); err != nil {
					t.Fatal(err)
				}
				shape := []int{ref.shape[0] + rows, 64}
				start := []int{ref.shape[0], 0}
				ref = resized(ref, shape, a.pipe.fill)
				ref.write(start, shape, src)
				checkModel(t, a, ref)
				checkStoredKeys(t, a, ref, nil, false)
			}
			if err := a.AppendDevice(bg, 0, 0, 5); !errors.Is(err, ErrInvalidRegion) {
				t.Errorf("5 bytes: %v, want ErrInvalidRegion", err)
			}
		})
	}
}

// TestSetAttributes replaces an array's attributes, v3 and v2: reopened,
// it has the new ones and its shape, codecs and chunks as before; keys
// or strings that are not UTF-8 fail with ErrInvalidMetadata, nothing
// written.
func TestSetAttributes(t *testing.T) {
	for _, m := range []Metadata{
		{Shape: []int{4, 3}, ChunkShape: []int{2, 2}, DataType: DataType{Kind: Int, Size: 2}, DimensionNames: []string{"y", "x"},
			Attributes: map[string]any{"old": "yes"}, Codecs: roundTripCodecs["gzip"]},
		{ZarrFormat: 2, Separator: ".", Shape: []int{4, 3}, ChunkShape: []int{2, 2}, DataType: DataType{Kind: Int, Size: 2}, Attributes: map[string]any{"old": "yes"}},
	} {
		t.Run(map[int]string{0: "v3", 2: "v2"}[m.ZarrFormat], func(t *testing.T) {
			s, err := NewDirStore(t.TempDir())
			if err != nil {
				t.Fatal(err)
			}
			a, err := Create(bg, s, "arr", m)
			if err != nil {
				t.Fatal(err)
			}
			src := randValues(rand.New(rand.NewPCG(58, 59)), m.DataType, 12)
			if err := a.WriteRegion(bg, []int{0, 0}, []int{4, 3}, src); err != nil {
				t.Fatal(err)
			}
			attrs := map[string]any{"units": "K", "_ARRAY_DIMENSIONS": []any{"y", "x"}, "scale": 0.25, "nested": map[string]any{"é": true}}
			old, err := Open(bg, s, "arr")
			if err != nil {
				t.Fatal(err)
			}
			if err := a.SetAttributes(bg, attrs); err != nil {
				t.Fatal(err)
			}
			b, err := Open(bg, s, "arr")
			if err != nil {
				t.Fatal(err)
			}
			if fmt.Sprint(b.Metadata().Attributes) != fmt.Sprint(attrs) || fmt.Sprint(a.Metadata().Attributes) != fmt.Sprint(attrs) {
				t.Errorf("attributes %v (reopened), %v; want %v", b.Metadata().Attributes, a.Metadata().Attributes, attrs)
			}
			if !slices.Equal(b.Shape(), m.Shape) || fmt.Sprint(b.Metadata().Codecs) != fmt.Sprint(old.Metadata().Codecs) || fmt.Sprint(b.Metadata().DimensionNames) != fmt.Sprint(m.DimensionNames) {
				t.Errorf("reopened as %+v", b.Metadata())
			}
			got := make([]byte, len(src))
			if err := b.ReadRegion(bg, []int{0, 0}, []int{4, 3}, got); err != nil || !bytes.Equal(got, src) {
				t.Errorf("values after: %v, equal %v", err, bytes.Equal(got, src))
			}
			before, _ := s.Get(bg, "arr/zarr.json", nil)
			zattrs, _ := s.Get(bg, "arr/.zattrs", nil)
			for _, bad := range []map[string]any{{"\xff": 1}, {"k": "\xfe"}, {"k": []any{"\xff"}}} {
				if err := a.SetAttributes(bg, bad); !errors.Is(err, ErrInvalidMetadata) {
					t.Errorf("%q: %v, want ErrInvalidMetadata", bad, err)
				}
			}
			after, _ := s.Get(bg, "arr/zarr.json", nil)
			zattrs2, _ := s.Get(bg, "arr/.zattrs", nil)
			if !bytes.Equal(before, after) || !bytes.Equal(zattrs, zattrs2) {
				t.Error("a refused SetAttributes wrote")
			}
			if err := a.SetAttributes(bg, nil); err != nil {
				t.Fatal(err)
			}
			if c, _ := Open(bg, s, "arr"); c == nil || len(c.Metadata().Attributes) != 0 {
				t.Errorf("attributes after nil: %v", c.Metadata().Attributes)
			}
		})
	}
}

// TestResizeStrayKeys: keys under the array that are no chunk of it
// (another name, a coordinate not in decimal, too few coordinates) are
// left as they are by a shrink; chunk keys past the old grid, the
// largest coordinate included, are deleted, since a later grow would
// show them.
func TestResizeStrayKeys(t *testing.T) {
	s, err := NewDirStore(t.TempDir())
	if err != nil {
		t.Fatal(err)
	}
	a, err := Create(bg, s, "arr", Metadata{Shape: []int{4, 4}, ChunkShape: []int{2, 2}, DataType: DataType{Kind: Uint, Size: 1}})
	if err != nil {
		t.Fatal(err)
	}
	if err := a.WriteRegion(bg, []int{0, 0}, []int{4, 4}, bytes.Repeat([]byte{9}, 16)); err != nil {
		t.Fatal(err)
	}
	keep := []string{"arr/notes.txt", "arr/c/9", "arr/c/+1/0", "arr/c/01/0", "arr/c/x/1", "arr/c/1/9/0"}
	gone := []string{"arr/c/7/0", "arr/c/0/9223372036854775807"}
	for _, k := range append(slices.Clone(keep), gone...) {
		if err := s.Set(bg, k, []byte{1}); err != nil {
			t.Fatal(err)
		}
	}
	if err := a.Resize(bg, []int{3, 4}); err != nil {
		t.Fatal(err)
	}
	for _, k := range keep {
		if _, err := s.Get(bg, k, nil); err != nil {
			t.Errorf("%s: %v, want it kept", k, err)
		}
	}
	for _, k := range gone {
		if _, err := s.Get(bg, k, nil); !errors.Is(err, fs.ErrNotExist) {
			t.Errorf("%s: %v, want it deleted", k, err)
		}
	}
	got := make([]byte, 12)
	if err := a.ReadRegion(bg, []int{0, 0}, []int{3, 4}, got); err != nil || !bytes.Equal(got, bytes.Repeat([]byte{9}, 12)) {
		t.Errorf("read %v, %v", got, err)
	}
}

// TestResizeHostileListing: a server whose listing names every object
// of the bucket whatever the prefix asked (another store's, another
// array's) and keys of its own making (dot segments, a coordinate past
// int64, one past the grid) gets DELETEs from a shrink only for the
// array's own chunk keys outside the new shape, and a PUT of the one it
// cuts; the other array reads as before.
func TestResizeHostileListing(t *testing.T) {
	bkt := newCondBucket(t)
	s, err := OpenURL(bg, "s3://bkt/x.zarr", s3Options(bkt.URL)...)
	if err != nil {
		t.Fatal(err)
	}
	defer s.Close()
	m := Metadata{Shape: []int{4, 4}, ChunkShape: []int{2, 2}, DataType: DataType{Kind: Uint, Size: 1}, FillValue: 0}
	src := bytes.Repeat([]byte{3}, 16)
	var arrays []*Array
	for _, p := range []string{"arr", "arr2"} {
		a, err := Create(bg, s, p, m)
		if err != nil {
			t.Fatal(err)
		}
		if err := a.WriteRegion(bg, []int{0, 0}, []int{4, 4}, src); err != nil {
			t.Fatal(err)
		}
		arrays = append(arrays, a)
	}
	bkt.mu.Lock()
	bkt.extraList = []string{"other.zarr/arr/c/1/1", "x.zarr/arr/c/../../other.zarr/arr/c/0/0", "x.zarr/arr/c/1/1/../../../arr2/c/0/0",
		"x.zarr/arr/c/0/99999999999999999999", "x.zarr/arr/c/9/9", "x.zarr/arr/c/1/1/x", "x.zarr/arr/c/-1/0"}
	bkt.deleted = nil
	bkt.mu.Unlock()
	if err := arrays[0].Resize(bg, []int{1, 1}); err != nil {
		t.Fatal(err)
	}
	bkt.mu.Lock()
	deleted := slices.Sorted(slices.Values(bkt.deleted))
	bkt.mu.Unlock()
	want := []string{"/bkt/x.zarr/arr/c/0/1", "/bkt/x.zarr/arr/c/1/0", "/bkt/x.zarr/arr/c/1/1", "/bkt/x.zarr/arr/c/9/9"}
	if !slices.Equal(deleted, want) {
		t.Errorf("deleted %q, want %q", deleted, want)
	}
	got := make([]byte, 16)
	if err := arrays[1].ReadRegion(bg, []int{0, 0}, []int{4, 4}, got); err != nil || !bytes.Equal(got, src) {
		t.Errorf("the other array: %v, %v", got, err)
	}
	one := make([]byte, 1)
	if err := arrays[0].ReadRegion(bg, []int{0, 0}, []int{1, 1}, one); err != nil || one[0] != 3 {
		t.Errorf("the array shrunk: %v, %v", one, err)
	}
}
