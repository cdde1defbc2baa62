package npy_test

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
	"github.com/kvikgo/kvik/npy"
)

// Save a 2x3 uint8 array in Fortran order and load it back into host
// memory; Load loads into GPU memory instead.
func ExampleLoadHost() {
	ctx := context.Background()
	dir, _ := os.MkdirTemp("", "npy")
	defer os.RemoveAll(dir)
	path := filepath.Join(dir, "a.npy")
	a := npy.SaveArray{Dtype: npy.Uint8, Shape: []int64{2, 3}, Fortran: true, Data: []byte{1, 4, 2, 5, 3, 6}}
	if err := npy.Save(ctx, path, a); err != nil {
		log.Fatal(err)
	}
	got, err := npy.LoadHost(ctx, path, nil)
	if err != nil {
		log.Fatal(err)
	}
	fmt.Println(got.Dtype, got.Shape, got.FortranOrder, got.Data)
	// Output: |u1 [2 3] true [1 4 2 5 3 6]
}

// Load an array from an HTTP server into host memory: one ranged GET for
// the header, then the data in parallel ranged GETs.
func ExampleLoadHost_url() {
	ctx := context.Background()
	dir, _ := os.MkdirTemp("", "npy")
	defer os.RemoveAll(dir)
	a := npy.SaveArray{Dtype: npy.Int16, Shape: []int64{3}, Data: []byte{1, 0, 2, 0, 3, 0}}
	if err := npy.Save(ctx, filepath.Join(dir, "a.npy"), a); err != nil {
		log.Fatal(err)
	}
	srv := httptest.NewServer(http.FileServer(http.Dir(dir)))
	defer srv.Close()

	got, err := npy.LoadHost(ctx, srv.URL+"/a.npy", nil)
	if err != nil {
		log.Fatal(err)
	}
	fmt.Println(got.Dtype, got.Shape, got.Data)
	// Output: <i2 [3] [1 0 2 0 3 0]
}

// Load an array from S3 into GPU 1's memory; the AWS_* variables give
// the credentials and region unless options do.
func ExampleLoad_s3() {
	o := &npy.Options{Devices: []int{1}}
	a, err := npy.Load(context.Background(), "s3://my-bucket/arrays/x.npy", o, kvik.WithS3Endpoint("http://127.0.0.1:7070"))
	if err != nil {
		log.Fatal(err)
	}
	defer a.Close()
	fmt.Println(a.Dtype, a.Shape, a.Ptr)
}

// Read the fields of a structured dtype's records: NumPy's
// np.dtype([('xyz', '<f4', (3,)), ('i', '<u2')], align=True), which pads
// each record to 16 bytes.
func ExampleDtype_Fields() {
	d, err := npy.ParseDtype("[('xyz', '<f4', (3,)), ('i', '<u2'), ('', '|V2')]")
	if err != nil {
		log.Fatal(err)
	}
	fmt.Println(d.Kind() == 'V', d.Size())
	for _, f := range d.Fields() {
		fmt.Printf("%q %s %v at %d, %d bytes\n", f.Name, f.Dtype, f.Shape, f.Offset, f.Size)
	}
	rec := []byte{0, 0, 128, 63, 0, 0, 0, 64, 0, 0, 64, 64, 7, 0, 0, 0} // (1, 2, 3), 7
	fmt.Println(math.Float32frombits(binary.LittleEndian.Uint32(rec[8:])), binary.LittleEndian.Uint16(rec[12:]))
	// Output:
	// true 16
	// "xyz" <f4 [3] at 0, 12 bytes
	// "i" <u2 [] at 12, 2 bytes
	// "" |V2 [] at 14, 2 bytes
	// 3 7
}

// Save two arrays as a .npz archive (as numpy.savez does) and load them
// back into host memory; LoadNpz loads onto a GPU instead.
func ExampleLoadNpzHost() {
	ctx := context.Background()
	dir, _ := os.MkdirTemp("", "npz")
	defer os.RemoveAll(dir)
	path := filepath.Join(dir, "batch.npz")
	err := npy.SaveNpz(ctx, path, []npy.NpzArray{
		{Name: "x", SaveArray: npy.SaveArray{Dtype: npy.Uint8, Shape: []int64{2, 2}, Data: []byte{1, 2, 3, 4}}},
		{Name: "labels", SaveArray: npy.SaveArray{Dtype: npy.Int16, Shape: []int64{2}, Data: []byte{7, 0, 9, 0}}},
	})
	if err != nil {
		log.Fatal(err)
	}
	a, err := npy.LoadNpzHost(ctx, path, nil)
	if err != nil {
		log.Fatal(err)
	}
	for _, name := range a.Names {
		arr := a.Arrays[name]
		fmt.Println(name, arr.Dtype, arr.Shape, arr.Data)
	}
	// Output:
	// x |u1 [2 2] [1 2 3 4]
	// labels <i2 [2] [7 0 9 0]
}
