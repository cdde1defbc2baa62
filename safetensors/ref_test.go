package safetensors

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"math/rand/v2"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"unsafe"

	"github.com/kvikgo/kvik/internal/testkit/gputest"
)

// TestReferenceFiles loads files written by safetensors.torch.save_file
// and compares dtype, shape, metadata and every tensor's sha256 with what
// the reference library loaded (expected.json, written by
// bench/loaders_xcheck.py). With a GPU it loads them to device 0 too.
func TestReferenceFiles(t *testing.T) {
	for _, dir := range refDirs() {
		t.Run(filepath.Base(dir), func(t *testing.T) { referenceFiles(t, dir) })
	}
}

func referenceFiles(t *testing.T, dir string) {
	e := readExpected(t, dir)
	gpu := false
	if os.Getenv("KVIK_ST_DEVICE") != "" {
		gputest.Need(t)
		gpu = true
	}
	for name, want := range e.Files {
		p := filepath.Join(dir, name)
		m, err := LoadHost(context.Background(), p, nil)
		if err != nil {
			t.Fatalf("%s: %v", name, err)
		}
		checkExpected(t, name, m, want, false)
		if gpu {
			md, err := Load(context.Background(), p, nil)
			if err != nil {
				t.Fatalf("%s: %v", name, err)
			}
			checkExpected(t, name, md, want, true)
			if err := md.Close(); err != nil {
				t.Fatal(err)
			}
		}
	}
}

func checkExpected(t *testing.T, file string, m *Model, want expectedFile, dev bool) {
	t.Helper()
	if len(m.Tensors) != len(want.Tensors) || !equalMeta(m.Metadata, want.Metadata) {
		t.Errorf("%s: %d tensors, metadata %v; want %d, %v", file, len(m.Tensors), m.Metadata, len(want.Tensors), want.Metadata)
	}
	for name, w := range want.Tensors {
		g := m.Tensor(name)
		if g == nil {
			t.Errorf("%s: %s missing", file, name)
			continue
		}
		data := g.Data
		if !dev && len(data) > 0 && uintptr(unsafe.Pointer(&data[0]))%Alignment != 0 {
			t.Errorf("%s: %s host data not aligned to %d", file, name, Alignment)
		}
		if dev {
			if g.Size() > 0 && (g.Ptr == 0 || g.Ptr%Alignment != 0) {
				t.Errorf("%s: %s at %#x, not aligned", file, name, g.Ptr)
			}
			data = gputest.FromDevice(t, g.Device, g.Ptr, g.Size())
		}
		if string(g.Dtype) != w.Dtype || !slices.Equal(g.Shape, w.Shape) || sum(data) != w.Sha256 {
			t.Errorf("%s: %s is %s %v %s, want %+v", file, name, g.Dtype, g.Shape, sum(data)[:8], w)
		}
	}
}

// TestIndex saves shards with Save, writes an index for them, and checks
// the index loads as one model (all, and a subset); where the reference
// directory has a sharded checkpoint written by safetensors (the GPU
// machine's KVIK_ST_REF_DIR), it checks that one against expected.json too.
func TestIndex(t *testing.T) {
	rng := rand.New(rand.NewPCG(61, 62))
	dir := t.TempDir()
	wm := map[string]string{}
	var all []SaveTensor
	for i := range 3 {
		ts := randomTensors(rng, 10+i)
		for j := range ts {
			ts[j].Name = fmt.Sprintf("layers.%d.%s", i, ts[j].Name)
			wm[ts[j].Name] = fmt.Sprintf("model-%05d-of-00003.safetensors", i+1)
		}
		if err := Save(context.Background(), filepath.Join(dir, wm[ts[0].Name]), ts, nil); err != nil {
			t.Fatal(err)
		}
		all = append(all, ts...)
	}
	b, _ := json.Marshal(Index{Metadata: map[string]json.RawMessage{"total_size": json.RawMessage("16106127360")}, WeightMap: wm})
	ix := filepath.Join(dir, "model.safetensors.index.json")
	os.WriteFile(ix, b, 0o644)
	m, err := LoadIndexHost(context.Background(), ix, nil)
	if err != nil {
		t.Fatal(err)
	}
	if len(m.Tensors) != len(all) || m.Metadata["total_size"] != "16106127360" {
		t.Fatalf("index loaded %d tensors of %d, metadata %v", len(m.Tensors), len(all), m.Metadata)
	}
	for _, w := range all {
		checkHostTensor(t, m, w)
	}
	sub, err := LoadIndexHost(context.Background(), ix, &Options{Names: []string{all[0].Name, all[len(all)-1].Name}})
	if err != nil || len(sub.Tensors) != 2 {
		t.Fatalf("subset: %v", err)
	}
	checkHostTensor(t, sub, all[len(all)-1])
	if _, err := LoadIndexHost(context.Background(), ix, &Options{Names: []string{"x"}}); !errors.Is(err, ErrNotFound) {
		t.Fatalf("missing name: %v", err)
	}
	for _, dir := range refDirs() {
		referenceIndex(t, dir)
	}
}

// referenceIndex loads dir's model.safetensors.index.json, where there is
// one, and checks its tensors against expected.json.
func referenceIndex(t *testing.T, dir string) {
	ref := filepath.Join(dir, "model.safetensors.index.json")
	if _, err := os.Stat(ref); err != nil {
		return
	}
	e := readExpected(t, dir)
	rm, err := LoadIndexHost(context.Background(), ref, nil)
	if err != nil {
		t.Fatal(err)
	}
	n := 0
	for file, want := range e.Files {
		if !strings.HasPrefix(file, "model-") {
			continue
		}
		for name, w := range want.Tensors {
			if g := rm.Tensor(name); g == nil || sum(g.Data) != w.Sha256 {
				t.Fatalf("%s from the reference index differs", name)
			}
			n++
		}
	}
	if n == 0 || n != len(rm.Tensors) {
		t.Fatalf("reference index loaded %d tensors, shards hold %d", len(rm.Tensors), n)
	}
}

func TestBadIndex(t *testing.T) {
	dir := t.TempDir()
	for name, body := range map[string]string{
		"escape":  `{"weight_map":{"a":"../x.safetensors"}}`,
		"abs":     `{"weight_map":{"a":"/etc/passwd"}}`,
		"nomap":   `{"metadata":{}}`,
		"notjson": `{"weight_map":`,
	} {
		p := filepath.Join(dir, name+".json")
		os.WriteFile(p, []byte(body), 0o644)
		if _, err := LoadIndexHost(context.Background(), p, nil); !errors.Is(err, ErrInvalidIndex) {
			t.Errorf("%s: %v, want ErrInvalidIndex", name, err)
		}
	}
	// A tensor the index names that its shard lacks.
	p := filepath.Join(dir, "s.safetensors")
	if err := Save(context.Background(), p, []SaveTensor{{Name: "a", Dtype: U8, Shape: []int64{1}, Data: []byte{7}}}, nil); err != nil {
		t.Fatal(err)
	}
	ix := filepath.Join(dir, "m.index.json")
	os.WriteFile(ix, []byte(`{"weight_map":{"a":"s.safetensors","b":"s.safetensors"}}`), 0o644)
	if _, err := LoadIndexHost(context.Background(), ix, nil); !errors.Is(err, ErrNotFound) {
		t.Errorf("missing tensor: %v, want ErrNotFound", err)
	}
}

// TestEncodeAsReference encodes the tensors and metadata of each file
// the reference library wrote (testdata/torch: every dtype, 0-d and
// empty tensors, metadata, shards) with Encode, and compares the result
// with the file byte for byte: the same header (order of tensors, of
// fields, padding) and data.
func TestEncodeAsReference(t *testing.T) {
	dir := filepath.Join("testdata", "torch")
	files, _ := filepath.Glob(filepath.Join(dir, "*.safetensors"))
	if len(files) < 4 {
		t.Fatalf("%d files in %s", len(files), dir)
	}
	for _, p := range files {
		want, err := os.ReadFile(p)
		if err != nil {
			t.Fatal(err)
		}
		m, err := LoadHost(context.Background(), p, nil)
		if err != nil {
			t.Fatal(err)
		}
		ts := make([]SaveTensor, len(m.Tensors))
		for i, x := range slices.Backward(m.Tensors) { // an order of its own
			ts[len(ts)-1-i] = SaveTensor{Name: x.Name, Dtype: x.Dtype, Shape: x.Shape, Data: x.Data}
		}
		ps, err := Encode(ts, m.Metadata)
		if err != nil {
			t.Fatal(err)
		}
		var got []byte
		for _, pc := range ps {
			got = append(got, pc.Data...)
		}
		if !bytes.Equal(got, want) {
			n := min(len(got), len(want))
			i := 0
			for i < n && got[i] == want[i] {
				i++
			}
			t.Errorf("%s: Encode differs from the reference library's file at byte %d of %d (%d encoded)", filepath.Base(p), i, len(want), len(got))
		}
		m.Close()
	}
}
