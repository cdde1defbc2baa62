package main

import (
	"encoding/binary"
	"encoding/json"
	"os"
	"path/filepath"
	"strings"
	"testing"
)

// TestInfoTensorFiles lists the safetensors project's sample file and a
// NumPy-written .npy file, as text and JSON, and refuses an object array.
func TestInfoTensorFiles(t *testing.T) {
	st := filepath.Join("..", "..", "safetensors", "testdata", "samples", "overall.safetensors")
	r := runKvik(t, nil, "info", st).expect(t, exitOK)
	for _, want := range []string{"9 tensors", "metadata test = a", "U16", "F64", "[6]"} {
		if !strings.Contains(r.stdout, want) {
			t.Errorf("kvik info %s lacks %q:\n%s", st, want, r.stdout)
		}
	}
	var rep tensorFileInfo
	r = runKvik(t, nil, "info", "--json", st).expect(t, exitOK)
	if err := json.Unmarshal([]byte(r.stdout), &rep); err != nil {
		t.Fatal(err)
	}
	var sum int64
	for _, x := range rep.Tensors {
		sum += x.Bytes
	}
	if len(rep.Tensors) != 9 || rep.Bytes != 168 || sum != 168 || rep.Tensors[1].Name != "H" || rep.Tensors[1].Dtype != "U16" {
		t.Errorf("JSON report %+v", rep)
	}
	np := filepath.Join("..", "..", "npy", "testdata", "v2.npy")
	r = runKvik(t, nil, "info", np).expect(t, exitOK)
	if !strings.Contains(r.stdout, "npy 2.0") || !strings.Contains(r.stdout, "<i4") || !strings.Contains(r.stdout, "[6 1]") {
		t.Errorf("kvik info %s:\n%s", np, r.stdout)
	}
	r = runKvik(t, nil, "info", filepath.Join("..", "..", "npy", "testdata", "object.npy")).expect(t, exitFailure)
	if !strings.Contains(r.stderr, "object array") {
		t.Errorf("object array: %s", r.stderr)
	}
}

// TestInfoGGUF lists a GGUF file gguf-py wrote, as text and JSON, and
// refuses a big-endian one.
func TestInfoGGUF(t *testing.T) {
	p := filepath.Join("..", "..", "gguf", "testdata", "all_types.gguf")
	r := runKvik(t, nil, "info", p).expect(t, exitOK)
	for _, want := range []string{"GGUF v3, 33 tensors", "architecture llama, alignment 32", "Q8_K         1 tensors  876 B",
		"metadata llama.context_length = 4096", `tokenizer.ggml.tokens = [6 STRING] "<s>"`, "blk.10.q4_k.weight     Q4_K     [512 1 2]    576"} {
		if !strings.Contains(r.stdout, want) {
			t.Errorf("kvik info %s lacks %q:\n%s", p, want, r.stdout)
		}
	}
	var rep tensorFileInfo
	r = runKvik(t, nil, "info", "--json", p).expect(t, exitOK)
	if err := json.Unmarshal([]byte(r.stdout), &rep); err != nil {
		t.Fatal(err)
	}
	var sum, byType int64
	for _, x := range rep.Tensors {
		sum += x.Bytes
	}
	for _, x := range rep.Types {
		byType += x.Bytes
	}
	if len(rep.Tensors) != 33 || rep.Bytes != 5384 || sum != 5384 || byType != 5384 || rep.Architecture != "llama" ||
		rep.DataOffset != 4064 || rep.Metadata["general.name"] != "kvik fixture" || rep.Types[0].Type != "Q8_K" {
		t.Errorf("JSON report %+v", rep)
	}
	r = runKvik(t, nil, "info", filepath.Join("..", "..", "gguf", "testdata", "bigendian.gguf")).expect(t, exitFailure)
	if !strings.Contains(r.stderr, "big-endian") {
		t.Errorf("big-endian file: %s", r.stderr)
	}
}

// One tensor is "1 tensor", one byte "1 byte".
func TestInfoTensorsSingular(t *testing.T) {
	hdr := `{"a":{"dtype":"U8","shape":[1],"data_offsets":[0,1]}}`
	b := binary.LittleEndian.AppendUint64(nil, uint64(len(hdr)))
	b = append(append(b, hdr...), 7)
	p := filepath.Join(t.TempDir(), "one.safetensors")
	if err := os.WriteFile(p, b, 0o644); err != nil {
		t.Fatal(err)
	}
	out := runKvik(t, nil, "info", p).expect(t, 0).stdout
	if !strings.Contains(out, "1 tensor,") || !strings.Contains(out, "(1 byte)") {
		t.Errorf("kvik info of one tensor:\n%s", out)
	}
}

// TestInfoNpz lists NumPy's .npz archives, stored and deflated, as text
// and JSON (the member that is not a .npy file in the metadata), refuses
// a broken one, and kvik cp still copies an archive as a plain file.
func TestInfoNpz(t *testing.T) {
	dir := filepath.Join("..", "..", "npy", "testdata", "npz")
	r := runKvik(t, nil, "info", filepath.Join(dir, "compressed.npz")).expect(t, exitOK)
	for _, want := range []string{"npz, 8 tensors", "group/c", ">i8 (fortran order) (deflated)", "[('x', '<f4'), ('n', '>i2', (3,))] (deflated)", "[4 3]"} {
		if !strings.Contains(r.stdout, want) {
			t.Errorf("kvik info compressed.npz lacks %q:\n%s", want, r.stdout)
		}
	}
	var rep tensorFileInfo
	r = runKvik(t, nil, "info", "--json", filepath.Join(dir, "other.npz")).expect(t, exitOK)
	if err := json.Unmarshal([]byte(r.stdout), &rep); err != nil {
		t.Fatal(err)
	}
	if rep.Format != "npz" || len(rep.Tensors) != 1 || rep.Tensors[0].Name != "x" || rep.Bytes != 28 || rep.Metadata["members not .npy"] != "notes.txt" {
		t.Errorf("JSON report %+v", rep)
	}
	tmp := t.TempDir()
	bad := filepath.Join(tmp, "bad.npz")
	if err := os.WriteFile(bad, []byte("PK\x03\x04 not really"), 0o644); err != nil {
		t.Fatal(err)
	}
	r = runKvik(t, nil, "info", bad).expect(t, exitFailure)
	if !strings.Contains(r.stderr, "invalid .npz archive") {
		t.Errorf("a broken archive: %s", r.stderr)
	}
	dst := filepath.Join(tmp, "copy.npz")
	runKvik(t, nil, "cp", filepath.Join(dir, "plain.npz"), dst).expect(t, exitOK)
	a, errA := os.ReadFile(filepath.Join(dir, "plain.npz"))
	b, errB := os.ReadFile(dst)
	if errA != nil || errB != nil || string(a) != string(b) {
		t.Errorf("kvik cp of an archive: %v %v, equal %v", errA, errB, string(a) == string(b))
	}
}

// TestInfoTorch lists torch.save checkpoints (a training checkpoint's
// nested names, strided views) as text and JSON, a legacy file with its
// format, and copies a checkpoint as any file.
func TestInfoTorch(t *testing.T) {
	dir := filepath.Join("..", "..", "torch", "testdata")
	r := runKvik(t, nil, "info", filepath.Join(dir, "checkpoint.pt")).expect(t, exitOK)
	for _, want := range []string{"torch.save, 12 tensors", "optimizer.state.0.exp_avg_sq", "history.1.0", "record = checkpoint"} {
		if !strings.Contains(r.stdout, want) {
			t.Errorf("kvik info checkpoint.pt lacks %q:\n%s", want, r.stdout)
		}
	}
	r = runKvik(t, nil, "info", "--json", filepath.Join(dir, "views.pt")).expect(t, exitOK)
	var rep tensorFileInfo
	if err := json.Unmarshal([]byte(r.stdout), &rep); err != nil {
		t.Fatal(err)
	}
	strided := 0
	for _, x := range rep.Tensors {
		if strings.HasSuffix(x.Dtype, "(strided)") {
			strided++
		}
	}
	if rep.Format != "torch.save" || len(rep.Tensors) != 9 || strided != 2 || rep.Bytes != 155036 {
		t.Errorf("JSON report %+v", rep)
	}
	r = runKvik(t, nil, "info", filepath.Join(dir, "legacy.pt")).expect(t, exitOK)
	if !strings.Contains(r.stdout, "format = legacy (before PyTorch 1.6)") || !strings.Contains(r.stdout, "w     float32  [3]    12") {
		t.Errorf("a legacy file: %s", r.stdout)
	}
	tmp := t.TempDir()
	dst := filepath.Join(tmp, "pytorch_model.bin")
	runKvik(t, nil, "cp", filepath.Join(dir, "views.pt"), dst).expect(t, exitOK)
	r = runKvik(t, nil, "info", dst).expect(t, exitOK)
	if !strings.Contains(r.stdout, "torch.save, 9 tensors") {
		t.Errorf("kvik info of the copy named pytorch_model.bin:\n%s", r.stdout)
	}
}
