package zarr

import (
	"context"
	"errors"
	"net/http"
	"net/http/httptest"
	"runtime"
	"testing"

	"github.com/kvikgo/kvik"
)

// TestRemoteClaimedSizes: a server claiming a 1 TiB chunk or metadata
// document makes the read fail with kvik.ErrTooLarge, without the memory:
// before, the GET allocated the Content-Length and the process died.
func TestRemoteClaimedSizes(t *testing.T) {
	const doc = `{"zarr_format":3,"node_type":"array","shape":[100],"data_type":"uint8",` +
		`"chunk_grid":{"name":"regular","configuration":{"chunk_shape":[10]}},` +
		`"chunk_key_encoding":{"name":"default"},"fill_value":0,"codecs":[{"name":"bytes"},{"name":"gzip","configuration":{"level":1}}]}`
	huge := func(w http.ResponseWriter) {
		w.Header().Set("Content-Length", "1099511627776")
		w.WriteHeader(http.StatusOK)
		w.Write([]byte("x"))
	}
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		switch r.URL.Path {
		case "/ok/zarr.json":
			w.Write([]byte(doc))
		case "/ok/c/3", "/bad/zarr.json":
			huge(w)
		case "/ok/c/5":
			// 3 MiB for a 10-byte chunk: within the document cap, not
			// within what a 10-byte chunk may take stored.
			w.Header().Set("Content-Length", "3145728")
			w.WriteHeader(http.StatusOK)
			w.Write(make([]byte, 3<<20))
		default:
			http.NotFound(w, r)
		}
	}))
	defer srv.Close()
	ctx := context.Background()
	opts := WithRemoteOptions(kvik.WithEndpointType(kvik.RemoteHTTP))
	var before, after runtime.MemStats
	runtime.ReadMemStats(&before)
	if _, err := OpenArray(ctx, srv.URL+"/bad", opts); !errors.Is(err, kvik.ErrTooLarge) {
		t.Errorf("open with a claimed 1 TiB zarr.json: %v, want ErrTooLarge", err)
	}
	a, err := OpenArray(ctx, srv.URL+"/ok", opts)
	if err != nil {
		t.Fatal(err)
	}
	defer a.Store().(*RemoteStore).Close()
	dst := make([]byte, 100)
	if err := a.ReadRegion(ctx, []int{0}, []int{30}, dst[:30]); err != nil {
		t.Fatalf("chunks 0-2 (missing, fill value): %v", err)
	}
	if err := a.ReadRegion(ctx, []int{25}, []int{35}, dst[:10]); !errors.Is(err, kvik.ErrTooLarge) {
		t.Errorf("read of a chunk claiming 1 TiB: %v, want ErrTooLarge", err)
	}
	if err := a.ReadRegion(ctx, []int{50}, []int{55}, dst[:5]); !errors.Is(err, kvik.ErrTooLarge) {
		t.Errorf("read of a 10-byte chunk stored in 3 MiB: %v, want ErrTooLarge", err)
	}
	runtime.ReadMemStats(&after)
	if got := after.TotalAlloc - before.TotalAlloc; got > 256<<20 {
		t.Errorf("%d bytes of heap for refused claims", got)
	}
}
