package kvik_test

import (
	"fmt"
	"log"
	"os"
	"path/filepath"

	"github.com/kvikgo/kvik"
	"github.com/kvikgo/kvik/cuda"
)

// ExampleMmapHandle_RegisterDevice registers a mapping for zero-copy
// device reads and reads the whole file into device memory. It needs a
// GPU, so it has no checked output.
func ExampleMmapHandle_RegisterDevice() {
	path := filepath.Join(os.TempDir(), "kvik-zero-copy-example.bin")
	if err := os.WriteFile(path, []byte("weights of a small model"), 0o644); err != nil {
		log.Fatal(err)
	}
	defer os.Remove(path)
	h, err := kvik.OpenMmap(path, "r")
	if err != nil {
		log.Fatal(err)
	}
	defer h.Close() // unregisters, then unmaps
	if err := h.RegisterDevice(); err != nil {
		log.Print("zero-copy refused, reads use bounce buffers: ", err)
	}
	size, _ := h.Size()
	dev, err := cuda.MemAlloc(int(size)) // a CUDA context must be current
	if err != nil {
		log.Fatal(err)
	}
	defer dev.Close()
	n, err := h.ReadDevice(dev.Ptr(), int(size), 0, 0)
	fmt.Println(n, err, h.DeviceRegistered())
}
