package main

import (
	"bytes"
	"context"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"fmt"
	"hash/crc32"
	"io"
	"math/rand/v2"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"

	"golang.org/x/sys/unix"

	"github.com/kvikgo/kvik"
	"github.com/kvikgo/kvik/internal/testkit/fskinds"
	"github.com/kvikgo/kvik/internal/testkit/s3test"
	"github.com/kvikgo/kvik/safetensors"
	"github.com/kvikgo/kvik/torch"
)

// TestCpTorchToSafetensors converts PyTorch's checkpoints (views and tied
// weights, strided tensors, a training checkpoint's nested names) into
// safetensors files, through host memory and, where there is a GPU,
// through GPU memory, and compares every tensor of the result with what
// torch.load gave of the checkpoint (torch/testdata/expected.json: its
// elements in C order); a checkpoint holding a dtype safetensors lacks
// fails, naming the tensor, and leaves no file.
func TestCpTorchToSafetensors(t *testing.T) {
	dir := filepath.Join("..", "..", "torch", "testdata")
	tmp := t.TempDir()
	mems := []string{"auto"}
	if hasGPU() {
		mems = append(mems, "device")
	}
	for _, mem := range mems {
		for _, file := range []string{"views.pt", "checkpoint.pt", "legacy_views.pt", "legacy_checkpoint.pt", "module.pt", "scripted.pt"} {
			dst := filepath.Join(tmp, mem+"-"+strings.TrimSuffix(file, ".pt")+".safetensors")
			r := runKvik(t, nil, "cp", "--memory", mem, filepath.Join(dir, file), dst).expect(t, exitOK)
			if !strings.Contains(r.stdout, "converted") || !strings.Contains(r.stdout, "verified") {
				t.Errorf("kvik cp %s: %s", file, r.stdout)
			}
			if streamed := strings.Contains(r.stdout, "streamed"); streamed != (mem == "auto") {
				t.Errorf("kvik cp --memory %s %s streamed: %v", mem, file, streamed)
			}
			checkConverted(t, dst, file, mem)
		}
	}
	dst := filepath.Join(tmp, "all.safetensors")
	r := runKvik(t, nil, "cp", filepath.Join(dir, "state_dict.pt"), dst).expect(t, exitFailure)
	if !strings.Contains(r.stderr, `"t_complex128": complex128 has no safetensors dtype`) {
		t.Errorf("a complex128 tensor: %s", r.stderr)
	}
	if _, err := os.Stat(dst); !os.IsNotExist(err) {
		t.Errorf("a failed conversion left %s: %v", dst, err)
	}
}

// checkConverted compares the tensors of the safetensors file dst with
// what torch.load gave of the checkpoint file (torch/testdata's
// expected.json: each tensor's dtype, shape and the SHA-256 of its
// elements in C order).
func checkConverted(t *testing.T, dst, file, how string) {
	t.Helper()
	b, err := os.ReadFile(filepath.Join("..", "..", "torch", "testdata", "expected.json"))
	if err != nil {
		t.Fatal(err)
	}
	var e struct {
		Files map[string]map[string]struct {
			Dtype  string
			Shape  []int64
			SHA256 string
		}
	}
	if err := json.Unmarshal(b, &e); err != nil {
		t.Fatal(err)
	}
	m, err := safetensors.LoadHost(context.Background(), dst, nil)
	if err != nil {
		t.Fatal(err)
	}
	defer m.Close()
	want := e.Files[file]
	if len(m.Tensors) != len(want) || m.Metadata["format"] != "pt" {
		t.Errorf("%s: %d tensors, metadata %v; want %d", file, len(m.Tensors), m.Metadata, len(want))
	}
	for _, x := range m.Tensors {
		w, ok := want[x.Name]
		sum := sha256.Sum256(x.Data)
		if !ok || x.Dtype != torch.Dtype(w.Dtype).Safetensors() || !slices.Equal(x.Shape, w.Shape) || hex.EncodeToString(sum[:]) != w.SHA256 {
			t.Errorf("%s (%s): %q %s %v unlike torch.load's", file, how, x.Name, x.Dtype, x.Shape)
		}
	}
}

// TestCpTorchStreamed converts PyTorch's checkpoints in jobs of a few
// bytes (convertSegment lowered to odd sizes: tensors cut into many runs,
// small ones sharing a job, strided ones gathered whole), each file
// equal to torch.load's tensors and to the conversion in large jobs.
func TestCpTorchStreamed(t *testing.T) {
	dir := filepath.Join("..", "..", "torch", "testdata")
	seg := convertSegment
	defer func() { convertSegment = seg }()
	rng := rand.New(rand.NewPCG(5, 17))
	e := &env{ctx: context.Background(), stdout: io.Discard, stderr: io.Discard}
	o := &cpOptions{memory: "host", verify: true}
	for _, file := range []string{"views.pt", "checkpoint.pt", "legacy_views.pt"} {
		var first []byte
		for _, s := range []int64{seg, 8 + rng.Int64N(56), 64 + rng.Int64N(4096)} {
			convertSegment = s
			dst := filepath.Join(t.TempDir(), "m.safetensors")
			if err := torchToSafetensors(e, o, filepath.Join(dir, file), dst); err != nil {
				t.Fatalf("%s in jobs of %d bytes: %v", file, s, err)
			}
			checkConverted(t, dst, file, fmt.Sprintf("jobs of %d bytes", s))
			b, _ := os.ReadFile(dst)
			if first == nil {
				first = b
			} else if !bytes.Equal(b, first) {
				t.Errorf("%s: jobs of %d bytes wrote another file than jobs of %d", file, s, seg)
			}
		}
	}
}

// TestPlanStream: the jobs of random tensors cover each tensor's bytes
// once, in order, every job back to back in the file and at most the
// segment's size unless it is one whole tensor.
func TestPlanStream(t *testing.T) {
	rng := rand.New(rand.NewPCG(9, 3))
	for range 200 {
		n := rng.IntN(20)
		size, off := make([]int64, n), make([]int64, n)
		whole := make([]bool, n)
		at := int64(rng.IntN(100))
		for _, i := range rng.Perm(n) {
			size[i], off[i], whole[i] = rng.Int64N(300), at, rng.IntN(4) == 0
			at += size[i]
		}
		seg := 1 + rng.Int64N(100)
		isWhole := func(i int) bool { return whole[i] }
		jobs := planStream(off, size, isWhole, seg)
		data := make([][]byte, n)
		for i := range data {
			data[i] = make([]byte, size[i])
			for k := range data[i] {
				data[i][k] = byte(rng.Uint32())
			}
		}
		sums := newRunSums(size, seg, isWhole)
		next := make([]int64, n) // each tensor's bytes covered so far
		for _, j := range jobs {
			if j.n > seg && len(j.runs) != 1 {
				t.Fatalf("a job of %d bytes, %d runs, for segments of %d", j.n, len(j.runs), seg)
			}
			dst, sum := j.dst, int64(0)
			for _, r := range j.runs {
				if r.at != next[r.t] || off[r.t]+r.at != dst || r.n > seg && (!whole[r.t] || r.n != size[r.t]) {
					t.Fatalf("run %+v of tensor %d (%d bytes at %d) in job at %d", r, r.t, size[r.t], off[r.t], j.dst)
				}
				sums.sum(r, data[r.t][r.at:r.at+r.n])
				next[r.t] += r.n
				dst += r.n
				sum += r.n
			}
			if sum != j.n {
				t.Fatalf("job of %d bytes holds runs of %d", j.n, sum)
			}
		}
		if !slices.Equal(next, size) {
			t.Fatalf("runs cover %v of tensors of %v bytes", next, size)
		}
		for i := range data {
			if got, want := sums.tensor(i), crc32.Checksum(data[i], castagnoli); got != want {
				t.Fatalf("tensor %d (%d bytes, whole %v, segments of %d): runs' CRC-32C %08x, its bytes' %08x", i, size[i], whole[i], seg, got, want)
			}
		}
	}
}

// TestCpTorchVerifiedBeforeCommit: a conversion whose check fails leaves
// the destination's old file as it was, and no temporary file; once the
// check passes, the conversion replaces it.
func TestCpTorchVerifiedBeforeCommit(t *testing.T) {
	src := filepath.Join("..", "..", "torch", "testdata", "views.pt")
	dir := t.TempDir()
	dst := filepath.Join(dir, "m.safetensors")
	old := []byte("the old model")
	if err := os.WriteFile(dst, old, 0o644); err != nil {
		t.Fatal(err)
	}
	check := verifyConverted
	defer func() { verifyConverted = check }()
	verifyConverted = func(ctx context.Context, r kvik.Reader, sums map[string]uint32) error {
		for k := range sums {
			sums[k] ^= 1 // one bit off, as a torn write would read
		}
		return check(ctx, r, sums)
	}
	e := &env{ctx: context.Background(), stdout: io.Discard, stderr: io.Discard}
	o := &cpOptions{memory: "host", verify: true}
	if err := torchToSafetensors(e, o, src, dst); err == nil || !strings.Contains(err.Error(), "verify") {
		t.Fatalf("a conversion whose check fails: %v, want a verify error", err)
	}
	if got, _ := os.ReadFile(dst); string(got) != string(old) {
		t.Fatalf("a failed check replaced the destination (%d bytes)", len(got))
	}
	ents, _ := os.ReadDir(dir)
	if len(ents) != 1 {
		t.Fatalf("%d files left in the destination's directory", len(ents))
	}
	verifyConverted = check
	if err := torchToSafetensors(e, o, src, dst); err != nil {
		t.Fatal(err)
	}
	m, err := safetensors.LoadHost(context.Background(), dst, nil)
	if err != nil || len(m.Tensors) != 9 {
		t.Fatalf("the conversion after: %v", err)
	}
}

// TestCpTorchToS3: a checkpoint converted straight to an S3 object
// (uploaded, then read back and checked), and from one to a file, equal
// to the local conversion.
func TestCpTorchToS3(t *testing.T) {
	v := s3test.Start(t)
	src := filepath.Join("..", "..", "torch", "testdata", "checkpoint.pt")
	local := filepath.Join(t.TempDir(), "c.safetensors")
	runKvik(t, nil, "cp", src, local).expect(t, exitOK)
	tmp := t.TempDir() // the conversion's temporary file, removed after the upload
	r := runKvik(t, append(s3Env(v), "TMPDIR="+tmp), "cp", src, v.URLOf("c.safetensors")).expect(t, exitOK)
	if !strings.Contains(r.stdout, "verified") || !strings.Contains(r.stdout, "streamed through host memory") {
		t.Errorf("kvik cp to S3: %s", r.stdout)
	}
	if ents, _ := os.ReadDir(tmp); len(ents) != 0 {
		t.Errorf("%d files left in TMPDIR", len(ents))
	}
	want, _ := os.ReadFile(local)
	if got, ok := v.Object("c.safetensors"); !ok || string(got) != string(want) {
		t.Fatalf("the object of %d bytes differs from the %d-byte local conversion", len(got), len(want))
	}
	b, _ := os.ReadFile(src)
	v.Put(t, "pytorch_model.bin", b)
	back := filepath.Join(t.TempDir(), "b.safetensors")
	runKvik(t, s3Env(v), "cp", v.URLOf("pytorch_model.bin"), back).expect(t, exitOK)
	if got, _ := os.ReadFile(back); string(got) != string(want) {
		t.Fatal("the conversion from S3 differs from the local one")
	}
}

// TestCpTorchIndex lists a sharded checkpoint (views.pt and
// checkpoint.pt as the shards of a pytorch_model.bin.index.json) with
// kvik info, then converts it into a sharded safetensors one, its shards named as save_pretrained names
// them, and loads it back with safetensors.LoadIndexHost against what
// torch.load gave of each shard.
func TestCpTorchIndex(t *testing.T) {
	dir := filepath.Join("..", "..", "torch", "testdata")
	b, err := os.ReadFile(filepath.Join(dir, "expected.json"))
	if err != nil {
		t.Fatal(err)
	}
	var e struct {
		Files map[string]map[string]struct{ SHA256 string }
	}
	if err := json.Unmarshal(b, &e); err != nil {
		t.Fatal(err)
	}
	src := t.TempDir()
	wm, want := map[string]string{}, map[string]string{}
	for i, file := range []string{"views.pt", "checkpoint.pt"} {
		shard := fmt.Sprintf("pytorch_model-%05d-of-00002.bin", i+1)
		b, err := os.ReadFile(filepath.Join(dir, file))
		if err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(filepath.Join(src, shard), b, 0o644); err != nil {
			t.Fatal(err)
		}
		for name, x := range e.Files[file] {
			wm[name], want[name] = shard, x.SHA256
		}
	}
	ix, _ := json.Marshal(map[string]any{"metadata": map[string]any{"total_size": 1234}, "weight_map": wm})
	if err := os.WriteFile(filepath.Join(src, "pytorch_model.bin.index.json"), ix, 0o644); err != nil {
		t.Fatal(err)
	}
	r := runKvik(t, nil, "info", filepath.Join(src, "pytorch_model.bin.index.json")).expect(t, exitOK)
	for _, w := range []string{"torch.save index, 2 shards", "optimizer.state.0.exp_avg", "pytorch_model-00002-of-00002.bin", "every_other"} {
		if !strings.Contains(r.stdout, w) {
			t.Errorf("kvik info of the index lacks %q:\n%s", w, r.stdout)
		}
	}
	out := filepath.Join(t.TempDir(), "model.safetensors.index.json")
	r = runKvik(t, nil, "cp", filepath.Join(src, "pytorch_model.bin.index.json"), out).expect(t, exitOK)
	if !strings.Contains(r.stdout, "converted 2 shards") {
		t.Errorf("kvik cp of an index: %s", r.stdout)
	}
	for _, shard := range []string{"model-00001-of-00002.safetensors", "model-00002-of-00002.safetensors"} {
		if _, err := os.Stat(filepath.Join(filepath.Dir(out), shard)); err != nil {
			t.Error(err)
		}
	}
	m, err := safetensors.LoadIndexHost(context.Background(), out, nil)
	if err != nil {
		t.Fatal(err)
	}
	defer m.Close()
	// Two shards that would get one name: refused before either goes.
	b, _ = os.ReadFile(filepath.Join(src, "pytorch_model-00001-of-00002.bin"))
	os.WriteFile(filepath.Join(src, "pytorch_model-00001-of-00002.pt"), b, 0o644)
	wm["emb"] = "pytorch_model-00001-of-00002.pt"
	ix, _ = json.Marshal(map[string]any{"weight_map": wm})
	os.WriteFile(filepath.Join(src, "twice.bin.index.json"), ix, 0o644)
	dst := t.TempDir()
	r = runKvik(t, nil, "cp", filepath.Join(src, "twice.bin.index.json"), filepath.Join(dst, "x.safetensors.index.json")).expect(t, exitFailure)
	if ents, _ := os.ReadDir(dst); !strings.Contains(r.stderr, "would both become") || len(ents) != 0 {
		t.Errorf("two shards of one new name: %s, %d files written", r.stderr, len(ents))
	}
	if len(m.Tensors) != len(want) || m.Metadata["total_size"] != "1234" {
		t.Errorf("%d tensors, metadata %v; want %d", len(m.Tensors), m.Metadata, len(want))
	}
	for _, x := range m.Tensors {
		sum := sha256.Sum256(x.Data)
		if hex.EncodeToString(sum[:]) != want[x.Name] {
			t.Errorf("%q unlike torch.load's", x.Name)
		}
	}
}

// TestCpTorchDestinationKinds converts a checkpoint to destinations of
// every kind, named .safetensors: a regular file is replaced, a link to
// one replaces its target and stays a link, a missing directory is
// made; a FIFO, a device node, a directory, a socket or a link to one
// of them is refused as not a regular file and nothing changes.
func TestCpTorchDestinationKinds(t *testing.T) {
	src := filepath.Join("..", "..", "torch", "testdata", "views.pt")
	root := t.TempDir()
	p := func(name string) string { return filepath.Join(root, name) }
	if err := os.WriteFile(p("regular.safetensors"), []byte("old"), 0o640); err != nil {
		t.Fatal(err)
	}
	if err := os.Mkdir(p("dir.safetensors"), 0o755); err != nil {
		t.Fatal(err)
	}
	if err := unix.Mkfifo(p("fifo.safetensors"), 0o644); err != nil {
		t.Fatal(err)
	}
	refused := []string{"dir.safetensors", "fifo.safetensors"}
	if err := unix.Mknod(p("null.safetensors"), unix.S_IFCHR|0o666, int(unix.Mkdev(1, 3))); err == nil {
		refused = append(refused, "null.safetensors")
	} else {
		t.Logf("no device node: %v", err)
	}
	for _, name := range slices.Clone(refused) {
		l := "link-to-" + name
		if err := os.Symlink(name, p(l)); err != nil {
			t.Fatal(err)
		}
		refused = append(refused, l)
	}
	if err := os.Symlink("regular.safetensors", p("link.safetensors")); err != nil {
		t.Fatal(err)
	}
	for _, name := range refused {
		before := fskinds.Snapshot(t, root)
		r := runKvik(t, nil, "cp", src, p(name)).expect(t, exitFailure)
		r.oneLineError(t, "not a regular file")
		if changed := fskinds.Changed(before, fskinds.Snapshot(t, root)); len(changed) > 0 {
			t.Errorf("%s: a refused conversion changed %q", name, changed)
		}
	}
	for _, name := range []string{"regular.safetensors", "link.safetensors", "no/such/dir/m.safetensors"} {
		runKvik(t, nil, "cp", src, p(name)).expect(t, exitOK)
		m, err := safetensors.LoadHost(context.Background(), p(name), nil)
		if err != nil || len(m.Tensors) != 9 {
			t.Errorf("%s: %v", name, err)
		}
	}
	if fi, err := os.Lstat(p("link.safetensors")); err != nil || fi.Mode()&os.ModeSymlink == 0 {
		t.Errorf("the link became %v (%v)", fi.Mode(), err)
	}
	if fi, err := os.Stat(p("regular.safetensors")); err != nil || fi.Mode().Perm() != 0o640 {
		t.Errorf("the replaced file's mode %v (%v), want 0640 kept", fi.Mode(), err)
	}
}
