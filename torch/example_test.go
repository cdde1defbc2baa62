package torch_test

import (
	"context"
	"fmt"
	"log"
	"strings"

	"github.com/kvikgo/kvik/torch"
)

// ExampleLoadHost loads a training checkpoint's model weights into host
// memory (torch.Load puts them on a GPU the same way), leaving its
// optimizer state unread.
func ExampleLoadHost() {
	c, err := torch.LoadHost(context.Background(), "testdata/checkpoint.pt", &torch.Options{
		Filter: func(t *torch.TensorInfo) bool { return strings.HasPrefix(t.Name, "model.") },
	})
	if err != nil {
		log.Fatal(err)
	}
	defer c.Close()
	for _, t := range c.Tensors {
		fmt.Println(t.Name, t.Dtype, t.Shape, len(t.Data), "bytes")
	}
	// Output:
	// model.weight float32 [3 4] 48 bytes
	// model.bias float32 [3] 12 bytes
}

// ExampleReadHeader lists a checkpoint's tensors without reading them.
func ExampleReadHeader() {
	h, err := torch.ReadHeader(context.Background(), "testdata/views.pt", nil)
	if err != nil {
		log.Fatal(err)
	}
	for _, t := range h.Tensors[:4] {
		fmt.Println(t.Name, t.Dtype, t.Shape, t.Stride, "storage", t.Storage, "contiguous:", t.Contiguous())
	}
	// Output:
	// emb float32 [6 8] [8 1] storage 0 contiguous: true
	// every_other float32 [6 4] [8 2] storage 0 contiguous: false
	// lm_head float32 [6 8] [8 1] storage 0 contiguous: true
	// t float32 [8 6] [1 8] storage 0 contiguous: false
}
