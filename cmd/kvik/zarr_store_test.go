package main

import (
	"context"
	"encoding/binary"
	"errors"
	"fmt"
	"io/fs"
	"maps"
	"net/http"
	"os"
	"path/filepath"
	"regexp"
	"slices"
	"strings"
	"testing"

	"github.com/kvikgo/kvik"
	"github.com/kvikgo/kvik/internal/testkit/s3test"
	"github.com/kvikgo/kvik/npy"
	"github.com/kvikgo/kvik/zarr"
)

// newStore writes a store of two arrays under a root group at dir and
// returns the keys of its zarr.json documents.
func newStore(t *testing.T, dir string) []string {
	t.Helper()
	s, err := zarr.NewDirStore(dir)
	if err != nil {
		t.Fatal(err)
	}
	for _, p := range []string{"a", "g/b"} {
		a, err := zarr.Create(context.Background(), s, p, zarr.Metadata{Shape: []int{6}, ChunkShape: []int{4}, DataType: zarr.DataType{Kind: zarr.Int, Size: 2}})
		if err != nil {
			t.Fatal(err)
		}
		if err := a.WriteRegion(context.Background(), []int{0}, []int{6}, []byte("kvik zarr, 6")); err != nil {
			t.Fatal(err)
		}
	}
	return []string{"zarr.json", "a/zarr.json", "g/zarr.json", "g/b/zarr.json"}
}

// TestZarrMistypedStore: kvik cp and kvik info of a path that holds no
// Zarr store (missing, or an empty directory) fail with one line naming
// it, and create neither the source nor the destination; they printed
// "copied 0 keys ... verified" and "Arrays 0", exit 0, and made both
// directories. So does a store whose every zarr.json is corrupt.
func TestZarrMistypedStore(t *testing.T) {
	tmp := t.TempDir()
	typo, out := filepath.Join(tmp, "typo.zarr"), filepath.Join(tmp, "out.zarr")
	runKvik(t, nil, "cp", typo, out).expect(t, exitFailure).oneLineError(t, typo, "no Zarr metadata")
	runKvik(t, nil, "info", typo).expect(t, exitFailure).oneLineError(t, typo, "no Zarr metadata")
	for _, p := range []string{typo, out} {
		if _, err := os.Lstat(p); !errors.Is(err, fs.ErrNotExist) {
			t.Errorf("%s exists after the failed commands: %v", p, err)
		}
	}
	empty := filepath.Join(tmp, "empty.zarr")
	os.Mkdir(empty, 0o755)
	runKvik(t, nil, "cp", empty, out).expect(t, exitFailure).oneLineError(t, empty, "no Zarr metadata")
	runKvik(t, nil, "info", empty).expect(t, exitFailure).oneLineError(t, empty, "no Zarr metadata")

	corrupt := filepath.Join(tmp, "corrupt.zarr")
	docs := newStore(t, corrupt)
	runKvik(t, nil, "info", corrupt).expect(t, exitOK)
	for _, k := range docs {
		if err := os.WriteFile(filepath.Join(corrupt, k), []byte("{\"zarr_format\": 3, \"node_typ"), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	runKvik(t, nil, "info", corrupt).expect(t, exitFailure).oneLineError(t, "invalid metadata", "zarr.json")
}

// TestZarrMistypedStoreS3: the same for an S3 prefix that holds nothing.
func TestZarrMistypedStoreS3(t *testing.T) {
	srv := s3test.Start(t)
	env := s3Env(srv)
	url := srv.URLOf("nonexist.zarr")
	out := filepath.Join(t.TempDir(), "out.zarr")
	runKvik(t, env, "info", url).expect(t, exitFailure).oneLineError(t, url, "no Zarr metadata")
	runKvik(t, env, "cp", url, out).expect(t, exitFailure).oneLineError(t, url, "no Zarr metadata")
	if _, err := os.Lstat(out); !errors.Is(err, fs.ErrNotExist) {
		t.Errorf("%s exists after the failed copy: %v", out, err)
	}
}

// TestZarrCpFolderMarkers: a store on S3 with folder markers (zero-byte
// objects ending in "/", as the AWS console's "Create folder" makes, for
// the store, a group and a chunk directory) copies to a local store key
// for key; it failed with `invalid object key: "sub/"`. A marker is not
// a key of the copy.
func TestZarrCpFolderMarkers(t *testing.T) {
	srv := s3test.Start(t)
	env := s3Env(srv)
	local := filepath.Join(t.TempDir(), "z.zarr")
	newStore(t, local)
	runKvik(t, env, "cp", local, srv.URLOf("z.zarr")).expect(t, exitOK)
	for _, m := range []string{"/z.zarr/", "/z.zarr/sub/", "/z.zarr/g/", "/z.zarr/g/b/c/"} {
		srv.Signed(t, http.MethodPut, m, nil)
	}
	back := filepath.Join(t.TempDir(), "back.zarr")
	runKvik(t, env, "cp", srv.URLOf("z.zarr"), back).expect(t, exitOK)
	want, got := treeFiles(t, local), treeFiles(t, back)
	if len(want) < 8 || !maps.Equal(got, want) {
		t.Fatalf("copy back: %d files, want the %d of the source", len(got), len(want))
	}
	runKvik(t, env, "info", srv.URLOf("z.zarr")).expect(t, exitOK)
}

// treeFiles returns the contents of the files below dir by relative path.
func treeFiles(t *testing.T, dir string) map[string]string {
	t.Helper()
	files := map[string]string{}
	err := filepath.WalkDir(dir, func(p string, d fs.DirEntry, err error) error {
		if err != nil || d.IsDir() {
			return err
		}
		b, err := os.ReadFile(p)
		rel, _ := filepath.Rel(dir, p)
		files[rel] = string(b)
		return err
	})
	if err != nil {
		t.Fatal(err)
	}
	return files
}

// TestZarrMaxDocumentFlag: --max-document sets the cap on the metadata
// documents kvik info and kvik cp read from a remote store: a
// consolidated root zarr.json over it fails both (as one over 64 MiB did
// with no way to raise the cap), under it both succeed.
func TestZarrMaxDocumentFlag(t *testing.T) {
	srv := s3test.Start(t)
	env := s3Env(srv)
	local := filepath.Join(t.TempDir(), "fat.zarr")
	s, err := zarr.NewDirStore(local)
	if err != nil {
		t.Fatal(err)
	}
	blob := strings.Repeat("attributes ", 1000)
	for i := range 10 {
		m := zarr.Metadata{Shape: []int{2}, ChunkShape: []int{2}, DataType: zarr.DataType{Kind: zarr.Uint, Size: 1}, Attributes: map[string]any{"blob": blob}}
		if _, err := zarr.Create(context.Background(), s, fmt.Sprintf("g/a%d", i), m); err != nil {
			t.Fatal(err)
		}
	}
	if err := zarr.Consolidate(context.Background(), s); err != nil {
		t.Fatal(err)
	}
	url := srv.URLOf("fat.zarr")
	runKvik(t, env, "cp", local, url).expect(t, exitOK)
	runKvik(t, env, "info", "--max-document", "64KiB", url).expect(t, exitFailure).oneLineError(t, "zarr.json", "65536 bytes allowed")
	runKvik(t, env, "cp", "--max-document", "64KiB", local, url).expect(t, exitFailure).oneLineError(t, "zarr.json", "65536 bytes allowed")
	r := runKvik(t, env, "info", "--max-document", "1MiB", url).expect(t, exitOK)
	if !strings.Contains(r.stdout, "Consolidated  true") || !strings.Contains(r.stdout, "g/a9") {
		t.Errorf("info under a 1 MiB cap:\n%s", r.stdout)
	}
	runKvik(t, env, "cp", "--max-document", "1MiB", local, url).expect(t, exitOK)
}

// TestZarrCpOverlap: a store copied onto itself or into itself (in any
// spelling: through a link, with "..", a trailing "/", an s3:// key
// escaped) is refused before anything is written; it rewrote every key,
// or nested a copy of the store in itself on every run. A sibling whose
// name starts alike is copied.
func TestZarrCpOverlap(t *testing.T) {
	tmp := t.TempDir()
	s := filepath.Join(tmp, "s.zarr")
	newStore(t, s)
	if err := os.Symlink(s, filepath.Join(tmp, "link.zarr")); err != nil {
		t.Fatal(err)
	}
	t.Chdir(tmp)
	want := treeFiles(t, s)
	for _, c := range [][2]string{
		{"s.zarr", "s.zarr"},
		{"s.zarr", "./x/../s.zarr/"},
		{"s.zarr", "s.zarr/inner.zarr"},
		{"link.zarr", "s.zarr/g/inner.zarr"},
		{"s.zarr/g", "link.zarr"},
		{"link.zarr/g/..", "s.zarr"},
	} {
		runKvik(t, nil, "cp", c[0], c[1]).expect(t, exitFailure).oneLineError(t, "one is inside the other")
		if got := treeFiles(t, s); !maps.Equal(got, want) {
			t.Fatalf("cp %s %s changed the store: %d files, %d before", c[0], c[1], len(got), len(want))
		}
	}
	runKvik(t, nil, "cp", "s.zarr", "s.zarr2").expect(t, exitOK)
	if got := treeFiles(t, "s.zarr2"); !maps.Equal(got, want) {
		t.Fatalf("the copy to a sibling: %d files, want %d", len(got), len(want))
	}
}

// TestZarrCpOverlapS3: the same for S3 prefixes of one bucket.
func TestZarrCpOverlapS3(t *testing.T) {
	srv := s3test.Start(t)
	env := s3Env(srv)
	local := filepath.Join(t.TempDir(), "z.zarr")
	newStore(t, local)
	runKvik(t, env, "cp", local, srv.URLOf("z.zarr")).expect(t, exitOK)
	want := treeFiles(t, filepath.Join(srv.Dir, s3test.Bucket))
	for _, dst := range []string{"z.zarr", "z.zarr/", "z.zarr/inner.zarr", "z%2ezarr/g/inner.zarr", ""} {
		runKvik(t, env, "cp", srv.URLOf("z.zarr"), srv.URLOf(dst)).expect(t, exitFailure).oneLineError(t, "one is inside the other")
	}
	if got := treeFiles(t, filepath.Join(srv.Dir, s3test.Bucket)); !maps.Equal(got, want) {
		t.Fatalf("the refused copies changed the bucket: %d files, %d before", len(got), len(want))
	}
	runKvik(t, env, "cp", srv.URLOf("z.zarr"), srv.URLOf("z.zarr2")).expect(t, exitOK)
}

// TestCpSync copies a file, a Zarr store, a Zarr array into a .npy file
// and, from a web server, a file and a .npy file, with --sync (the
// default) and with --sync=false, and checks
// through kvik's DEBUG records that every local file written was saved,
// and every directory made (kvik.MkdirAll), synced or not as asked (on
// a disk; in tmpfs nothing is synced), that
// every copy holds what its source holds, and that no temporary file is
// left.
func TestCpSync(t *testing.T) {
	tmp := t.TempDir()
	src := filepath.Join(tmp, "src.bin")
	data := []byte(strings.Repeat("kvik --sync ", 31_337))
	if err := os.WriteFile(src, data, 0o644); err != nil {
		t.Fatal(err)
	}
	store := filepath.Join(tmp, "src.zarr")
	newStore(t, store)
	runKvik(t, nil, "cp", "--memory", "host", filepath.Join(store, "g", "b"), filepath.Join(tmp, "web.npy")).expect(t, exitOK)
	web := strings.TrimSuffix(fileServer(t, src), "/src.bin")
	for _, sync := range []bool{true, false} {
		flag, name := fmt.Sprintf("--sync=%v", sync), fmt.Sprintf("sync-%v", sync)
		made := map[string]bool{} // the directories kvik cp logged making
		for _, c := range []struct{ src, dst string }{
			{src, filepath.Join(tmp, name, "file.bin")},
			{store, filepath.Join(tmp, name, "copy.zarr")},
			{filepath.Join(store, "g", "b"), filepath.Join(tmp, name, "b.npy")},
			{web + "/src.bin", filepath.Join(tmp, name, "dl.bin")}, // a download
			{web + "/web.npy", filepath.Join(tmp, name, "dl.npy")}, // a tensor file's, checked by its loader
		} {
			r := runKvik(t, nil, "cp", "-v=DEBUG", "--memory", "host", flag, c.src, c.dst).expect(t, exitOK)
			saves := 0
			for _, line := range strings.Split(r.stderr, "\n") {
				mem := strings.Contains(line, "memory_fs=true")
				if strings.Contains(line, `msg="kvik: mkdir"`) {
					for _, f := range strings.Fields(line) {
						if p, ok := strings.CutPrefix(f, "path="); ok {
							made[p] = true
						}
					}
					if want := fmt.Sprintf("synced=%v", sync && !mem); !strings.Contains(line, want) {
						t.Errorf("kvik cp %s %s: %s, want %s", flag, c.dst, line, want)
					}
				}
				if !strings.Contains(line, `msg="kvik: save"`) {
					continue
				}
				saves++
				if want := fmt.Sprintf("synced=%v", sync && !mem); !strings.Contains(line, want) || !strings.Contains(line, "path="+c.dst) {
					t.Errorf("kvik cp %s %s: %s, want %s", flag, c.dst, line, want)
				}
			}
			if saves == 0 {
				t.Fatalf("kvik cp %s %s: no save recorded:\n%s", flag, c.dst, r.stderr)
			}
		}
		dir := filepath.Join(tmp, name)
		for _, f := range []string{"file.bin", "dl.bin"} {
			if got, err := os.ReadFile(filepath.Join(dir, f)); err != nil || string(got) != string(data) {
				t.Fatalf("%s: %s differs from its source (%v)", flag, f, err)
			}
		}
		runKvik(t, nil, "cp", "--memory", "host", filepath.Join(dir, "copy.zarr", "g", "b"), filepath.Join(dir, "b2.npy")).expect(t, exitOK)
		a, errA := os.ReadFile(filepath.Join(dir, "b.npy"))
		b, errB := os.ReadFile(filepath.Join(dir, "b2.npy"))
		c, errC := os.ReadFile(filepath.Join(dir, "dl.npy"))
		if errA != nil || errB != nil || errC != nil || string(a) != string(b) || string(a) != string(c) || !strings.HasSuffix(string(a), "kvik zarr, 6") {
			t.Fatalf("%s: the array read from the source, from the store's copy and downloaded differ (%v, %v, %v)", flag, errA, errB, errC)
		}
		filepath.WalkDir(dir, func(p string, d fs.DirEntry, err error) error {
			if err == nil && kvik.IsPendingName(d.Name()) {
				t.Errorf("temporary file left: %s", p)
			}
			if err == nil && d.IsDir() && !made[p] {
				t.Errorf("%s: directory %s made unlogged (not through kvik.MkdirAll)", flag, p)
			}
			return err
		})
	}
}

// TestZarrTemporalToNpy copies a big-endian timedelta64 Zarr array with
// a scaled unit into a .npy file: the file's dtype is the array's, as
// NumPy spells it, and its int64s the array's (NaT among them).
func TestZarrTemporalToNpy(t *testing.T) {
	dir := t.TempDir()
	s, err := zarr.NewDirStore(filepath.Join(dir, "t.zarr"))
	if err != nil {
		t.Fatal(err)
	}
	m := zarr.Metadata{Shape: []int{7, 3}, ChunkShape: []int{4, 2}, DataType: zarr.DataType{Kind: zarr.TimeDelta, Size: 8, Unit: "us", Scale: 10},
		FillValue: "NaT", Codecs: []zarr.Codec{{Name: "bytes", Configuration: map[string]any{"endian": "big"}}}}
	a, err := zarr.Create(context.Background(), s, "d", m)
	if err != nil {
		t.Fatal(err)
	}
	want := make([]byte, 7*3*8)
	for i := range 7 * 3 {
		v := uint64(i*i*1_000_003) - 40
		if i == 5 {
			v = 1 << 63 // NaT
		}
		binary.LittleEndian.PutUint64(want[8*i:], v)
	}
	if err := a.WriteRegion(context.Background(), []int{0, 0}, []int{7, 3}, want); err != nil {
		t.Fatal(err)
	}
	dst := filepath.Join(dir, "d.npy")
	r := runKvik(t, nil, "cp", "--memory", "host", filepath.Join(dir, "t.zarr", "d"), dst).expect(t, exitOK)
	if !strings.Contains(r.stdout, "<m8[10us]") {
		t.Errorf("cp output names no <m8[10us]: %s", r.stdout)
	}
	got, err := npy.LoadHost(context.Background(), dst, nil)
	if err != nil {
		t.Fatal(err)
	}
	if got.Dtype != "<m8[10us]" || fmt.Sprint(got.Shape) != "[7 3]" || string(got.Data) != string(want) {
		t.Fatalf("%s: dtype %s shape %v, values equal %v", dst, got.Dtype, got.Shape, string(got.Data) == string(want))
	}
}

// TestZarrStringsToNpy copies Zarr arrays of fixed-length strings (a
// big-endian UTF-32 one of v2, bytes of v3) into .npy files: each file's
// dtype is NumPy's, its elements the array's, code points little-endian.
func TestZarrStringsToNpy(t *testing.T) {
	dir := t.TempDir()
	s, err := zarr.NewDirStore(filepath.Join(dir, "s.zarr"))
	if err != nil {
		t.Fatal(err)
	}
	for _, c := range []struct {
		name  string
		m     zarr.Metadata
		dtype npy.Dtype
	}{
		{"u", zarr.Metadata{ZarrFormat: 2, DataType: zarr.DataType{Kind: zarr.Unicode, Size: 12}, BigEndian: true, FillValue: "é"}, "<U3"},
		{"b", zarr.Metadata{DataType: zarr.DataType{Kind: zarr.Bytes, Size: 5}, FillValue: []byte("x"),
			Codecs: []zarr.Codec{{Name: "bytes"}, {Name: "zstd", Configuration: map[string]any{"level": 1}}}}, "|S5"},
	} {
		m := c.m
		m.Shape, m.ChunkShape = []int{5, 3}, []int{2, 2}
		a, err := zarr.Create(context.Background(), s, c.name, m)
		if err != nil {
			t.Fatal(err)
		}
		es := m.DataType.Size
		want := make([]byte, 5*3*es)
		for i := range want {
			want[i] = byte(i*7 + 1)
			if m.DataType.Kind == zarr.Unicode && i%4 >= 2 {
				want[i] = 0 // code points below U+10000
			}
		}
		// The last row left to the fill value.
		if err := a.WriteRegion(context.Background(), []int{0, 0}, []int{4, 3}, want[:4*3*es]); err != nil {
			t.Fatal(err)
		}
		fill := map[string][]byte{"u": {0xe9, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0}, "b": []byte("x\x00\x00\x00\x00")}[c.name]
		for i := 4 * 3 * es; i < len(want); i += es {
			copy(want[i:], fill)
		}
		dst := filepath.Join(dir, c.name+".npy")
		runKvik(t, nil, "cp", "--memory", "host", filepath.Join(dir, "s.zarr", c.name), dst).expect(t, exitOK)
		got, err := npy.LoadHost(context.Background(), dst, nil)
		if err != nil {
			t.Fatal(err)
		}
		if got.Dtype != c.dtype || fmt.Sprint(got.Shape) != "[5 3]" || string(got.Data) != string(want) {
			t.Fatalf("%s: dtype %s shape %v, values equal %v", dst, got.Dtype, got.Shape, string(got.Data) == string(want))
		}
	}
}

// TestZarrVarStrings: kvik info lists an array of variable-length
// strings by its type, its size "variable" (null in --json); kvik cp
// copies its store whole, verified, and saves arrays of them as .npy
// files of fixed-length strings (<U, |S of the longest element), as
// np.array makes of a list of str or bytes; it refuses, with a one-line
// error, an element ending in NUL (which NumPy would drop) and a file
// one long element would blow up.
func TestZarrVarStrings(t *testing.T) {
	dir := t.TempDir()
	src := filepath.Join(dir, "s.zarr")
	s, err := zarr.NewDirStore(src)
	if err != nil {
		t.Fatal(err)
	}
	m := zarr.Metadata{ZarrFormat: 2, Shape: []int{3, 2}, ChunkShape: []int{2, 2}, DataType: zarr.DataType{Kind: zarr.VarString}}
	a, err := zarr.Create(context.Background(), s, "names", m)
	if err != nil {
		t.Fatal(err)
	}
	want := []string{"a", "", "é中", "long " + strings.Repeat("x", 100), "\x00", "z"}
	if err := a.WriteStrings(context.Background(), []int{0, 0}, []int{3, 2}, want); err != nil {
		t.Fatal(err)
	}
	r := runKvik(t, nil, "info", src).expect(t, exitOK)
	if !regexp.MustCompile(`names\s+v2\s+string\s+\[3 2\]\s+\[2 2\]\s+vlen-utf8\s+variable`).MatchString(r.stdout) {
		t.Errorf("kvik info:\n%s", r.stdout)
	}
	r = runKvik(t, nil, "info", "--json", src).expect(t, exitOK)
	if !strings.Contains(r.stdout, `"dtype": "string"`) || !strings.Contains(r.stdout, `"bytes": null`) {
		t.Errorf("kvik info --json:\n%s", r.stdout)
	}
	dst := filepath.Join(dir, "copy.zarr")
	runKvik(t, nil, "cp", src, dst).expect(t, exitOK)
	c, err := zarr.OpenArray(context.Background(), filepath.Join(dst, "names"))
	if err != nil {
		t.Fatal(err)
	}
	if got, err := c.ReadStrings(context.Background(), []int{0, 0}, []int{3, 2}); err != nil || !slices.Equal(got, want) {
		t.Errorf("the copy reads %q, %v", got, err)
	}
	runKvik(t, nil, "cp", filepath.Join(src, "names"), filepath.Join(dir, "n.npy")).expect(t, exitFailure).oneLineError(t, "element 4 ends in NUL")
	if _, err := os.Stat(filepath.Join(dir, "n.npy")); !errors.Is(err, fs.ErrNotExist) {
		t.Errorf("a refused copy left a file: %v", err)
	}
	for _, c := range []struct {
		kind  zarr.Kind
		ss    []string
		dtype npy.Dtype
	}{
		{zarr.VarString, []string{"a", "", "é中𝄞", "x\x00y", "Zürich", "z"}, "<U6"},
		{zarr.VarBytes, []string{"\x00\x01", "", "abc", "\xff", "q", "r"}, "|S3"},
	} {
		name := fmt.Sprintf("k%c", c.kind)
		a, err := zarr.Create(context.Background(), s, name, zarr.Metadata{Shape: []int{3, 2}, ChunkShape: []int{2, 1}, DataType: zarr.DataType{Kind: c.kind}})
		if err != nil {
			t.Fatal(err)
		}
		if err := a.WriteStrings(context.Background(), []int{0, 0}, []int{3, 2}, c.ss); err != nil {
			t.Fatal(err)
		}
		out := filepath.Join(dir, name+".npy")
		runKvik(t, nil, "cp", filepath.Join(src, name), out).expect(t, exitOK)
		got, err := npy.LoadHost(context.Background(), out, nil)
		if err != nil {
			t.Fatal(err)
		}
		fixed := zarr.DataType{Kind: zarr.Unicode, Size: 4 * 6}
		if c.kind == zarr.VarBytes {
			fixed = zarr.DataType{Kind: zarr.Bytes, Size: 3}
		}
		back, err := fixed.Strings(got.Data)
		if got.Dtype != c.dtype || fmt.Sprint(got.Shape) != "[3 2]" || err != nil || !slices.Equal(back, c.ss) {
			t.Errorf("%s: dtype %s shape %v, %q, %v; want %s %q", out, got.Dtype, got.Shape, back, err, c.dtype, c.ss)
		}
	}
	// One long element among many short ones: refused, not 8 GB.
	long, err := zarr.Create(context.Background(), s, "long", zarr.Metadata{Shape: []int{4096}, ChunkShape: []int{1024}, DataType: zarr.DataType{Kind: zarr.VarString}})
	if err != nil {
		t.Fatal(err)
	}
	many := make([]string, 4096)
	many[7] = strings.Repeat("x", 200<<10)
	if err := long.WriteStrings(context.Background(), []int{0}, []int{4096}, many); err != nil {
		t.Fatal(err)
	}
	runKvik(t, nil, "cp", filepath.Join(src, "long"), filepath.Join(dir, "long.npy")).expect(t, exitFailure).oneLineError(t, "would take")
	// An element past what a .npy element may hold.
	many[7] = strings.Repeat("é", 300<<10)
	if err := long.WriteStrings(context.Background(), []int{0}, []int{4096}, many); err != nil {
		t.Fatal(err)
	}
	runKvik(t, nil, "cp", filepath.Join(src, "long"), filepath.Join(dir, "long.npy")).expect(t, exitFailure).oneLineError(t, "longest element takes")
}

// TestZarrStructuredToNpy copies a v2 Zarr array of a structured type
// (big-endian and padded fields, a subarray) into a .npy file: the file's
// dtype is the array's descr list, its records the array's, as stored.
func TestZarrStructuredToNpy(t *testing.T) {
	dir := t.TempDir()
	s, err := zarr.NewDirStore(filepath.Join(dir, "r.zarr"))
	if err != nil {
		t.Fatal(err)
	}
	descr := "[('x', '>f4'), ('', '|V4'), ('n', '<i2', (3,))]"
	m := zarr.Metadata{ZarrFormat: 2, Shape: []int{9, 4}, ChunkShape: []int{4, 3}, DataType: zarr.DataType{Kind: zarr.Raw, Size: 14, Struct: descr},
		Compressor: &zarr.Codec{Name: "blosc", Configuration: map[string]any{"cname": "zstd", "clevel": 3, "shuffle": 1}}}
	a, err := zarr.Create(context.Background(), s, "r", m)
	if err != nil {
		t.Fatal(err)
	}
	want := make([]byte, 9*4*14)
	for i := range want {
		want[i] = byte(i*31 + i/14)
	}
	if err := a.WriteRegion(context.Background(), []int{0, 0}, []int{9, 4}, want); err != nil {
		t.Fatal(err)
	}
	dst := filepath.Join(dir, "r.npy")
	runKvik(t, nil, "cp", "--memory", "host", filepath.Join(dir, "r.zarr", "r"), dst).expect(t, exitOK)
	got, err := npy.LoadHost(context.Background(), dst, nil)
	if err != nil {
		t.Fatal(err)
	}
	if got.Dtype != npy.Dtype(descr) || fmt.Sprint(got.Shape) != "[9 4]" || string(got.Data) != string(want) {
		t.Fatalf("%s: dtype %s shape %v, records equal %v", dst, got.Dtype, got.Shape, string(got.Data) == string(want))
	}
}
