package npy_test

import (
	"fmt"
	"log"
	"os"
	"path/filepath"

	"github.com/kvikgo/kvik/npy"
)

// Save a 2x3 uint8 array in Fortran order and load it back; LoadDevice
// loads into GPU memory instead.
func ExampleLoad() {
	dir, _ := os.MkdirTemp("", "npy")
	defer os.RemoveAll(dir)
	path := filepath.Join(dir, "a.npy")
	if err := npy.Save(path, npy.Uint8, []int64{2, 3}, true, []byte{1, 4, 2, 5, 3, 6}); err != nil {
		log.Fatal(err)
	}
	a, err := npy.Load(path)
	if err != nil {
		log.Fatal(err)
	}
	fmt.Println(a.Dtype, a.Shape, a.FortranOrder, a.Data)
	// Output: |u1 [2 3] true [1 4 2 5 3 6]
}
