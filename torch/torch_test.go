package torch

import (
	"archive/zip"
	"bytes"
	"context"
	"crypto/sha256"
	"encoding/binary"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"math/rand/v2"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"

	"github.com/kvikgo/kvik/safetensors"
)

// expected is testdata/expected.json: what torch.load gave of each
// fixture (make_fixtures.py, PyTorch 2.11).
type expected struct {
	Torch string
	Files map[string]map[string]struct {
		Dtype         Dtype
		Shape, Stride []int64
		StorageOffset int64 `json:"storage_offset"`
		Contiguous    bool
		SHA256        string
	}
}

func readExpected(t testing.TB) expected {
	t.Helper()
	b, err := os.ReadFile("testdata/expected.json")
	if err != nil {
		t.Fatal(err)
	}
	var e expected
	if err := json.Unmarshal(b, &e); err != nil {
		t.Fatal(err)
	}
	return e
}

// checkTensors compares a checkpoint's tensors, their bytes got by data,
// with what torch.load gave of the file: a strided one's elements in C
// order (Dense).
func checkTensors(t *testing.T, file string, got []Tensor, data func(*Tensor) []byte) {
	t.Helper()
	want := readExpected(t).Files[file]
	var names []string
	for i := range got {
		g := &got[i]
		names = append(names, g.Name)
		w, ok := want[g.Name]
		switch {
		case !ok:
			t.Errorf("%s: %q, which torch.load does not give", file, g.Name)
			continue
		case g.Dtype != w.Dtype || !slices.Equal(g.Shape, w.Shape) || !slices.Equal(g.Stride, w.Stride) ||
			g.StorageOffset != w.StorageOffset || g.Contiguous() != w.Contiguous:
			t.Errorf("%s: %q is %s %v stride %v at %d (contiguous %v), want %s %v %v at %d (%v)", file, g.Name,
				g.Dtype, g.Shape, g.Stride, g.StorageOffset, g.Contiguous(), w.Dtype, w.Shape, w.Stride, w.StorageOffset, w.Contiguous)
			continue
		}
		b := data(g)
		if int64(len(b)) != g.Size {
			t.Errorf("%s: %q: %d bytes, Size %d", file, g.Name, len(b), g.Size)
			continue
		}
		if !g.Contiguous() {
			// Dense gathers it, from a host load's bytes or a device's.
			h := Tensor{TensorInfo: g.TensorInfo, Placement: Placement{Data: b}}
			var err error
			if b, err = h.Dense(); err != nil {
				t.Fatal(err)
			}
		}
		if sum := sha256.Sum256(b); hex.EncodeToString(sum[:]) != w.SHA256 {
			t.Errorf("%s: %q: bytes differ from torch.load's", file, g.Name)
		}
	}
	if len(names) != len(want) {
		t.Errorf("%s: %d tensors %v, torch.load gives %d", file, len(names), names, len(want))
	}
}

// TestFixtures loads every fixture into host memory, and reads its
// header alone, against what torch.load gave: state dicts of every dtype
// (float8 and the unsigned ones through _rebuild_tensor_v3), views with
// offsets and strides, shared storages, a training checkpoint's nested
// dicts, lists, Parameters and optimizer state, a file saved from GPU
// memory.
func TestFixtures(t *testing.T) {
	e := readExpected(t)
	for file := range e.Files {
		p := filepath.Join("testdata", file)
		h, err := ReadHeader(context.Background(), p, nil)
		if err != nil {
			t.Fatalf("%s: %v", file, err)
		}
		c, err := LoadHost(context.Background(), p, nil)
		if err != nil {
			t.Fatalf("%s: %v", file, err)
		}
		record := strings.TrimSuffix(file, ".pt")
		if strings.HasPrefix(file, "legacy") {
			record = "" // the legacy format has no archive
		}
		if len(h.Tensors) != len(c.Tensors) || h.Record != record || h.Legacy != (record == "") || len(h.Skipped) != 0 {
			t.Errorf("%s: header of %d tensors, record %q, skipped %v; %d loaded", file, len(h.Tensors), h.Record, h.Skipped, len(c.Tensors))
		}
		checkTensors(t, file, c.Tensors, func(x *Tensor) []byte { return x.Data })
		for i := 1; i < len(h.Tensors); i++ {
			if h.Tensors[i].Offset < h.Tensors[i-1].Offset {
				t.Errorf("%s: tensors out of file order", file)
			}
		}
	}
}

// TestViews: tied weights and slices share a storage; the tied ones
// load into one memory, a slice into its own.
func TestViews(t *testing.T) {
	c, err := LoadHost(context.Background(), "testdata/views.pt", nil)
	if err != nil {
		t.Fatal(err)
	}
	emb, head, tail := c.Tensor("emb"), c.Tensor("lm_head"), c.Tensor("tail")
	if emb == nil || head == nil || tail == nil || emb.Storage != head.Storage || emb.Storage != tail.Storage {
		t.Fatalf("%v %v %v", emb, head, tail)
	}
	if !bytes.Equal(emb.Data, head.Data) || !bytes.Equal(emb.Data[16*4:], tail.Data) || &emb.Data[0] != &head.Data[0] || &emb.Data[16*4] == &tail.Data[0] {
		t.Error("tied weights or a slice load unlike their storage, or the tie not shared, or the slice shared")
	}
	// Dense: a contiguous tensor's Data itself; a tensor not in host
	// memory refused.
	if d, err := emb.Dense(); err != nil || &d[0] != &emb.Data[0] {
		t.Errorf("Dense of a contiguous tensor: %v", err)
	}
	dev := Tensor{TensorInfo: emb.TensorInfo, Placement: Placement{Device: 0, Ptr: 0x1000}}
	if _, err := dev.Dense(); !errors.Is(err, ErrInvalidArgument) {
		t.Errorf("Dense of a device tensor: %v", err)
	}
}

// TestOptions selects by name and by filter, and names a missing tensor.
func TestOptions(t *testing.T) {
	p := "testdata/checkpoint.pt"
	c, err := LoadHost(context.Background(), p, &Options{Names: []string{"model.weight", "optimizer.state.1.step"}})
	if err != nil || len(c.Tensors) != 2 || c.Tensor("model.weight") == nil {
		t.Fatalf("%v %v", c, err)
	}
	c, err = LoadHost(context.Background(), p, &Options{Filter: func(t *TensorInfo) bool { return strings.HasPrefix(t.Name, "optimizer.") }})
	if err != nil || len(c.Tensors) != 6 {
		t.Fatalf("%d tensors, %v", len(c.Tensors), err)
	}
	if _, err := LoadHost(context.Background(), p, &Options{Names: []string{"model.nope"}}); !errors.Is(err, ErrNotFound) {
		t.Fatalf("a missing name: %v", err)
	}
}

// TestLegacy: a file in the format before PyTorch 1.6, as PyTorch 2.11
// writes it with _use_new_zipfile_serialization=False, loads; one made
// here whose pickles pass the first read (1 MiB) loads too; hostile ones
// (counts that lie, storages past the end, keys twice or of no storage,
// a storage viewed in part, big-endian) are refused with typed errors.
func TestLegacy(t *testing.T) {
	c, err := LoadHost(context.Background(), "testdata/legacy.pt", nil)
	if err != nil {
		t.Fatal(err)
	}
	if w := c.Tensor("w"); w == nil || w.Dtype != "float32" || !slices.Equal(w.Shape, []int64{3}) ||
		!bytes.Equal(w.Data, bytes.Repeat([]byte{0, 0, 0x80, 0x3f}, 3)) {
		t.Fatalf("legacy.pt: %+v", c.Tensors)
	}
	rng := rand.New(rand.NewPCG(2, 6))
	data := make([]byte, 4*10)
	for i := range data {
		data[i] = byte(rng.Uint32())
	}
	// A string of 1.5 MiB beside the tensor: the pickles pass the first read.
	long := strings.Repeat("x", 3<<19)
	ok := legacyFile(legacyCase{count: 10, data: data, extra: long})
	h, err := header(ok)
	if err != nil || len(h.Tensors) != 1 || h.Tensors[0].Size != 32 || h.Tensors[0].StorageOffset != 2 {
		t.Fatalf("a legacy file with long pickles: %+v, %v", h, err)
	}
	if got := ok[h.Tensors[0].Offset : h.Tensors[0].Offset+32]; !bytes.Equal(got, data[8:40]) {
		t.Fatal("the tensor's bytes are not where the header puts them")
	}
	for _, cut := range []int{20, 200, len(ok) / 2} { // in its pickles, in the long one
		if _, err := header(ok[:cut]); !errors.Is(err, ErrInvalidCheckpoint) {
			t.Errorf("a legacy file cut at %d bytes: %v", cut, err)
		}
	}
	for name, c := range map[string]struct {
		c    legacyCase
		want []error
	}{
		"count lies":       {legacyCase{count: 10, data: data, header: 9}, []error{ErrInvalidCheckpoint}},
		"past the end":     {legacyCase{count: 10, data: data[:30]}, []error{ErrInvalidCheckpoint}},
		"huge count":       {legacyCase{count: 1 << 61, data: data, header: 1 << 61}, []error{ErrInvalidCheckpoint}},
		"key twice":        {legacyCase{count: 10, data: data, keys: []string{"k1", "k1"}}, []error{ErrInvalidCheckpoint}},
		"key of nothing":   {legacyCase{count: 10, data: data, keys: []string{"k2"}}, []error{ErrInvalidCheckpoint}},
		"no keys":          {legacyCase{count: 10, data: data, keys: []string{}}, []error{ErrInvalidCheckpoint}},
		"viewed in part":   {legacyCase{count: 10, data: data, view: true}, []error{ErrUnsupported, ErrLegacyFormat}},
		"big-endian":       {legacyCase{count: 10, data: data, bigEndian: true}, []error{ErrUnsupported, ErrLegacyFormat}},
		"tensor past data": {legacyCase{count: 10, data: data, offset: 5}, []error{ErrInvalidCheckpoint}},
	} {
		_, err := header(legacyFile(c.c))
		for _, w := range c.want {
			if !errors.Is(err, w) {
				t.Errorf("%s: %v, want %v", name, err, w)
			}
		}
	}
}

// legacyCase is a legacy checkpoint of one float32 tensor "w" of shape
// [8] at storage offset 2 (offset when set) of storage k1 of count
// elements: data after a count of header (count when 0), the keys list
// keys (["k1"] when nil).
type legacyCase struct {
	count, header, offset int64
	data                  []byte
	keys                  []string
	extra                 string // a string in the object beside the tensor
	view, bigEndian       bool
}

// legacyFile writes c as torch.save's legacy format does.
func legacyFile(c legacyCase) []byte {
	out := append([]byte(nil), legacyMagic...)
	out = append(out, '.')
	out = append(out, (&pk{}).op(0x80, 2, 'M', 0xe9, 0x03, '.').b...)
	sys := (&pk{}).op(0x80, 2, '}', '(').str("protocol_version").op('M', 0xe9, 0x03).str("little_endian")
	sys.op(map[bool]byte{false: 0x88, true: 0x89}[c.bigEndian]).op('u', '.')
	out = append(out, sys.b...)
	off := c.offset
	if off == 0 {
		off = 2
	}
	p := (&pk{}).op(0x80, 2, '}', '(').str("w").global("torch._utils", "_rebuild_tensor_v2").op('(')
	p.op('(').str("storage").global("torch", "FloatStorage").str("k1").str("cpu").int(c.count)
	if c.view {
		p.ints(0, 4)
	} else {
		p.op('N')
	}
	p.op('t', 'Q').int(off).ints(8).ints(1).op(0x89).global("collections", "OrderedDict").op(')', 'R', 't', 'R')
	if c.extra != "" {
		p.str("note").str(c.extra)
	}
	out = append(out, p.op('u', '.').b...)
	keys := c.keys
	if keys == nil {
		keys = []string{"k1"}
	}
	l := (&pk{}).op(0x80, 2, ']', '(')
	for _, k := range keys {
		l.str(k)
	}
	out = append(out, l.op('e', '.').b...)
	n := c.header
	if n == 0 {
		n = c.count
	}
	out = binary.LittleEndian.AppendUint64(out, uint64(n))
	return append(out, c.data...)
}

// pk builds a pickle the way torch.save writes one, protocol 2: a dict of
// tensors, each _rebuild_tensor_v2 of a persistent storage.
type pk struct{ b []byte }

func (p *pk) op(b ...byte) *pk { p.b = append(p.b, b...); return p }

func (p *pk) str(s string) *pk {
	p.op('X')
	p.b = binary.LittleEndian.AppendUint32(p.b, uint32(len(s)))
	return p.op([]byte(s)...)
}

func (p *pk) int(v int64) *pk {
	p.op(0x8a, 8)
	return p.op(binary.LittleEndian.AppendUint64(nil, uint64(v))...)
}

func (p *pk) global(m, n string) *pk { return p.op('c').op([]byte(m + "\n" + n + "\n")...) }

func (p *pk) ints(vs ...int64) *pk {
	p.op('(')
	for _, v := range vs {
		p.int(v)
	}
	return p.op('t')
}

// tensorPickle is a dict {name: tensor} of one tensor of storage
// (class, key, count), offset, shape, stride.
func tensorPickle(name, class, key string, count, offset int64, shape, stride []int64) []byte {
	p := (&pk{}).op(0x80, 2, '}', '(').str(name).global("torch._utils", "_rebuild_tensor_v2").op('(')
	p.op('(').str("storage").global("torch", class).str(key).str("cpu").int(count).op('t', 'Q')
	p.int(offset).ints(shape...).ints(stride...).op(0x89).global("collections", "OrderedDict").op(')', 'R', 't', 'R')
	return p.op('u', '.').b
}

// archiveOf writes a torch.save-like archive: record/data.pkl, then the
// members given (names relative to the record), stored unless deflate
// names them.
func archiveOf(t testing.TB, record string, pkl []byte, members map[string][]byte, deflate ...string) []byte {
	var buf bytes.Buffer
	w := zip.NewWriter(&buf)
	add := func(name string, b []byte) {
		m := zip.Store
		if slices.Contains(deflate, name) {
			m = zip.Deflate
		}
		f, err := w.CreateHeader(&zip.FileHeader{Name: record + "/" + name, Method: m})
		if err != nil {
			t.Fatal(err)
		}
		f.Write(b)
	}
	add("data.pkl", pkl)
	keys := make([]string, 0, len(members))
	for k := range members {
		keys = append(keys, k)
	}
	slices.Sort(keys)
	for _, k := range keys {
		add(k, members[k])
	}
	if err := w.Close(); err != nil {
		t.Fatal(err)
	}
	return buf.Bytes()
}

func header(b []byte) (*Header, error) { return DecodeHeader(bytes.NewReader(b), int64(len(b))) }

// TestNegativeSize: a size below zero is refused, not a panic.
func TestNegativeSize(t *testing.T) {
	if _, err := DecodeHeader(bytes.NewReader(nil), -5); !errors.Is(err, ErrInvalidCheckpoint) {
		t.Fatal(err)
	}
}

// TestHostile: archives and pickles that lie are refused before anything
// is allocated from their claims, each with its error.
func TestHostile(t *testing.T) {
	data := make([]byte, 48)
	for i := range data {
		data[i] = byte(i*7 + 1)
	}
	good := tensorPickle("w", "FloatStorage", "0", 12, 0, []int64{3, 4}, []int64{4, 1})
	if h, err := header(archiveOf(t, "m", good, map[string][]byte{"data/0": data})); err != nil || len(h.Tensors) != 1 || h.Tensors[0].Size != 48 {
		t.Fatalf("the good archive: %+v, %v", h, err)
	}
	cases := map[string]struct {
		b    []byte
		want error
	}{
		"not a zip":         {[]byte("hello, world, not a checkpoint"), ErrInvalidCheckpoint},
		"no data.pkl":       {archiveOf(t, "m", nil, nil)[:0], ErrInvalidCheckpoint},
		"no storage member": {archiveOf(t, "m", good, nil), ErrInvalidCheckpoint},
		"storage too short": {archiveOf(t, "m", good, map[string][]byte{"data/0": data[:44]}), ErrInvalidCheckpoint},
		"past the storage":  {archiveOf(t, "m", tensorPickle("w", "FloatStorage", "0", 12, 1, []int64{3, 4}, []int64{4, 1}), map[string][]byte{"data/0": data}), ErrInvalidCheckpoint},
		"stride past it":    {archiveOf(t, "m", tensorPickle("w", "FloatStorage", "0", 12, 0, []int64{3, 4}, []int64{5, 1}), map[string][]byte{"data/0": data}), ErrInvalidCheckpoint},
		"negative stride":   {archiveOf(t, "m", tensorPickle("w", "FloatStorage", "0", 12, 0, []int64{3, 4}, []int64{-4, 1}), map[string][]byte{"data/0": data}), ErrInvalidCheckpoint},
		"negative shape":    {archiveOf(t, "m", tensorPickle("w", "FloatStorage", "0", 12, 0, []int64{-3, 4}, []int64{4, 1}), map[string][]byte{"data/0": data}), ErrInvalidCheckpoint},
		"overflowing shape": {archiveOf(t, "m", tensorPickle("w", "FloatStorage", "0", 12, 0, []int64{1 << 40, 1 << 40}, []int64{1 << 40, 1}), map[string][]byte{"data/0": data}), ErrInvalidCheckpoint},
		"huge storage":      {archiveOf(t, "m", tensorPickle("w", "FloatStorage", "0", 1<<62, 0, []int64{3, 4}, []int64{4, 1}), map[string][]byte{"data/0": data}), ErrInvalidCheckpoint},
		"rank mismatch":     {archiveOf(t, "m", tensorPickle("w", "FloatStorage", "0", 12, 0, []int64{3, 4}, []int64{4}), map[string][]byte{"data/0": data}), ErrInvalidCheckpoint},
		"key leaves data/":  {archiveOf(t, "m", tensorPickle("w", "FloatStorage", "../x", 12, 0, []int64{3, 4}, []int64{4, 1}), map[string][]byte{"x": data}), ErrInvalidCheckpoint},
		"quantized storage": {archiveOf(t, "m", tensorPickle("w", "QInt8Storage", "0", 48, 0, []int64{3, 4}, []int64{4, 1}), map[string][]byte{"data/0": data}), ErrUnsupportedDtype},
		"compressed":        {archiveOf(t, "m", good, map[string][]byte{"data/0": data}, "data/0"), ErrUnsupported},
		"big-endian":        {archiveOf(t, "m", good, map[string][]byte{"data/0": data, "byteorder": []byte("big")}), ErrUnsupported},
		"odd byteorder":     {archiveOf(t, "m", good, map[string][]byte{"data/0": data, "byteorder": []byte("middle")}), ErrInvalidCheckpoint},
		"bad pickle":        {archiveOf(t, "m", good[:len(good)-1], map[string][]byte{"data/0": data}), ErrInvalidCheckpoint},
		"pickle of junk":    {archiveOf(t, "m", []byte("\x80\x02}(X\x01\x00\x00\x00wQu."), nil), ErrInvalidCheckpoint},
		"deep":              {archiveOf(t, "m", append(append([]byte("\x80\x02"), bytes.Repeat([]byte("]"), 100)...), append(bytes.Repeat([]byte("a"), 99), '.')...), nil), ErrInvalidCheckpoint},
	}
	// A tuple of a tuple of ... 60 deep, each holding the one below
	// twice: 2^60 references from 300 bytes.
	bomb := []byte("\x80\x02}(X\x01\x00\x00\x00xNq\x000")
	for k := range 60 {
		bomb = append(bomb, 'h', byte(k), 'h', byte(k), 0x86, 'q', byte(k+1), '0')
	}
	cases["references"] = struct {
		b    []byte
		want error
	}{archiveOf(t, "m", append(bomb, 'h', 60, 'u', '.'), nil), ErrInvalidCheckpoint}
	two := archiveOf(t, "m", good, map[string][]byte{"data/0": data})
	var buf bytes.Buffer
	w := zip.NewWriter(&buf)
	for _, n := range []string{"a/data.pkl", "b/data.pkl"} {
		f, _ := w.CreateHeader(&zip.FileHeader{Name: n, Method: zip.Store})
		f.Write(good)
	}
	w.Close()
	cases["two data.pkl"] = struct {
		b    []byte
		want error
	}{buf.Bytes(), ErrInvalidCheckpoint}
	for n := 0; n < len(two); n += 13 {
		cases[fmt.Sprint("cut at ", n)] = struct {
			b    []byte
			want error
		}{two[:n], ErrInvalidCheckpoint}
	}
	flipped := bytes.Clone(two)
	flipped[bytes.Index(flipped, []byte("FloatStorage"))] ^= 0x20
	cases["data.pkl's CRC"] = struct {
		b    []byte
		want error
	}{flipped, ErrInvalidCheckpoint}
	for name, c := range cases {
		if h, err := header(c.b); !errors.Is(err, c.want) {
			t.Errorf("%s: %v (%v), want %v", name, err, h, c.want)
		}
	}
}

// TestSkipped: a tensor this package cannot rebuild (here a quantized
// one's function) is named in Skipped; the others load.
func TestSkipped(t *testing.T) {
	p := (&pk{}).op(0x80, 2, '}', '(').str("q").global("torch._utils", "_rebuild_qtensor").op(')', 'R', 'u', '.')
	h, err := header(archiveOf(t, "m", p.b, nil))
	if err != nil || len(h.Tensors) != 0 || len(h.Skipped) != 1 || !strings.Contains(h.Skipped[0], "_rebuild_qtensor") {
		t.Fatalf("%+v, %v", h, err)
	}
}

// FuzzDecodeHeader: any bytes give a header whose tensors lie in the
// file, or an error; never a panic.
func FuzzDecodeHeader(f *testing.F) {
	for _, n := range []string{"state_dict.pt", "checkpoint.pt", "legacy.pt"} {
		b, err := os.ReadFile(filepath.Join("testdata", n))
		if err != nil {
			f.Fatal(err)
		}
		f.Add(b)
	}
	f.Add(legacyFile(legacyCase{count: 10, data: make([]byte, 40), extra: "x"}))
	f.Fuzz(func(t *testing.T, b []byte) {
		h, err := header(b)
		if err != nil {
			return
		}
		for _, x := range h.Tensors {
			if x.Offset < 0 || x.Size < 0 || x.Offset+x.Size > int64(len(b)) {
				t.Fatalf("%q at %d, %d bytes, in a %d-byte file", x.Name, x.Offset, x.Size, len(b))
			}
		}
	})
}

// shardedIndex writes into a temporary directory a sharded checkpoint as
// save_pretrained writes one without safetensors: views.pt and
// checkpoint.pt as its two shards, pytorch_model.bin.index.json mapping
// each tensor to its shard, plus the entries extra adds (name: file).
func shardedIndex(t *testing.T, extra map[string]string) string {
	t.Helper()
	dir := t.TempDir()
	wm := map[string]string{}
	for i, file := range []string{"views.pt", "checkpoint.pt"} {
		shard := fmt.Sprintf("pytorch_model-%05d-of-00002.bin", i+1)
		b, err := os.ReadFile(filepath.Join("testdata", file))
		if err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(filepath.Join(dir, shard), b, 0o644); err != nil {
			t.Fatal(err)
		}
		for name := range readExpected(t).Files[file] {
			wm[name] = shard
		}
	}
	for k, v := range extra {
		wm[k] = v
	}
	b, _ := json.Marshal(map[string]any{"metadata": map[string]any{"total_size": 1}, "weight_map": wm})
	p := filepath.Join(dir, "pytorch_model.bin.index.json")
	if err := os.WriteFile(p, b, 0o644); err != nil {
		t.Fatal(err)
	}
	return p
}

// checkIndexed compares the tensors of a sharded load with what
// torch.load gave of each shard's file.
func checkIndexed(t *testing.T, c *Checkpoint, data func(*Tensor) []byte) {
	t.Helper()
	e := readExpected(t)
	byFile := map[string][]Tensor{}
	for _, x := range c.Tensors {
		for _, file := range []string{"views.pt", "checkpoint.pt"} {
			if _, ok := e.Files[file][x.Name]; ok {
				byFile[file] = append(byFile[file], x)
			}
		}
	}
	for file, ts := range byFile {
		checkTensors(t, file, ts, data)
	}
	if len(byFile) != 2 || c.Tensor("emb") == nil || c.Tensor("optimizer.state.1.step") == nil {
		t.Errorf("a sharded load of %d tensors", len(c.Tensors))
	}
}

// TestIndex loads a sharded checkpoint (pytorch_model.bin.index.json)
// into host memory, whole and by names; a name the index lacks, one its
// shard lacks, and a shard outside the index's directory are refused.
func TestIndex(t *testing.T) {
	p := shardedIndex(t, nil)
	c, err := LoadIndexHost(context.Background(), p, nil)
	if err != nil {
		t.Fatal(err)
	}
	checkIndexed(t, c, func(x *Tensor) []byte { return x.Data })
	c, err = LoadIndexHost(context.Background(), p, &Options{Names: []string{"t", "model.bias"}})
	if err != nil || len(c.Tensors) != 2 || c.Tensor("t") == nil || c.Tensor("model.bias") == nil {
		t.Fatalf("by names: %v, %v", c, err)
	}
	if _, err := LoadIndexHost(context.Background(), p, &Options{Names: []string{"nope"}}); !errors.Is(err, ErrNotFound) {
		t.Errorf("a name the index lacks: %v", err)
	}
	ghost := shardedIndex(t, map[string]string{"ghost": "pytorch_model-00001-of-00002.bin"})
	if _, err := LoadIndexHost(context.Background(), ghost, nil); !errors.Is(err, ErrNotFound) {
		t.Errorf("a name its shard lacks: %v", err)
	}
	out := shardedIndex(t, map[string]string{"x": "../elsewhere.bin"})
	if _, err := LoadIndexHost(context.Background(), out, nil); !errors.Is(err, safetensors.ErrInvalidIndex) {
		t.Errorf("a shard outside the directory: %v", err)
	}
}

// TestModuleState: the tensors in a pickled object's state are found
// under its attributes' names, a module's containers adding none
// ("fc.weight" of {"_modules": {"fc": {"_parameters": {"weight": ...}}}}),
// and an object whose state refers to itself is walked once.
func TestModuleState(t *testing.T) {
	data := make([]byte, 24)
	for i := range data {
		data[i] = byte(i * 7)
	}
	p := (&pk{}).op(0x80, 2).global("__main__", "Net").op(')', 0x81, 'q', 0) // the module, memo 0
	p.op('}', '(').str("self").op('h', 0).str("training").op(0x88)           // its state: itself, a flag
	p.str("_modules").op('}', '(').str("fc").global("__main__", "Linear").op(')', 0x81)
	p.op('}', '(').str("_parameters").op('}', '(').str("weight")
	p.global("torch._utils", "_rebuild_tensor_v2").op('(')
	p.op('(').str("storage").global("torch", "FloatStorage").str("0").str("cpu").int(6).op('t', 'Q')
	p.int(0).ints(2, 3).ints(3, 1).op(0x89).global("collections", "OrderedDict").op(')', 'R', 't', 'R')
	p.op('u', 'u', 'b') // fc's _parameters, fc's state, BUILD fc
	p.op('u', 'u', 'b', '.')
	h, err := header(archiveOf(t, "net", p.b, map[string][]byte{"data/0": data}))
	if err != nil {
		t.Fatal(err)
	}
	if len(h.Tensors) != 1 || h.Tensors[0].Name != "fc.weight" || h.Tensors[0].Size != 24 {
		t.Fatalf("tensors %+v", h.Tensors)
	}
}
