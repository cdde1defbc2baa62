package kvik_test

import (
	"errors"
	"fmt"
	"log"

	"github.com/kvikgo/kvik"
)

// ExampleOpenMmap maps part of a file and reads from it; a read outside
// the mapped region is refused with ErrOutOfRange.
func ExampleOpenMmap() {
	path, cleanup := exampleFile("header:payload-bytes")
	defer cleanup()

	h, err := kvik.OpenMmap(path, "r", kvik.WithMapOffset(7))
	if err != nil {
		log.Fatal(err)
	}
	defer h.Close()

	buf := make([]byte, 7)
	n, err := h.ReadAt(buf, 7) // file offsets, as FileHandle.ReadAt
	fmt.Println(n, err, string(buf[:n]))

	_, err = h.ReadAt(buf, 0)
	fmt.Println(errors.Is(err, kvik.ErrOutOfRange))
	// Output:
	// 7 <nil> payload
	// true
}
