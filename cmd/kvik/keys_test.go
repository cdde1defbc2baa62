package main

import (
	"context"
	"io/fs"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/kvikgo/kvik/internal/testkit/s3test"
	"github.com/kvikgo/kvik/zarr"
)

// TestZarrCpKeysStayInPrefix copies a local Zarr store holding a file
// whose name is full of escapes to S3: it lands under its literal name
// inside the destination (issue 28, finding 1: the old code sent PUT
// /bucket/datasets/victim.txt before failing its read-back).
func TestZarrCpKeysStayInPrefix(t *testing.T) {
	srv := s3test.Start(t)
	src := filepath.Join(t.TempDir(), "src.zarr")
	ls, err := zarr.NewDirStore(src)
	if err != nil {
		t.Fatal(err)
	}
	a, err := zarr.Create(context.Background(), ls, "", zarr.Metadata{Shape: []int{6}, ChunkShape: []int{4}, DataType: zarr.DataType{Kind: zarr.Uint, Size: 1}})
	if err != nil {
		t.Fatal(err)
	}
	if err := a.WriteRegion(context.Background(), []int{0}, []int{6}, []byte{9, 8, 7, 6, 5, 4}); err != nil {
		t.Fatal(err)
	}
	const name = "x%2f..%2f..%2fvictim.txt"
	if err := os.WriteFile(filepath.Join(src, name), []byte("victim"), 0o644); err != nil {
		t.Fatal(err)
	}
	runKvik(t, s3Env(srv), "cp", src, srv.URLOf("datasets/dst.zarr")).expect(t, 0)
	if b, ok := srv.Object("datasets/dst.zarr/" + name); !ok || string(b) != "victim" {
		t.Errorf("%s not copied under its literal name", name)
	}
	filepath.WalkDir(srv.Dir, func(p string, d fs.DirEntry, err error) error {
		rel, _ := filepath.Rel(srv.Dir, p)
		if err == nil && !d.IsDir() && !strings.HasPrefix(rel, ".") && !strings.HasPrefix(rel, s3test.Bucket+"/datasets/dst.zarr/") {
			t.Errorf("object outside the destination: %s", rel)
		}
		return err
	})
}
