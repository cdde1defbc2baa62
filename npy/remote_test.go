package npy

import (
	"bytes"
	"context"
	"errors"
	"io/fs"
	"math/rand/v2"
	"net/http"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"

	"github.com/kvikgo/kvik"
	"github.com/kvikgo/kvik/internal/testkit/gputest"
	"github.com/kvikgo/kvik/internal/testkit/httpfault"
	"github.com/kvikgo/kvik/internal/testkit/s3test"
)

// fixtures returns the committed .npy files by name.
func fixtures(t *testing.T) map[string][]byte {
	t.Helper()
	names, err := filepath.Glob(filepath.Join("testdata", "*.npy"))
	if err != nil || len(names) < 80 {
		t.Fatalf("found %d fixtures: %v", len(names), err)
	}
	out := map[string][]byte{}
	for _, p := range names {
		b, err := os.ReadFile(p)
		if err != nil {
			t.Fatal(err)
		}
		out[filepath.Base(p)] = b
	}
	return out
}

// sameArray compares a remote load with the local one.
func sameArray(t *testing.T, what string, want, got *Array) {
	t.Helper()
	if got.Dtype != want.Dtype || got.FortranOrder != want.FortranOrder || !slices.Equal(got.Shape, want.Shape) ||
		got.DataOffset != want.DataOffset || !bytes.Equal(got.Data, want.Data) {
		t.Fatalf("%s: got %+v (%d bytes), want %+v (%d bytes)", what, got.Header, len(got.Data), want.Header, len(want.Data))
	}
}

// TestS3Fixtures uploads the committed files to an S3 server and reads
// each through its s3:// URL (header and data), comparing with the local
// read; the object array fails as locally.
func TestS3Fixtures(t *testing.T) {
	v := s3test.Start(t)
	for name, b := range fixtures(t) {
		v.Put(t, "npy/"+name, b)
	}
	for name := range fixtures(t) {
		url := v.URLOf("npy/" + name)
		want, werr := LoadHost(context.Background(), filepath.Join("testdata", name), nil)
		got, err := LoadHost(context.Background(), url, nil, v.Opts()...)
		if werr != nil {
			if !errors.Is(werr, ErrUnsupportedDtype) || !errors.Is(err, ErrUnsupportedDtype) {
				t.Fatalf("%s: %v locally, %v remotely", name, werr, err)
			}
			continue
		}
		if err != nil {
			t.Fatalf("%s: %v", url, err)
		}
		sameArray(t, url, want, got)
		if !strings.HasSuffix(name, "0.npy") {
			continue
		}
		h, err := ReadHeader(context.Background(), url, nil, v.Opts()...)
		if err != nil || h.Dtype != want.Dtype || !slices.Equal(h.Shape, want.Shape) {
			t.Fatalf("%s: header %+v, %v", url, h, err)
		}
	}
	if _, err := LoadHost(context.Background(), v.URLOf("npy/none.npy"), nil, v.Opts()...); !errors.Is(err, fs.ErrNotExist) {
		t.Fatalf("missing object: %v", err)
	}
}

// TestS3SaveLoad saves random arrays (one large enough for a multipart
// upload) to S3 and to a file: the object equals the file and loads back
// from its URL, or from a Reader the caller opened.
func TestS3SaveLoad(t *testing.T) {
	v := s3test.Start(t)
	rng := rand.New(rand.NewPCG(91, 92))
	for i, c := range []struct {
		d     Dtype
		shape []int64
	}{{Float32, []int64{3, 7}}, {Dtype(">i8"), []int64{5}}, {Uint8, []int64{11<<20 + 3}}, {Complex64, []int64{}}} {
		n := int64(c.d.Size())
		for _, s := range c.shape {
			n *= s
		}
		data := make([]byte, n)
		for j := range data {
			data[j] = byte(rng.Uint32())
		}
		fortran := i%2 == 0
		local := filepath.Join(t.TempDir(), "a.npy")
		key := "saved/" + string(rune('a'+i)) + ".npy"
		if err := Save(context.Background(), local, SaveArray{Dtype: c.d, Shape: c.shape, Fortran: fortran, Data: data}); err != nil {
			t.Fatal(err)
		}
		if err := Save(context.Background(), v.URLOf(key), SaveArray{Dtype: c.d, Shape: c.shape, Fortran: fortran, Data: data}, v.Opts()...); err != nil {
			t.Fatal(err)
		}
		want, _ := os.ReadFile(local)
		if got, ok := v.Object(key); !ok || !bytes.Equal(got, want) {
			t.Fatalf("%s: object of %d bytes differs from the %d-byte file", key, len(got), len(want))
		}
		a, err := LoadHost(context.Background(), v.URLOf(key), nil, v.Opts()...)
		if err != nil || !bytes.Equal(a.Data, data) || a.Dtype != c.d || a.FortranOrder != fortran || !slices.Equal(a.Shape, c.shape) {
			t.Fatalf("%s: loaded %+v, %v", key, a, err)
		}
		r, err := kvik.OpenReader(t.Context(), v.URLOf(key), v.Opts()...)
		if err != nil {
			t.Fatal(err)
		}
		b, err := LoadHostReader(context.Background(), r, nil)
		if err != nil || !bytes.Equal(b.Data, data) {
			t.Fatalf("%s: LoadReader: %v", key, err)
		}
		if _, err := r.Size(); err != nil {
			t.Fatalf("reader closed by LoadReader: %v", err)
		}
		r.Close()
	}
}

// TestHTTPRequests reads the fixtures over plain HTTP, comparing with
// the local read: opening costs a HEAD, the header one GET, and a small
// array's data one more.
func TestHTTPRequests(t *testing.T) {
	objs := map[string][]byte{}
	for name, b := range fixtures(t) {
		objs["/"+name] = b
	}
	srv := httpfault.New(t, objs, nil)
	for name := range fixtures(t) {
		if name == "object.npy" {
			continue
		}
		want, err := LoadHost(context.Background(), filepath.Join("testdata", name), nil)
		if err != nil {
			t.Fatal(err)
		}
		srv.SetFault(nil)
		got, err := LoadHost(context.Background(), srv.URL+"/"+name, nil)
		if err != nil {
			t.Fatal(err)
		}
		sameArray(t, name, want, got)
		// The GET that opens the URL brings the first MiB: every fixture
		// whole, its header and its data with no request of their own.
		if heads := srv.Requests.Load() - srv.GETs.Load(); heads != 0 || srv.GETs.Load() != 1 {
			t.Fatalf("%s: %d HEADs and %d GETs, want 0 and 1", name, heads, srv.GETs.Load())
		}
	}
	// A header longer than the probe: its rest is read too, from the
	// same first MiB. With the size given (no opening GET), the probe,
	// the header's rest and the data each take a GET.
	dict := "{'descr': '<u2', 'fortran_order': False, 'shape': (3,), " + strings.Repeat(" ", 70<<10) + "}"
	b := header(2, dict, 6)
	copy(b[len(b)-6:], []byte{1, 2, 3, 4, 5, 6})
	srv2 := httpfault.New(t, map[string][]byte{"/long.npy": b}, nil)
	for _, c := range []struct {
		opts []kvik.RemoteOption
		gets int32
	}{{nil, 1}, {[]kvik.RemoteOption{kvik.WithRemoteSize(int64(len(b)))}, 3}} {
		srv2.SetFault(nil)
		a, err := LoadHost(context.Background(), srv2.URL+"/long.npy", nil, c.opts...)
		if err != nil || !bytes.Equal(a.Data, []byte{1, 2, 3, 4, 5, 6}) || srv2.GETs.Load() != c.gets {
			t.Fatalf("long header (%d options): %v after %d GETs, want %d", len(c.opts), err, srv2.GETs.Load(), c.gets)
		}
	}
}

// TestHTTPFaults: 503 and 429 are retried; 403, 500 after the retries, a
// reset mid-body and a short body fail the load with typed errors.
func TestHTTPFaults(t *testing.T) {
	restore, err := kvik.UpdateDefaults(func(d *kvik.Defaults) { d.HTTPMaxAttempts = 2 })
	if err != nil {
		t.Fatal(err)
	}
	defer restore()
	// Past the first MiB, which the GET that opens the URL brings: the
	// data takes a GET of its own, for the faults to hit.
	data := make([]byte, 1_500_000)
	for i := range data {
		data[i] = byte(i * 7)
	}
	p := filepath.Join(t.TempDir(), "a.npy")
	if err := Save(context.Background(), p, SaveArray{Dtype: Float64, Shape: []int64{int64(len(data) / 8)}, Data: data}); err != nil {
		t.Fatal(err)
	}
	b, _ := os.ReadFile(p)
	srv := httpfault.New(t, map[string][]byte{"/a.npy": b}, nil)
	url := srv.URL + "/a.npy"
	for _, f := range []httpfault.Fault{httpfault.Status(503, 1, 2), httpfault.Status(429, 2, 3)} {
		srv.SetFault(f)
		if a, err := LoadHost(context.Background(), url, nil); err != nil || !bytes.Equal(a.Data, data) {
			t.Fatalf("retried fault: %v", err)
		}
	}
	var se *kvik.HTTPStatusError
	srv.SetFault(httpfault.Status(403, 1, 0))
	if _, err := ReadHeader(context.Background(), url, nil); !errors.Is(err, fs.ErrPermission) || !errors.As(err, &se) || se.Code != 403 {
		t.Fatalf("403: %v", err)
	}
	srv.SetFault(httpfault.Status(500, 2, 0))
	if _, err := LoadHost(context.Background(), url, nil); !errors.As(err, &se) || se.Code != 500 || srv.GETs.Load() != 3 {
		t.Fatalf("500 twice: %v after %d GETs", err, srv.GETs.Load())
	}
	for name, f := range map[string]func(http.ResponseWriter, *http.Request, []byte){"reset": httpfault.Reset, "short": httpfault.Short} {
		srv.SetFault(func(n int32, w http.ResponseWriter, r *http.Request, data []byte) bool {
			if n >= 2 {
				f(w, r, data)
			}
			return n >= 2
		})
		if _, err := LoadHost(context.Background(), url, nil); !errors.Is(err, kvik.ErrShortBody) {
			t.Fatalf("%s body: %v", name, err)
		}
	}
}

// TestRemoteDevice loads the fixtures from S3 into device memory, with
// small tasks so that large arrays take several parallel ranged GETs,
// and compares with the local host load.
func TestRemoteDevice(t *testing.T) {
	gputest.Need(t)
	restore, err := kvik.UpdateDefaults(func(d *kvik.Defaults) { d.TaskSize = 4 << 10 })
	if err != nil {
		t.Fatal(err)
	}
	defer restore()
	v := s3test.Start(t)
	for name, b := range fixtures(t) {
		if name == "object.npy" {
			continue
		}
		want, err := LoadHost(context.Background(), filepath.Join("testdata", name), nil)
		if err != nil {
			t.Fatal(err)
		}
		a, err := Load(context.Background(), v.Put(t, name, b), nil, v.Opts()...)
		if err != nil {
			t.Fatalf("%s: %v", name, err)
		}
		if got := fromDevice(t, a); !bytes.Equal(got, want.Data) || !slices.Equal(a.Shape, want.Shape) {
			t.Fatalf("%s: device bytes or shape differ", name)
		}
		a.Close()
	}
}
