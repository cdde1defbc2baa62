package main

import (
	"context"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/kvikgo/kvik/safetensors"
)

// TestBenchSave checks kvik bench --safetensors FILE --save: refused
// without a local checkpoint, needing a GPU, and with one every row runs
// and the directory is left as it was.
func TestBenchSave(t *testing.T) {
	runKvik(t, nil, "bench", "--save").expect(t, exitUsage).oneLineError(t, "--save needs --safetensors")
	runKvik(t, nil, "bench", "--save", "--safetensors", "s3://b/m.safetensors").expect(t, exitUsage).oneLineError(t, "local file")
	src := filepath.Join(t.TempDir(), "m.safetensors")
	var ts []safetensors.SaveTensor
	for i, n := range []int{1000, 3 << 20, 17, 5<<20 + 3} {
		b := make([]byte, n)
		for j := range b {
			b[j] = byte(j*7 + i + 1)
		}
		ts = append(ts, safetensors.SaveTensor{Name: string(rune('a' + i)), Dtype: safetensors.U8, Shape: []int64{int64(n)}, Data: b})
	}
	if err := safetensors.Save(context.Background(), src, ts, map[string]string{"format": "pt"}); err != nil {
		t.Fatal(err)
	}
	runKvik(t, nil, "bench", "--save", "--safetensors", src, "--drop-cache").expect(t, exitUsage).oneLineError(t, "--drop-cache")
	dir := t.TempDir()
	if !hasGPU() {
		runKvik(t, nil, "bench", "--save", "--safetensors", src, "--dir", dir).expect(t, exitFailure).oneLineError(t, "needs a GPU")
		return
	}
	r := runKvik(t, nil, "bench", "--save", "--safetensors", src, "--dir", dir, "--repeats", "2").expect(t, exitOK)
	for _, w := range []string{"kvik.SaveFile host bytes", "safetensors.Save gpu0", "safetensors.Save host", "safetensors.SaveSharded gpu0"} {
		if !strings.Contains(r.stdout, w) {
			t.Errorf("no %q row:\n%s", w, r.stdout)
		}
	}
	if ents, _ := os.ReadDir(dir); len(ents) != 0 {
		t.Errorf("bench --save left %d entries in --dir", len(ents))
	}
}
