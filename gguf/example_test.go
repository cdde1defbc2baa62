package gguf_test

import (
	"context"
	"fmt"
	"log"
	"os"
	"path/filepath"

	"github.com/kvikgo/kvik/gguf"
)

// Save a small GGUF model (metadata and two tensors, one quantized) and
// load it back into host memory; Load does the same into GPU memory
// (Options.Devices picks the GPUs), from a path or an s3:// URL.
func ExampleLoadHost() {
	ctx := context.Background()
	dir, _ := os.MkdirTemp("", "gguf")
	defer os.RemoveAll(dir)
	path := filepath.Join(dir, "model.gguf")

	var meta gguf.Metadata
	meta.Set("general.architecture", "llama")
	meta.Set("llama.context_length", uint32(4096))
	meta.Set("tokenizer.ggml.tokens", []string{"<s>", "</s>", "hello"})
	q8 := make([]byte, 2*34) // two Q8_0 blocks of 32 weights: a scale and 32 int8 each
	err := gguf.Save(ctx, path, []gguf.SaveTensor{
		{Name: "token_embd.weight", Type: gguf.Q8_0, Shape: []int64{32, 2}, Data: q8},
		{Name: "output_norm.weight", Type: gguf.F32, Shape: []int64{2}, Data: []byte{0, 0, 128, 63, 0, 0, 0, 64}},
	}, meta)
	if err != nil {
		log.Fatal(err)
	}

	m, err := gguf.LoadHost(ctx, path, nil)
	if err != nil {
		log.Fatal(err)
	}
	defer m.Close()
	arch, _ := m.Metadata.Architecture()
	ctxLen, _ := m.Metadata.ContextLength()
	tokens, _ := m.Metadata.Tokens()
	fmt.Println(arch, ctxLen, tokens)
	for _, t := range m.Tensors {
		fmt.Println(t.Name, t.Type, t.Shape, t.Size())
	}
	// Output:
	// llama 4096 [<s> </s> hello]
	// token_embd.weight Q8_0 [32 2] 68
	// output_norm.weight F32 [2] 8
}
