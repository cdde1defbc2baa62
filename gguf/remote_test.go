package gguf

import (
	"bytes"
	"context"
	"math/rand/v2"
	"os"
	"path/filepath"
	"reflect"
	"testing"

	"github.com/kvikgo/kvik"
	"github.com/kvikgo/kvik/internal/testkit/s3test"
)

// TestS3 loads a gguf-py fixture from an S3 URL (versitygw) and from an
// open RemoteHandle, compares them with the local load, and saves a
// random model to S3, expecting the object to be the file Save writes
// locally.
func TestS3(t *testing.T) {
	srv := s3test.Start(t)
	local := filepath.Join("testdata", "all_types.gguf")
	b, err := os.ReadFile(local)
	if err != nil {
		t.Fatal(err)
	}
	url := srv.Put(t, "models/all_types.gguf", b)
	want, err := LoadHost(context.Background(), local, nil)
	if err != nil {
		t.Fatal(err)
	}
	got, err := LoadHost(context.Background(), url, nil, srv.Opts()...)
	if err != nil {
		t.Fatal(err)
	}
	sameModel(t, got, want)
	h, err := ReadHeader(context.Background(), url, nil, srv.Opts()...)
	if err != nil || len(h.Tensors) != len(want.Tensors) {
		t.Fatalf("ReadHeader(%s): %v", url, err)
	}
	r, err := kvik.OpenRemote(context.Background(), url, srv.Opts()...)
	if err != nil {
		t.Fatal(err)
	}
	defer r.Close()
	sub, err := LoadHostReader(context.Background(), r, &Options{Filter: func(ti *TensorInfo) bool { return ti.Type == Q4_K }})
	if err != nil || len(sub.Tensors) != 1 || !bytes.Equal(sub.Tensors[0].Data, want.Tensor(sub.Tensors[0].Name).Data) {
		t.Fatalf("LoadHostReader: %v", err)
	}

	rng := rand.New(rand.NewPCG(11, 12))
	ts, meta := randomTensors(rng, 20), randomMetadata(rng, 64)
	p := filepath.Join(t.TempDir(), "m.gguf")
	if err := Save(context.Background(), p, ts, meta); err != nil {
		t.Fatal(err)
	}
	if err := Save(context.Background(), srv.URLOf("out/m.gguf"), ts, meta, srv.Opts()...); err != nil {
		t.Fatal(err)
	}
	a, _ := os.ReadFile(p)
	o, ok := srv.Object("out/m.gguf")
	if !ok || !bytes.Equal(a, o) {
		t.Fatalf("S3 object (%v) differs from the local file", ok)
	}
}

// sameModel compares two host-loaded models: metadata, tensor infos and
// bytes.
func sameModel(t *testing.T, got, want *Model) {
	t.Helper()
	if !reflect.DeepEqual(got.Metadata, want.Metadata) || len(got.Tensors) != len(want.Tensors) {
		t.Fatalf("metadata or tensor count differ")
	}
	for i := range want.Tensors {
		g, w := &got.Tensors[i], &want.Tensors[i]
		if !reflect.DeepEqual(g.TensorInfo, w.TensorInfo) || !bytes.Equal(g.Data, w.Data) {
			t.Fatalf("tensor %s differs", w.Name)
		}
	}
}
