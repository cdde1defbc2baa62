package safetensors_test

import (
	"context"
	"encoding/binary"
	"fmt"
	"log"
	"math"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"

	"github.com/kvikgo/kvik"
	"github.com/kvikgo/kvik/safetensors"
)

// Save two tensors and load them back into host memory; Load does the same
// into GPU memory (Options.Devices picks the GPUs).
func ExampleLoadHost() {
	dir, _ := os.MkdirTemp("", "st")
	defer os.RemoveAll(dir)
	path := filepath.Join(dir, "model.safetensors")
	w := []float32{1, 2, 3, 4, 5, 6}
	err := safetensors.Save(context.Background(), path, []safetensors.SaveTensor{
		{Name: "layer.weight", Dtype: safetensors.F32, Shape: []int64{2, 3}, Data: f32bytes(w)},
		{Name: "layer.bias", Dtype: safetensors.U8, Shape: []int64{2}, Data: []byte{7, 8}},
	}, map[string]string{"format": "pt"})
	if err != nil {
		log.Fatal(err)
	}
	m, err := safetensors.LoadHost(context.Background(), path, nil)
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

// Load a checkpoint from an HTTP server: the header comes in one ranged
// GET, the tensors in parallel ranged GETs. s3:// URLs work the same way
// (see ExampleLoadIndex_s3).
func ExampleLoadHost_url() {
	dir, _ := os.MkdirTemp("", "st")
	defer os.RemoveAll(dir)
	err := safetensors.Save(context.Background(), filepath.Join(dir, "model.safetensors"), []safetensors.SaveTensor{
		{Name: "embed", Dtype: safetensors.F32, Shape: []int64{2, 2}, Data: f32bytes([]float32{1, 2, 3, 4})},
	}, nil)
	if err != nil {
		log.Fatal(err)
	}
	srv := httptest.NewServer(http.FileServer(http.Dir(dir)))
	defer srv.Close()

	m, err := safetensors.LoadHost(context.Background(), srv.URL+"/model.safetensors", nil)
	if err != nil {
		log.Fatal(err)
	}
	defer m.Close()
	t := m.Tensor("embed")
	fmt.Println(t.Dtype, t.Shape, t.Size())
	// Output: F32 [2 2] 16
}

// Load a sharded checkpoint from S3 onto two GPUs, split by size: the
// shards named in the index are read from beside it. Credentials, region
// and endpoint come from AWS_* variables or, as here, options.
func ExampleLoadIndex_s3() {
	m, err := safetensors.LoadIndex(context.Background(), "s3://my-bucket/llama/model.safetensors.index.json",
		&safetensors.Options{Devices: []int{0, 1}},
		kvik.WithS3Region("us-east-1"), kvik.WithS3Endpoint("http://127.0.0.1:7070"))
	if err != nil {
		log.Fatal(err)
	}
	defer m.Close()
	for _, t := range m.Tensors[:3] {
		fmt.Println(t.Name, t.Device, t.Ptr)
	}
}

// Load a checkpoint onto two GPUs for data-parallel serving: every
// tensor on both, each byte read from storage once and copied from GPU to
// GPU.
func ExampleLoad_replicate() {
	m, err := safetensors.Load(context.Background(), "model.safetensors",
		&safetensors.Options{Devices: []int{0, 1}, Replicate: true})
	if err != nil {
		log.Fatal(err)
	}
	defer m.Close()
	for _, r := range m.Tensors[0].Replicas {
		fmt.Println(m.Tensors[0].Name, "on GPU", r.Device, "at", r.Ptr)
	}
}

// Save a checkpoint in shards of at most 64 bytes of tensors, as Hugging
// Face lays them out (a tensor that does not fit starts the next shard; one
// larger than a shard gets its own at once), and load it back through its
// index. Tensors with
// Ptr set are copied from GPU memory (one GPU or several) the same way;
// an s3:// prefix instead of the directory uploads the shards.
func ExampleSaveSharded() {
	dir, _ := os.MkdirTemp("", "st")
	defer os.RemoveAll(dir)
	var ts []safetensors.SaveTensor
	for i, n := range []int{40, 30, 100, 20} {
		data := make([]byte, n)
		for j := range data {
			data[j] = byte(i + j)
		}
		ts = append(ts, safetensors.SaveTensor{Name: fmt.Sprintf("layers.%d.weight", i), Dtype: safetensors.U8, Shape: []int64{int64(n)}, Data: data})
	}
	index, err := safetensors.SaveSharded(context.Background(), filepath.Join(dir, "ckpt"), ts,
		map[string]string{"format": "pt"}, &safetensors.ShardOptions{MaxShardSize: 64})
	if err != nil {
		log.Fatal(err)
	}
	ix, err := safetensors.ReadIndex(context.Background(), index)
	if err != nil {
		log.Fatal(err)
	}
	fmt.Println(filepath.Base(index), ix.StringMetadata()["total_size"])
	for _, t := range ts {
		fmt.Println(t.Name, ix.WeightMap[t.Name])
	}
	m, err := safetensors.LoadIndexHost(context.Background(), index, nil)
	if err != nil {
		log.Fatal(err)
	}
	defer m.Close()
	fmt.Println(len(m.Tensors), m.Tensor("layers.2.weight").Data[:3])
	// Output:
	// model.safetensors.index.json 190
	// layers.0.weight model-00001-of-00003.safetensors
	// layers.1.weight model-00003-of-00003.safetensors
	// layers.2.weight model-00002-of-00003.safetensors
	// layers.3.weight model-00003-of-00003.safetensors
	// 4 [2 3 4]
}
