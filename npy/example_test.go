package npy_test

import (
	"fmt"
	"log"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"

	"github.com/kvikgo/kvik"
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

// Load an array from an HTTP server: one ranged GET for the header, then
// the data in parallel ranged GETs.
func ExampleLoad_url() {
	dir, _ := os.MkdirTemp("", "npy")
	defer os.RemoveAll(dir)
	if err := npy.Save(filepath.Join(dir, "a.npy"), npy.Int16, []int64{3}, false, []byte{1, 0, 2, 0, 3, 0}); err != nil {
		log.Fatal(err)
	}
	srv := httptest.NewServer(http.FileServer(http.Dir(dir)))
	defer srv.Close()

	a, err := npy.Load(srv.URL + "/a.npy")
	if err != nil {
		log.Fatal(err)
	}
	fmt.Println(a.Dtype, a.Shape, a.Data)
	// Output: <i2 [3] [1 0 2 0 3 0]
}

// Load an array from S3 into GPU 0's memory; the AWS_* variables give
// the credentials and region unless options do.
func ExampleLoadDevice_s3() {
	a, err := npy.LoadDevice("s3://my-bucket/arrays/x.npy", 0, kvik.WithS3Endpoint("http://127.0.0.1:7070"))
	if err != nil {
		log.Fatal(err)
	}
	defer a.Close()
	fmt.Println(a.Dtype, a.Shape, a.Ptr)
}
