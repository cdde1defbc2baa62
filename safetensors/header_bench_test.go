package safetensors

import (
	"encoding/json"
	"fmt"
	"testing"
)

// benchHeader is the JSON header of a checkpoint of n bf16 tensors of a
// few shapes, laid out back to back, as a loader meets it.
func benchHeader(n int) ([]byte, int64) {
	m := map[string]any{"__metadata__": map[string]string{"format": "pt"}}
	var off int64
	for i := range n {
		shape := []int64{4096, int64(1024 + 64*(i%7))}
		size := shape[0] * shape[1] * 2
		m[fmt.Sprintf("model.layers.%d.mlp.down_proj.weight%d", i/9, i)] = map[string]any{"dtype": "BF16", "shape": shape, "data_offsets": []int64{off, off + size}}
		off += size
	}
	b, _ := json.Marshal(m)
	return b, off
}

// BenchmarkParseHeader parses the header of a 570-tensor checkpoint (a
// 7B model's count), which every load of the file does before its reads.
func BenchmarkParseHeader(b *testing.B) {
	h, size := benchHeader(570)
	b.SetBytes(int64(len(h)))
	for b.Loop() {
		if _, err := ParseHeader(h, size); err != nil {
			b.Fatal(err)
		}
	}
}
