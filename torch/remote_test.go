package torch

import (
	"bytes"
	"context"
	"errors"
	"net/http"
	"os"
	"path/filepath"
	"testing"

	"github.com/kvikgo/kvik"
	"github.com/kvikgo/kvik/internal/testkit/httpfault"
	"github.com/kvikgo/kvik/internal/testkit/s3test"
)

// TestS3Fixtures loads every fixture from versitygw (its directory and
// data.pkl in ranged GETs, its tensors in parallel ones) into host
// memory and, where there is a GPU, onto device 0, against what
// torch.load gave.
func TestS3Fixtures(t *testing.T) {
	v := s3test.Start(t)
	for file := range readExpected(t).Files {
		b, err := os.ReadFile(filepath.Join("testdata", file))
		if err != nil {
			t.Fatal(err)
		}
		v.Put(t, "ckpt/"+file, b)
		c, err := LoadHost(context.Background(), v.URLOf("ckpt/"+file), nil, v.Opts()...)
		if err != nil {
			t.Fatalf("%s: %v", file, err)
		}
		checkTensors(t, file, c.Tensors, func(x *Tensor) []byte { return x.Data })
		if !haveGPU() {
			continue
		}
		d, err := Load(context.Background(), v.URLOf("ckpt/"+file), nil, v.Opts()...)
		if err != nil {
			t.Fatalf("%s onto the GPU: %v", file, err)
		}
		checkTensors(t, file, d.Tensors, func(x *Tensor) []byte { return fromDevice(t, x) })
		d.Close()
	}
}

// TestHTTPHostile loads checkpoints, an archive and one in the legacy
// format, from servers that misbehave: a connection reset or a short
// body on the GETs after the opening one (the archive's directory at its
// end, the legacy pickles at its start, the tensor's bytes) is
// kvik.ErrShortBody, not an invalid checkpoint; an archive whose
// data.pkl lies about a storage, or a legacy storage's count that does
// not match its description, is ErrInvalidCheckpoint,
// as from a file, before anything is allocated; a 403 is a typed status
// error.
func TestHTTPHostile(t *testing.T) {
	data := make([]byte, 3<<20)
	for i := range data {
		data[i] = byte(i*13 + 5)
	}
	n := int64(len(data) / 4)
	good := archiveOf(t, "m", tensorPickle("w", "FloatStorage", "0", n, 0, []int64{n}, []int64{1}), map[string][]byte{"data/0": data})
	lying := archiveOf(t, "m", tensorPickle("w", "FloatStorage", "0", n, 0, []int64{n + 1}, []int64{1}), map[string][]byte{"data/0": data})
	// The legacy format: its tensor w is 8 elements from the third.
	legacy := legacyFile(legacyCase{count: n, data: data})
	legacyLying := legacyFile(legacyCase{count: n, data: data, header: n + 1})
	srv := httpfault.New(t, map[string][]byte{"/good.pt": good, "/lying.pt": lying, "/legacy.pt": legacy, "/legacy-lying.pt": legacyLying}, nil)
	c, err := LoadHost(context.Background(), srv.URL+"/good.pt", nil)
	if err != nil || !bytes.Equal(c.Tensor("w").Data, data) {
		t.Fatalf("the good checkpoint: %v", err)
	}
	if c, err = LoadHost(context.Background(), srv.URL+"/legacy.pt", nil); err != nil || !bytes.Equal(c.Tensor("w").Data, data[8:40]) {
		t.Fatalf("the good legacy checkpoint: %v", err)
	}
	for _, f := range []string{"/lying.pt", "/legacy-lying.pt"} {
		if _, err := LoadHost(context.Background(), srv.URL+f, nil); !errors.Is(err, ErrInvalidCheckpoint) {
			t.Errorf("a lying checkpoint %s: %v", f, err)
		}
	}
	restore, err := kvik.UpdateDefaults(func(d *kvik.Defaults) { d.HTTPMaxAttempts = 1 })
	if err != nil {
		t.Fatal(err)
	}
	defer restore()
	for name, f := range map[string]func(http.ResponseWriter, *http.Request, []byte){"reset": httpfault.Reset, "short": httpfault.Short} {
		srv.SetFault(func(n int32, w http.ResponseWriter, r *http.Request, data []byte) bool {
			if n >= 2 {
				f(w, r, data)
			}
			return n >= 2
		})
		for _, f := range []string{"/good.pt", "/legacy.pt"} {
			if _, err := LoadHost(context.Background(), srv.URL+f, nil); !errors.Is(err, kvik.ErrShortBody) {
				t.Errorf("%s body of %s: %v", name, f, err)
			}
		}
	}
	srv.SetFault(httpfault.Status(403, 1, 0))
	var se *kvik.HTTPStatusError
	if _, err := ReadHeader(context.Background(), srv.URL+"/good.pt", nil); !errors.As(err, &se) || se.Code != 403 {
		t.Errorf("403: %v", err)
	}
}
