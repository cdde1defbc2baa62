package main

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"

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
	b, err := os.ReadFile(filepath.Join(dir, "expected.json"))
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
	tmp := t.TempDir()
	mems := []string{"auto"}
	if hasGPU() {
		mems = append(mems, "device")
	}
	for _, mem := range mems {
		for _, file := range []string{"views.pt", "checkpoint.pt"} {
			dst := filepath.Join(tmp, mem+"-"+strings.TrimSuffix(file, ".pt")+".safetensors")
			r := runKvik(t, nil, "cp", "--memory", mem, filepath.Join(dir, file), dst).expect(t, exitOK)
			if !strings.Contains(r.stdout, "converted") || !strings.Contains(r.stdout, "verified") {
				t.Errorf("kvik cp %s: %s", file, r.stdout)
			}
			m, err := safetensors.LoadHost(context.Background(), dst, nil)
			if err != nil {
				t.Fatal(err)
			}
			want := e.Files[file]
			if len(m.Tensors) != len(want) || m.Metadata["format"] != "pt" {
				t.Errorf("%s: %d tensors, metadata %v; want %d", file, len(m.Tensors), m.Metadata, len(want))
			}
			for _, x := range m.Tensors {
				w, ok := want[x.Name]
				sum := sha256.Sum256(x.Data)
				if !ok || x.Dtype != torch.Dtype(w.Dtype).Safetensors() || !slices.Equal(x.Shape, w.Shape) || hex.EncodeToString(sum[:]) != w.SHA256 {
					t.Errorf("%s (%s): %q %s %v unlike torch.load's", file, mem, x.Name, x.Dtype, x.Shape)
				}
			}
			m.Close()
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
