package safetensors

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io/fs"
	"log/slog"
	"math/rand/v2"
	"net/http"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/kvikgo/kvik"
	"github.com/kvikgo/kvik/internal/testkit/gputest"
	"github.com/kvikgo/kvik/internal/testkit/logtest"
	"github.com/kvikgo/kvik/internal/testkit/s3test"
)

// shardTensors makes n tensors of random dtypes and unaligned sizes up to
// maxBytes, with random bytes.
func shardTensors(rng *rand.Rand, n, maxBytes int) []SaveTensor {
	dts := []Dtype{U8, I16, BF16, F32, F64}
	ts := make([]SaveTensor, n)
	for i := range ts {
		d := dts[rng.IntN(len(dts))]
		elems := rng.IntN(maxBytes/(d.Bits()/8) + 1)
		if rng.IntN(5) == 0 {
			elems = rng.IntN(10) // small: a norm, a bias, a scalar-like tensor
		}
		b := make([]byte, elems*d.Bits()/8)
		for j := range b {
			b[j] = byte(rng.Uint32())
		}
		ts[i] = SaveTensor{Name: fmt.Sprintf("model.layers.%d.w%d", i/3, i%3), Dtype: d, Shape: []int64{int64(elems)}, Data: b}
	}
	return ts
}

// rawIndex is an index file as a transformers-style reader sees it.
type rawIndex struct {
	Metadata  map[string]any    `json:"metadata"`
	WeightMap map[string]string `json:"weight_map"`
}

// checkSharded checks the sharded checkpoint that SaveSharded wrote for
// ts at index (reading its files with read): shard names and count,
// total_size, each shard within max (or one tensor alone), shards
// filled greedily in order, and every tensor's bytes through
// LoadIndexHost.
func checkSharded(t *testing.T, index string, read func(file string) []byte, ts []SaveTensor, meta map[string]string, max int64, opts ...kvik.RemoteOption) {
	t.Helper()
	var ix rawIndex
	if err := json.Unmarshal(read(filepath.Base(index)), &ix); err != nil {
		t.Fatalf("index: %v", err)
	}
	var total int64
	for _, w := range ts {
		total += int64(len(w.Data))
	}
	if ix.Metadata["total_size"] != float64(total) {
		t.Fatalf("total_size %v, want %d", ix.Metadata["total_size"], total)
	}
	for k, v := range meta {
		if k != "total_size" && ix.Metadata[k] != v {
			t.Fatalf("index metadata %q = %v, want %q", k, ix.Metadata[k], v)
		}
	}
	if len(ix.WeightMap) != len(ts) {
		t.Fatalf("weight_map has %d tensors, want %d", len(ix.WeightMap), len(ts))
	}
	// Shard sizes, by shard number, and the order of the tensors.
	var files []string
	for _, f := range ix.WeightMap {
		if !slices.Contains(files, f) {
			files = append(files, f)
		}
	}
	slices.Sort(files)
	n := len(files)
	sizes := make([]int64, n)
	first := make([]int, n) // the first input tensor of each shard
	for i := range first {
		first[i] = -1
	}
	for i, w := range ts {
		f := ix.WeightMap[w.Name]
		k := slices.Index(files, f)
		if f != ShardFileName(DefaultShardName, k+1, n) {
			t.Fatalf("tensor %s in %q, not a shard name of %d", w.Name, f, n)
		}
		sizes[k] += int64(len(w.Data))
		if first[k] < 0 {
			first[k] = i
		}
	}
	var inOrder []int // shards of tensors that fit, in input order
	for k := range n {
		alone := sizes[k] > max
		if alone {
			count := 0
			for _, w := range ts {
				if ix.WeightMap[w.Name] == files[k] {
					count++
				}
			}
			if count != 1 {
				t.Fatalf("shard %d holds %d bytes > %d in %d tensors", k+1, sizes[k], max, count)
			}
			continue
		}
		inOrder = append(inOrder, k)
	}
	for j := 1; j < len(inOrder); j++ { // greedy: the next shard's first tensor did not fit
		a, b := inOrder[j-1], inOrder[j]
		if first[b] < first[a] {
			t.Fatalf("shard %d starts before shard %d in the input", b+1, a+1)
		}
		if sizes[a]+int64(len(ts[first[b]].Data)) <= max {
			t.Fatalf("shard %d (%d bytes) had room for %s (%d bytes), max %d", a+1, sizes[a], ts[first[b]].Name, len(ts[first[b]].Data), max)
		}
	}
	// Each shard is a safetensors file with the metadata in its header.
	for _, f := range files {
		raw := read(f)
		h, err := DecodeHeader(bytes.NewReader(raw), int64(len(raw)))
		if err != nil {
			t.Fatalf("%s: %v", f, err)
		}
		if !equalMeta(h.Metadata, meta) {
			t.Fatalf("%s: metadata %v, want %v", f, h.Metadata, meta)
		}
	}
	m, err := LoadIndexHost(context.Background(), index, nil, opts...)
	if err != nil {
		t.Fatal(err)
	}
	defer m.Close()
	for _, w := range ts {
		checkHostTensor(t, m, w)
	}
}

func localRead(t *testing.T, dir string) func(string) []byte {
	return func(f string) []byte {
		b, err := os.ReadFile(filepath.Join(dir, f))
		if err != nil {
			t.Fatal(err)
		}
		return b
	}
}

// dirFiles returns the names in dir, sorted.
func dirFiles(t *testing.T, dir string) []string {
	t.Helper()
	ents, err := os.ReadDir(dir)
	if err != nil && !errors.Is(err, os.ErrNotExist) {
		t.Fatal(err)
	}
	var names []string
	for _, e := range ents {
		names = append(names, e.Name())
	}
	return names
}

// TestSaveShardedRoundTrip saves random tensors with random shard sizes
// (some smaller than a tensor) and reads them back with LoadIndexHost.
func TestSaveShardedRoundTrip(t *testing.T) {
	rng := rand.New(rand.NewPCG(uint64(time.Now().UnixNano()), 61))
	logs := &logtest.Capture{Level: kvik.LevelDebug}
	defer kvik.SetLogger(slog.New(logs))()
	for round := range 12 {
		ts := shardTensors(rng, 1+rng.IntN(30), 1+rng.IntN(200_000))
		max := int64(1 + rng.IntN(600_000))
		meta := map[string]string{"format": "pt", "round": fmt.Sprint(round)}
		dir := filepath.Join(t.TempDir(), "new", "ckpt") // created
		var opts []kvik.RemoteOption
		if round%2 == 1 {
			opts = append(opts, kvik.WithoutSync())
		}
		logs.Reset()
		index, err := SaveSharded(context.Background(), dir, ts, meta, &ShardOptions{MaxShardSize: max, Parallel: rng.IntN(4)}, opts...)
		if err != nil {
			t.Fatal(err)
		}
		// Every file is saved as opts say: synced unless WithoutSync
		// (or in tmpfs, where nothing is).
		recs := logs.Find("kvik: save")
		if len(recs) != len(dirFiles(t, dir)) {
			t.Fatalf("round %d: %d saves recorded for %d files", round, len(recs), len(dirFiles(t, dir)))
		}
		for _, r := range recs {
			if (r.Attrs["synced"] == "true") != (len(opts) == 0 && r.Attrs["memory_fs"] == "false") {
				t.Fatalf("round %d (WithoutSync %v): save record %v", round, len(opts) > 0, r.Attrs)
			}
		}
		// So is every directory made (new and new/ckpt).
		mk := logs.Find("kvik: mkdir")
		if len(mk) != 2 || mk[1].Attrs["path"] != dir {
			t.Fatalf("round %d: mkdir records %v, want new and %s", round, mk, dir)
		}
		for _, r := range mk {
			if (r.Attrs["synced"] == "true") != (len(opts) == 0 && r.Attrs["memory_fs"] == "false") {
				t.Fatalf("round %d (WithoutSync %v): mkdir record %v", round, len(opts) > 0, r.Attrs)
			}
		}
		if index != filepath.Join(dir, "model.safetensors.index.json") {
			t.Fatalf("index at %s", index)
		}
		checkSharded(t, index, localRead(t, dir), ts, meta, max)
		for _, f := range dirFiles(t, dir) {
			if kvik.IsPendingName(f) {
				t.Fatalf("temporary file %s left", f)
			}
		}
	}
}

// TestSaveShardedLayout pins the layout on a small case: names, the
// greedy split, a tensor larger than the shard size alone, and the index
// document.
func TestSaveShardedLayout(t *testing.T) {
	mk := func(name string, n int) SaveTensor {
		return SaveTensor{Name: name, Dtype: U8, Shape: []int64{int64(n)}, Data: bytes.Repeat([]byte{byte(n)}, n)}
	}
	ts := []SaveTensor{mk("a", 40), mk("b", 50), mk("c", 20), mk("big", 300), mk("d", 90), mk("e", 10)}
	dir := t.TempDir()
	index, err := SaveSharded(context.Background(), dir, ts, nil, &ShardOptions{MaxShardSize: 100, Name: "weights"})
	if err != nil {
		t.Fatal(err)
	}
	want := []string{"weights-00001-of-00004.safetensors", "weights-00002-of-00004.safetensors",
		"weights-00003-of-00004.safetensors", "weights-00004-of-00004.safetensors", "weights.safetensors.index.json"}
	if got := dirFiles(t, dir); !slices.Equal(got, want) {
		t.Fatalf("files %v, want %v", got, want)
	}
	b, _ := os.ReadFile(index)
	var ix rawIndex
	if err := json.Unmarshal(b, &ix); err != nil {
		t.Fatal(err)
	}
	wantMap := map[string]string{"a": want[0], "b": want[0], "big": want[1], "c": want[2], "d": want[3], "e": want[3]}
	if fmt.Sprint(ix.WeightMap) != fmt.Sprint(wantMap) || fmt.Sprint(ix.Metadata) != "map[total_size:510]" {
		t.Fatalf("index %s", b)
	}
}

// TestSaveShardedRejects refuses bad options and tensors before writing
// anything.
func TestSaveShardedRejects(t *testing.T) {
	ok := []SaveTensor{{Name: "a", Dtype: U8, Shape: []int64{1}, Data: []byte{1}}}
	for _, c := range []struct {
		ts []SaveTensor
		o  *ShardOptions
	}{
		{ok, &ShardOptions{MaxShardSize: -1}},
		{ok, &ShardOptions{Parallel: -1}},
		{ok, &ShardOptions{Name: "../x"}},
		{ok, &ShardOptions{Name: "a/b"}},
		{ok, &ShardOptions{Name: ".hidden"}},
		{append(ok, ok[0]), nil},
		{[]SaveTensor{{Name: "a", Dtype: U8, Shape: []int64{2}, Data: []byte{1}}}, nil},
		{[]SaveTensor{{Name: "__metadata__", Dtype: U8, Shape: []int64{1}, Data: []byte{1}}}, nil},
	} {
		dir := filepath.Join(t.TempDir(), "d")
		_, err := SaveSharded(context.Background(), dir, c.ts, nil, c.o)
		if !errors.Is(err, ErrInvalidArgument) {
			t.Fatalf("%+v: %v, want ErrInvalidArgument", c.o, err)
		}
		if _, err := os.Stat(dir); !errors.Is(err, os.ErrNotExist) {
			t.Fatalf("%+v: a refused save made %s", c.o, dir)
		}
	}
}

// TestSaveShardedFailure fails the third shard (a tensor at a device
// address that is not device memory): no index, and the two shards
// already written are removed.
func TestSaveShardedFailure(t *testing.T) {
	var ts []SaveTensor // 100 bytes each: three to a shard of 300
	for i := range 12 {
		ts = append(ts, SaveTensor{Name: fmt.Sprint("t", i), Dtype: U8, Shape: []int64{100}, Data: bytes.Repeat([]byte{byte(i + 1)}, 100)})
	}
	ts[8] = SaveTensor{Name: "bad", Dtype: U8, Shape: []int64{100}, Ptr: 0x1000} // in shard 3
	for _, parallel := range []int{1, 4} {
		dir := t.TempDir()
		_, err := SaveSharded(context.Background(), dir, ts, nil, &ShardOptions{MaxShardSize: 300, Parallel: parallel})
		// The failure itself, not the cancellation of the other shards.
		if err == nil || errors.Is(err, context.Canceled) || !strings.Contains(err.Error(), "model-00003-of-00004") {
			t.Fatalf("parallel %d: %v, want shard 3's failure", parallel, err)
		}
		if got := dirFiles(t, dir); len(got) != 0 {
			t.Fatalf("parallel %d: a failed save left %v", parallel, got)
		}
	}
}

// TestSaveShardedCancel cancels the save after its second shard is
// written: it returns context.Canceled, writes no index and removes the
// shards it wrote, leaving no temporary file.
func TestSaveShardedCancel(t *testing.T) {
	rng := rand.New(rand.NewPCG(65, 66))
	ts := shardTensors(rng, 40, 300_000)
	dir := t.TempDir()
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	var mu sync.Mutex
	var seen []string
	shardWritten = func(f string) {
		mu.Lock()
		defer mu.Unlock()
		if seen = append(seen, f); len(seen) == 2 {
			cancel()
		}
	}
	t.Cleanup(func() { shardWritten = nil })
	_, err := SaveSharded(ctx, dir, ts, nil, &ShardOptions{MaxShardSize: 400_000, Parallel: 2})
	var pe *fs.PathError
	if !errors.Is(err, context.Canceled) || !errors.As(err, &pe) || pe.Path != dir {
		t.Fatalf("%v, want context.Canceled in a *fs.PathError naming %s", err, dir)
	}
	if len(seen) < 2 || len(seen) > 3 { // the shard beside the second may finish
		t.Fatalf("shards written before cancel took effect: %v", seen)
	}
	if got := dirFiles(t, dir); len(got) != 0 {
		t.Fatalf("a cancelled save left %v", got)
	}
}

// TestSaveShardedS3 saves to an S3 prefix on versitygw, reads it back
// with LoadIndexHost, and cancels a second save while a shard's upload
// is in flight: no index, no shard of it, no multipart upload left.
func TestSaveShardedS3(t *testing.T) {
	v := s3test.Start(t)
	rng := rand.New(rand.NewPCG(67, 68))
	ts := shardTensors(rng, 20, 3<<20)
	meta := map[string]string{"format": "pt"}
	index, err := SaveSharded(context.Background(), v.URLOf("ckpt/run1/"), ts, meta, &ShardOptions{MaxShardSize: 7 << 20}, v.Opts()...)
	if err != nil {
		t.Fatal(err)
	}
	if index != v.URLOf("ckpt/run1/model.safetensors.index.json") {
		t.Fatalf("index at %s", index)
	}
	read := func(f string) []byte {
		b, ok := v.Object("ckpt/run1/" + f)
		if !ok {
			t.Fatalf("no object %s", f)
		}
		return b
	}
	checkSharded(t, index, read, ts, meta, 7<<20, v.Opts()...)

	// Cancel while the third shard's PUT is held (the first two may have
	// been written).
	var mu sync.Mutex
	puts := map[string]bool{}
	p := v.HoldProxy(t, func(r *http.Request) bool {
		if r.Method != http.MethodPut || !strings.Contains(r.URL.Path, "run2/") {
			return false
		}
		mu.Lock()
		defer mu.Unlock()
		puts[r.URL.Path] = true
		return len(puts) >= 3
	})
	err = p.Hold.CancelWhenHeld(t, func(ctx context.Context) error {
		_, err := SaveSharded(ctx, v.URLOf("ckpt/run2/"), ts, meta, &ShardOptions{MaxShardSize: 7 << 20, Parallel: 1}, p.Opts()...)
		return err
	})
	if !errors.Is(err, context.Canceled) {
		t.Fatalf("%v, want context.Canceled", err)
	}
	ents, _ := os.ReadDir(filepath.Join(v.Dir, s3test.Bucket, "ckpt", "run2"))
	for _, e := range ents {
		t.Errorf("a cancelled save left %s", e.Name())
	}
	if u := v.Uploads(t); strings.Contains(u, "<Upload>") {
		t.Errorf("multipart uploads left: %s", u)
	}
}

// TestWriteShardedForPython writes a sharded checkpoint into
// KVIK_SHARDED_XCHECK_OUT for safetensors/testdata/xcheck_sharded.py,
// with expected.json (each tensor's dtype, shape and sha256): from GPU
// memory where there are GPUs (the tensors balanced over all of them),
// else from host memory.
func TestWriteShardedForPython(t *testing.T) {
	out := os.Getenv("KVIK_SHARDED_XCHECK_OUT")
	if out == "" {
		t.Skip("KVIK_SHARDED_XCHECK_OUT not set")
	}
	rng := rand.New(rand.NewPCG(69, 70))
	dts := []Dtype{U8, I8, I16, F16, BF16, I32, F32, F64, I64}
	var ts []SaveTensor
	for i := range 48 {
		d := dts[rng.IntN(len(dts))]
		shape := []int64{int64(1 + rng.IntN(700)), int64(1 + rng.IntN(900))}
		switch {
		case i%11 == 3:
			shape = []int64{int64(1 + rng.IntN(5000))} // a norm
		case i == 20:
			d, shape = F32, []int64{3000, 1001} // larger than a shard: alone
		}
		n := int(shape[0]) * d.Bits() / 8
		if len(shape) > 1 {
			n *= int(shape[1])
		}
		b := make([]byte, n)
		for j := range b {
			b[j] = byte(rng.Uint32())
		}
		ts = append(ts, SaveTensor{Name: fmt.Sprintf("model.layers.%d.w%d", i/4, i%4), Dtype: d, Shape: shape, Data: b})
	}
	type tensorJSON struct {
		Dtype  string  `json:"dtype"`
		Shape  []int64 `json:"shape"`
		Sha256 string  `json:"sha256"`
		NBytes int     `json:"nbytes"`
	}
	meta := map[string]string{"format": "pt", "writer": "kvik SaveSharded"}
	e := struct {
		Index     string                `json:"index"`
		Shards    int                   `json:"shards"`
		Metadata  map[string]string     `json:"metadata"`
		Generator string                `json:"generator"`
		Tensors   map[string]tensorJSON `json:"tensors"`
	}{Index: IndexFileName(DefaultShardName), Metadata: meta, Tensors: map[string]tensorJSON{}}
	for _, w := range ts {
		e.Tensors[w.Name] = tensorJSON{string(w.Dtype), w.Shape, sum(w.Data), len(w.Data)}
	}
	save := ts
	e.Generator = "kvik safetensors.SaveSharded from host memory"
	if n := gputest.Count(); n > 0 {
		src := filepath.Join(t.TempDir(), "src.safetensors")
		if err := Save(context.Background(), src, ts, nil); err != nil {
			t.Fatal(err)
		}
		var devs []int
		for i := range n {
			devs = append(devs, i)
		}
		m, err := Load(context.Background(), src, &Options{Devices: devs})
		if err != nil {
			t.Fatal(err)
		}
		defer m.Close()
		save = nil
		for _, w := range ts {
			g := m.Tensor(w.Name)
			save = append(save, SaveTensor{Name: w.Name, Dtype: w.Dtype, Shape: w.Shape, Ptr: g.Ptr, Data: nilIfDev(g)})
		}
		e.Generator = fmt.Sprintf("kvik safetensors.SaveSharded from the memory of %d GPUs", n)
	}
	if _, err := SaveSharded(context.Background(), out, save, meta, &ShardOptions{MaxShardSize: 5 << 20}); err != nil {
		t.Fatal(err)
	}
	ix, err := ReadIndex(context.Background(), filepath.Join(out, e.Index))
	if err != nil {
		t.Fatal(err)
	}
	e.Shards = len(ix.Files())
	b, _ := json.MarshalIndent(e, "", " ")
	if err := os.WriteFile(filepath.Join(out, "expected.json"), b, 0o644); err != nil {
		t.Fatal(err)
	}
	t.Logf("%s: %d shards; check with python3 safetensors/testdata/xcheck_sharded.py %s", e.Generator, e.Shards, out)
}
