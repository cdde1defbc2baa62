package safetensors_test

import (
	"encoding/binary"
	"fmt"
	"log"
	"math"
	"os"
	"path/filepath"

	"github.com/kvikgo/kvik/safetensors"
)

// Save two tensors and load them back into host memory; Load does the same
// into GPU memory (Options.Devices picks the GPUs).
func ExampleLoadHost() {
	dir, _ := os.MkdirTemp("", "st")
	defer os.RemoveAll(dir)
	path := filepath.Join(dir, "model.safetensors")
	w := []float32{1, 2, 3, 4, 5, 6}
	err := safetensors.Save(path, []safetensors.SaveTensor{
		{Name: "layer.weight", Dtype: safetensors.F32, Shape: []int64{2, 3}, Data: f32bytes(w)},
		{Name: "layer.bias", Dtype: safetensors.U8, Shape: []int64{2}, Data: []byte{7, 8}},
	}, map[string]string{"format": "pt"})
	if err != nil {
		log.Fatal(err)
	}
	m, err := safetensors.LoadHost(path, nil)
	if err != nil {
		log.Fatal(err)
	}
	defer m.Close()
	for _, t := range m.Tensors {
		fmt.Println(t.Name, t.Dtype, t.Shape, t.Size())
	}
	fmt.Println(m.Metadata["format"], m.Tensor("layer.bias").Data)
	// Output:
	// layer.weight F32 [2 3] 24
	// layer.bias U8 [2] 2
	// pt [7 8]
}

func f32bytes(v []float32) []byte {
	var b []byte
	for _, x := range v {
		b = binary.LittleEndian.AppendUint32(b, math.Float32bits(x))
	}
	return b
}
