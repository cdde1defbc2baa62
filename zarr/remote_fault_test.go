package zarr

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io/fs"
	"math/rand/v2"
	"net"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"go.uber.org/goleak"

	"github.com/kvikgo/kvik"
)

// objectServer serves the files of a directory from memory over HTTP,
// with Range support, logging each request and letting a fault (set by
// setFault) misbehave instead of answering (it returns false to answer
// normally). Files and the fault are changed only through its methods:
// handlers of a read that failed may still be running when a test
// changes them for the next case.
type objectServer struct {
	*httptest.Server

	mu    sync.Mutex
	files map[string][]byte
	fault faultFunc
	log   []string // "key range"
}

type faultFunc func(key string, w http.ResponseWriter, r *http.Request) bool

// setFault makes f answer the requests from now on (nil: none).
func (o *objectServer) setFault(f faultFunc) {
	o.mu.Lock()
	defer o.mu.Unlock()
	o.fault = f
}

// file returns the content served at key.
func (o *objectServer) file(key string) ([]byte, bool) {
	o.mu.Lock()
	defer o.mu.Unlock()
	b, ok := o.files[key]
	return b, ok
}

// setFile serves b at key; nil removes the key.
func (o *objectServer) setFile(key string, b []byte) {
	o.mu.Lock()
	defer o.mu.Unlock()
	if b == nil {
		delete(o.files, key)
	} else {
		o.files[key] = b
	}
}

func serveDir(t *testing.T, dir string) *objectServer {
	t.Helper()
	o := &objectServer{files: map[string][]byte{}}
	filepath.WalkDir(dir, func(p string, d fs.DirEntry, err error) error {
		if err == nil && !d.IsDir() {
			rel, _ := filepath.Rel(dir, p)
			o.files[filepath.ToSlash(rel)], _ = os.ReadFile(p)
		}
		return err
	})
	o.Server = httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		key := strings.TrimPrefix(r.URL.Path, "/")
		o.mu.Lock()
		o.log = append(o.log, strings.TrimSpace(key+" "+r.Header.Get("Range")))
		fault := o.fault
		o.mu.Unlock()
		if fault != nil && fault(key, w, r) {
			return
		}
		b, ok := o.file(key)
		if !ok {
			http.Error(w, "NoSuchKey", http.StatusNotFound)
			return
		}
		http.ServeContent(w, r, key, time.Time{}, bytes.NewReader(b))
	}))
	t.Cleanup(o.Close)
	return o
}

// requests returns the requests logged since the last call.
func (o *objectServer) requests() []string {
	o.mu.Lock()
	defer o.mu.Unlock()
	l := o.log
	o.log = nil
	return l
}

// localArray creates a 2-D float32 array of random values in a new
// directory store and returns its directory and contents.
func localArray(t *testing.T, m Metadata) (string, []byte) {
	t.Helper()
	m.DataType = DataType{Kind: Float, Size: 4}
	data := randValues(rand.New(rand.NewPCG(uint64(len(m.Shape)), 9)), m.DataType, numElements(m.Shape))
	return localArrayOf(t, m, data), data
}

// localArrayOf creates a float32 array of m's shapes and codecs holding
// data in a new directory store and returns its directory.
func localArrayOf(t *testing.T, m Metadata, data []byte) string {
	t.Helper()
	dir := t.TempDir()
	s, err := NewDirStore(dir)
	if err != nil {
		t.Fatal(err)
	}
	m.DataType = DataType{Kind: Float, Size: 4}
	a, err := Create(bg, s, "", m)
	if err != nil {
		t.Fatal(err)
	}
	if err := a.WriteRegion(bg, make([]int, len(m.Shape)), m.Shape, data); err != nil {
		t.Fatal(err)
	}
	return dir
}

// servedArray creates an array as localArray does, serves its directory
// (serveDir) and opens it over HTTP; it returns the server, the array
// read through it and the array's contents.
func servedArray(t *testing.T, m Metadata) (*objectServer, *Array, []byte) {
	t.Helper()
	dir, data := localArray(t, m)
	srv, a := serveArray(t, dir)
	return srv, a, data
}

// serveArray serves the array at dir (serveDir) and opens it over HTTP.
func serveArray(t *testing.T, dir string) (*objectServer, *Array) {
	t.Helper()
	srv := serveDir(t, dir)
	s, err := OpenURL(bg, srv.URL)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { s.Close() })
	a, err := Open(bg, s, "")
	if err != nil {
		t.Fatal(err)
	}
	return srv, a
}

// quickRetries makes failed requests retry at once, twice.
func quickRetries(t *testing.T) {
	restore, err := kvik.UpdateDefaults(func(d *kvik.Defaults) { d.HTTPMaxAttempts = 2 })
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(restore)
}

// resetHalf answers a GET with headers for the whole body, half of it,
// then a reset connection.
func resetHalf(w http.ResponseWriter, b []byte) {
	conn, bw, err := http.NewResponseController(w).Hijack()
	if err != nil {
		return
	}
	fmt.Fprintf(bw, "HTTP/1.1 200 OK\r\nContent-Length: %d\r\n\r\n", len(b))
	bw.Write(b[:len(b)/2])
	bw.Flush()
	if tc, ok := conn.(*net.TCPConn); ok {
		tc.SetLinger(0) // RST instead of FIN
	}
	conn.Close()
}

// TestRemoteFaults checks that only a missing chunk reads as the fill
// value: throttling is retried, and a refused chunk, a server error that
// outlasts the retries, a reset mid-chunk and a short body each fail the
// read with a typed error.
func TestRemoteFaults(t *testing.T) {
	quickRetries(t)
	zstd := Codec{Name: "zstd", Configuration: map[string]any{"level": 1}}
	dir, data := localArray(t, Metadata{Shape: []int{40, 30}, ChunkShape: []int{10, 30}, FillValue: "NaN", Codecs: []Codec{{Name: "bytes"}, zstd}})
	srv := serveDir(t, dir)
	s, err := OpenURL(bg, srv.URL, WithMaxRequests(2))
	if err != nil {
		t.Fatal(err)
	}
	defer s.Close()
	a, err := Open(bg, s, "")
	if err != nil {
		t.Fatal(err)
	}
	const victim = "c/2/0"
	read := func() ([]byte, error) {
		got := make([]byte, len(data))
		return got, a.ReadRegion(bg, []int{0, 0}, a.Shape(), got)
	}
	for _, code := range []int{503, 429} {
		var tries atomic.Int32
		srv.setFault(func(key string, w http.ResponseWriter, r *http.Request) bool {
			if key == victim && tries.Add(1) == 1 {
				http.Error(w, "slow down", code)
				return true
			}
			return false
		})
		if got, err := read(); err != nil || !bytes.Equal(got, data) {
			t.Fatalf("%d once: %v", code, err)
		}
		if tries.Load() != 2 {
			t.Fatalf("%d: %d requests for the chunk, want 2", code, tries.Load())
		}
	}
	for _, c := range []struct {
		name  string
		fault func(w http.ResponseWriter)
		check func(error) bool
	}{
		{"403", func(w http.ResponseWriter) { http.Error(w, "AccessDenied", http.StatusForbidden) }, func(err error) bool {
			var se *kvik.HTTPStatusError
			return errors.Is(err, fs.ErrPermission) && errors.As(err, &se) && se.Code == 403
		}},
		{"500 after retries", func(w http.ResponseWriter) { http.Error(w, "InternalError", 500) }, func(err error) bool {
			var se *kvik.HTTPStatusError
			return errors.As(err, &se) && se.Code == 500 && strings.Contains(err.Error(), "giving up after 2 attempts")
		}},
		{"reset mid-chunk", func(w http.ResponseWriter) { b, _ := srv.file(victim); resetHalf(w, b) }, func(err error) bool {
			return errors.Is(err, kvik.ErrShortBody)
		}},
		{"short body", func(w http.ResponseWriter) {
			b, _ := srv.file(victim)
			w.Header().Set("Content-Length", fmt.Sprint(len(b)))
			w.Write(b[:len(b)-7])
		}, func(err error) bool { return errors.Is(err, kvik.ErrShortBody) }},
	} {
		srv.setFault(func(key string, w http.ResponseWriter, r *http.Request) bool {
			if key == victim {
				c.fault(w)
				return true
			}
			return false
		})
		if _, err := read(); err == nil || !c.check(err) || errors.Is(err, fs.ErrNotExist) {
			t.Fatalf("%s: %v", c.name, err)
		} else {
			t.Logf("%s: %v", c.name, err)
		}
	}
	// A missing chunk (404 NoSuchKey) is the fill value, NaN.
	srv.setFault(nil)
	srv.setFile(victim, nil)
	got, err := read()
	if err != nil {
		t.Fatal(err)
	}
	for i := 0; i < len(got); i += 4 {
		inVictim := i/4/30 >= 20 && i/4/30 < 30
		if nan := bytes.Equal(got[i:i+4], []byte{0, 0, 0xc0, 0x7f}); nan != inVictim || !inVictim && !bytes.Equal(got[i:i+4], data[i:i+4]) {
			t.Fatalf("element %d: %x (in the missing chunk: %v)", i/4, got[i:i+4], inVictim)
		}
	}
}

// TestRemoteShardStreams reads sharded zstd arrays over HTTP from a
// server that sends each range of inner chunks in small writes, and cuts
// the first answer for each range short (a reset or a short body) after
// a random share of it: the read hands inner chunks over as their bytes
// come (kvik.RemotePrefix.ReadRangeFunc), resumes a cut range after the
// bytes it holds (a request for the rest of it, not the whole range
// again) and reads every region byte for byte as stored.
func TestRemoteShardStreams(t *testing.T) {
	quickRetries(t)
	decodeUnit = 4 * 64 * 4 // a part per inner chunk
	t.Cleanup(func() { decodeUnit = 1 << 20 })
	rng := rand.New(rand.NewPCG(13, 14))
	inner := []Codec{{Name: "bytes"}, {Name: "zstd", Configuration: map[string]any{"level": 1}}}
	m := Metadata{Shape: []int{64, 256}, ChunkShape: []int{32, 256}, Codecs: shardCodecs([]int{4, 64}, false, inner)}
	srv, a, data := servedArray(t, m)
	ref := model{shape: m.Shape, es: 4, buf: data}
	var mu sync.Mutex
	cut := map[string]bool{} // ranges (by key and end) already cut once
	srv.setFault(func(key string, w http.ResponseWriter, r *http.Request) bool {
		rg := r.Header.Get("Range")
		var first, last int64
		if _, err := fmt.Sscanf(rg, "bytes=%d-%d", &first, &last); err != nil || !strings.HasPrefix(key, "c/") {
			return false // the index (a suffix) and metadata as they are
		}
		b, _ := srv.file(key)
		last = min(last, int64(len(b))-1)
		body := b[first : last+1]
		mu.Lock()
		end := fmt.Sprint(key, last) // a resumed request asks for the rest: the same end
		first1 := !cut[end]
		cut[end] = true
		k := rng.IntN(len(body))
		reset := rng.IntN(2) == 0
		pieces := rand.New(rand.NewPCG(rng.Uint64(), 1)) // this answer's own
		mu.Unlock()
		if first1 && reset {
			conn, bw, err := http.NewResponseController(w).Hijack()
			if err != nil {
				return true
			}
			fmt.Fprintf(bw, "HTTP/1.1 206 Partial Content\r\nContent-Range: bytes %d-%d/%d\r\nContent-Length: %d\r\n\r\n", first, last, len(b), len(body))
			bw.Write(body[:k])
			bw.Flush()
			conn.(*net.TCPConn).SetLinger(0)
			conn.Close()
			return true
		}
		w.Header().Set("Content-Range", fmt.Sprintf("bytes %d-%d/%d", first, last, len(b)))
		w.Header().Set("Content-Length", fmt.Sprint(len(body)))
		w.WriteHeader(http.StatusPartialContent)
		if first1 {
			body = body[:k] // a short body: the handler ends early
		}
		for len(body) > 0 {
			n := min(len(body), 1+pieces.IntN(2000))
			w.Write(body[:n])
			http.NewResponseController(w).Flush()
			body = body[n:]
		}
		return true
	})
	srv.requests()
	for r := range 6 {
		start, stop := make([]int, 2), m.Shape
		if r > 0 {
			mu.Lock()
			start, stop = randRegion(rng, m.Shape)
			mu.Unlock()
		}
		want := ref.region(start, stop)
		got := make([]byte, len(want))
		if err := a.ReadRegion(bg, start, stop, got); err != nil || !bytes.Equal(got, want) {
			t.Fatalf("region %v-%v: %v", start, stop, err)
		}
	}
	// Each range cut short was asked for again from where its bytes
	// stopped, never whole again.
	log := srv.requests()
	resumed := 0
	asked := map[string]bool{}
	for _, l := range log {
		key, rg, _ := strings.Cut(l, " ")
		var first, last int64
		if _, err := fmt.Sscanf(rg, "bytes=%d-%d", &first, &last); err != nil || !strings.HasPrefix(key, "c/") {
			continue
		}
		for prev := range asked {
			var pf, pl int64
			pk, prg, _ := strings.Cut(prev, " ")
			fmt.Sscanf(prg, "bytes=%d-%d", &pf, &pl)
			if pk == key && pl == last && first > pf {
				resumed++
			}
		}
		asked[l] = true
	}
	if resumed == 0 {
		t.Fatalf("no cut range resumed after its bytes: %q", log)
	}
	t.Logf("%d requests, %d of them resuming a cut range", len(log), resumed)
}

// TestRemoteShardRequests reads one inner chunk, then a row of inner
// chunks, of a sharded array over HTTP and checks that only the shard
// index and the inner chunks needed are fetched, by range, adjacent
// inner chunks with one range.
func TestRemoteShardRequests(t *testing.T) {
	for _, start := range []bool{false, true} {
		inner := []Codec{{Name: "bytes"}, {Name: "gzip", Configuration: map[string]any{"level": 1}}}
		m := Metadata{Shape: []int{16, 24}, ChunkShape: []int{8, 12}, Codecs: shardCodecs([]int{4, 3}, start, inner)}
		srv, a, data := servedArray(t, m)
		srv.requests()
		ref := model{shape: m.Shape, es: 4, buf: data}
		for _, r := range []struct {
			start, stop []int
			want        int // requests: shard indexes and inner chunks
		}{
			{[]int{9, 13}, []int{11, 15}, 2},   // one inner chunk of shard (1, 1)
			{[]int{4, 0}, []int{5, 24}, 2 + 2}, // a row of 4 inner chunks in each of two shards, adjacent: one range each
		} {
			got := make([]byte, len(ref.region(r.start, r.stop)))
			if err := a.ReadRegion(bg, r.start, r.stop, got); err != nil || !bytes.Equal(got, ref.region(r.start, r.stop)) {
				t.Fatalf("region %v-%v: %v", r.start, r.stop, err)
			}
			log := srv.requests()
			if len(log) != r.want {
				t.Fatalf("index at start %v: region %v-%v made %d requests, want %d: %q", start, r.start, r.stop, len(log), r.want, log)
			}
			for _, l := range log {
				if !strings.Contains(l, "bytes=") {
					t.Fatalf("request without a range: %q", l)
				}
			}
		}
	}
}

// TestRemoteWholeShards reads sharded arrays over HTTP, the index at the
// start or the end, inner chunks compressed or not, and checks that a
// read wanting all of a shard asks for it whole (one GET of bytes 0 to
// its end, the index with them: a server may send a whole object from
// its file where a part takes it a copy) while a read of part of a shard
// asks for its inner chunks only; that the bytes read are the array's;
// and that a shard whose size changed after its index was read fails the
// read with ErrCorruptChunk.
func TestRemoteWholeShards(t *testing.T) {
	gzip := Codec{Name: "gzip", Configuration: map[string]any{"level": 1}}
	for _, start := range []bool{false, true} {
		for _, inner := range [][]Codec{{{Name: "bytes"}}, {{Name: "bytes"}, gzip}} {
			name := fmt.Sprintf("index at start %v, %d inner codecs", start, len(inner))
			// Shards of 384 KiB: half of one, even compressed, leaves more
			// than spanGap.
			m := Metadata{Shape: []int{1024, 384}, ChunkShape: []int{512, 192}, Codecs: shardCodecs([]int{256, 96}, start, inner)}
			srv, a, data := servedArray(t, m)
			whole := func(key string) string {
				b, _ := srv.file(key)
				return fmt.Sprintf("%s bytes=0-%d", key, len(b)-1)
			}
			srv.requests()
			got := make([]byte, len(data))
			if err := a.ReadRegion(bg, []int{0, 0}, m.Shape, got); err != nil || !bytes.Equal(got, data) {
				t.Fatalf("%s: whole array: %v, or its bytes differ", name, err)
			}
			log := srv.requests()
			for _, key := range []string{"c/0/0", "c/0/1", "c/1/0", "c/1/1"} {
				if !slices.Contains(log, whole(key)) {
					t.Errorf("%s: shard %s not read whole: %q", name, key, log)
				}
			}
			if len(log) != 8 {
				t.Errorf("%s: %d requests for 4 shards, want 8 (index, shard): %q", name, len(log), log)
			}
			ref := model{shape: m.Shape, es: 4, buf: data}
			half := []int{256, 192}
			part := make([]byte, len(ref.region([]int{0, 0}, half)))
			if err := a.ReadRegion(bg, []int{0, 0}, half, part); err != nil || !bytes.Equal(part, ref.region([]int{0, 0}, half)) {
				t.Fatalf("%s: half a shard: %v, or its bytes differ", name, err)
			}
			if log := srv.requests(); len(log) != 2 || slices.Contains(log, whole("c/0/0")) {
				t.Errorf("%s: half a shard: requests %q, want the index and one range of inner chunks", name, log)
			}
			// The shard grows between its index's read and its own.
			grown := whole("c/1/1")
			srv.setFault(func(key string, w http.ResponseWriter, r *http.Request) bool {
				if key+" "+r.Header.Get("Range") != grown {
					return false
				}
				b, _ := srv.file(key)
				http.ServeContent(w, r, key, time.Time{}, bytes.NewReader(append(slices.Clip(b), 0)))
				return true
			})
			if err := a.ReadRegion(bg, []int{0, 0}, m.Shape, got); !errors.Is(err, ErrCorruptChunk) {
				t.Errorf("%s: a shard changed during the read: %v, want ErrCorruptChunk", name, err)
			}
			srv.setFault(nil)
		}
	}
}

// TestRemoteCancel cancels a region read while chunk GETs hang and
// checks that it returns at once with the context's error, that no more
// than MaxRequests GETs were in flight, that every request in flight saw
// its context end, and that no goroutine is left.
func TestRemoteCancel(t *testing.T) {
	defer goleak.VerifyNone(t, goleak.IgnoreCurrent())
	dir, _ := localArray(t, Metadata{Shape: []int{64, 16}, ChunkShape: []int{2, 16}})
	srv := serveDir(t, dir)
	var inflight, most, ended atomic.Int32
	started := make(chan struct{}, 64)
	srv.setFault(func(key string, w http.ResponseWriter, r *http.Request) bool {
		if !strings.HasPrefix(key, "c/") {
			return false
		}
		n := inflight.Add(1)
		for m := most.Load(); n > m && !most.CompareAndSwap(m, n); m = most.Load() {
		}
		started <- struct{}{}
		<-r.Context().Done() // hang until the client gives up
		inflight.Add(-1)
		ended.Add(1)
		return true
	})
	s, err := OpenURL(bg, srv.URL, WithMaxRequests(4))
	if err != nil {
		t.Fatal(err)
	}
	a, err := Open(bg, s, "")
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(bg)
	done := make(chan error, 1)
	go func() { done <- a.ReadRegion(ctx, []int{0, 0}, a.Shape(), make([]byte, 64*16*4)) }()
	for range 4 {
		<-started
	}
	time.Sleep(50 * time.Millisecond) // a fifth request would start now
	cancel()
	waitCanceled(t, done)
	if most.Load() != 4 {
		t.Fatalf("%d requests in flight at most, want the bound, 4", most.Load())
	}
	for deadline := time.Now().Add(5 * time.Second); inflight.Load() > 0; time.Sleep(time.Millisecond) {
		if time.Now().After(deadline) {
			t.Fatalf("%d requests still in flight on the server", inflight.Load())
		}
	}
	s.Close()
	srv.Close()
}

// waitCanceled waits for the error of a read whose context was
// cancelled, which must be that context's, for at most five seconds.
func waitCanceled(t *testing.T, done <-chan error) {
	t.Helper()
	select {
	case err := <-done:
		if !errors.Is(err, context.Canceled) {
			t.Fatalf("cancelled read: %v", err)
		}
	case <-time.After(5 * time.Second):
		t.Fatal("the read did not return after cancel")
	}
}

// TestRemoteConsolidated opens arrays of stores with consolidated
// metadata (zarr-python's .zmetadata for v2, consolidated_metadata in the
// root zarr.json for v3) over HTTP and checks that opening the store
// reads those two documents and opening the arrays reads nothing more.
func TestRemoteConsolidated(t *testing.T) {
	dir := t.TempDir()
	s, _ := NewDirStore(dir)
	data := randValues(rand.New(rand.NewPCG(1, 1)), DataType{Kind: Int, Size: 2}, 6*7)
	for _, p := range []string{"v2/a", "v2/g/b"} {
		a, err := Create(bg, s, p, Metadata{ZarrFormat: 2, Shape: []int{6, 7}, ChunkShape: []int{4, 4}, DataType: DataType{Kind: Int, Size: 2}, Attributes: map[string]any{"name": p}})
		if err != nil {
			t.Fatal(err)
		}
		if err := a.WriteRegion(bg, []int{0, 0}, []int{6, 7}, data); err != nil {
			t.Fatal(err)
		}
	}
	a3, err := Create(bg, s, "v3/g/c", Metadata{Shape: []int{6, 7}, ChunkShape: []int{4, 4}, DataType: DataType{Kind: Int, Size: 2}})
	if err != nil {
		t.Fatal(err)
	}
	if err := a3.WriteRegion(bg, []int{0, 0}, []int{6, 7}, data); err != nil {
		t.Fatal(err)
	}
	doc := func(key string) json.RawMessage { b, _ := s.Get(bg, key, nil); return b }
	zmeta, _ := json.Marshal(map[string]any{"zarr_consolidated_format": 1, "metadata": map[string]any{
		".zgroup": map[string]any{"zarr_format": 2}, "a/.zarray": doc("v2/a/.zarray"), "a/.zattrs": doc("v2/a/.zattrs"),
		"g/.zgroup": map[string]any{"zarr_format": 2}, "g/b/.zarray": doc("v2/g/b/.zarray"), "g/b/.zattrs": doc("v2/g/b/.zattrs"),
	}})
	s.Set(bg, "v2/.zmetadata", zmeta)
	root, _ := json.Marshal(map[string]any{"zarr_format": 3, "node_type": "group", "attributes": map[string]any{},
		"consolidated_metadata": map[string]any{"kind": "inline", "must_understand": false, "metadata": map[string]any{
			"g": map[string]any{"zarr_format": 3, "node_type": "group", "attributes": map[string]any{}}, "g/c": doc("v3/g/c/zarr.json"),
		}}})
	s.Set(bg, "v3/zarr.json", root)
	srv := serveDir(t, dir)
	for _, c := range []struct{ root, array string }{{"v2", "a"}, {"v2", "g/b"}, {"v3", "g/c"}} {
		srv.requests()
		rs, err := OpenURL(bg, srv.URL+"/"+c.root)
		if err != nil {
			t.Fatal(err)
		}
		if log := srv.requests(); len(log) != 2 || !rs.Consolidated() {
			t.Fatalf("opening %s: %q, consolidated %v", c.root, log, rs.Consolidated())
		}
		a, err := Open(bg, rs, c.array)
		if err != nil {
			t.Fatal(err)
		}
		paths, err := ArrayPaths(bg, rs)
		if log := srv.requests(); len(log) != 0 || err != nil {
			t.Fatalf("opening %s/%s and listing arrays made requests: %q (%v)", c.root, c.array, log, err)
		}
		if want := map[string][]string{"v2": {"a", "g/b"}, "v3": {"g/c"}}[c.root]; !slices.Equal(paths, want) {
			t.Fatalf("%s arrays %q, want %q", c.root, paths, want)
		}
		if c.root == "v2" && a.Metadata().Attributes["name"] != c.root+"/"+c.array {
			t.Fatalf("%s attributes %v", c.array, a.Metadata().Attributes)
		}
		got := make([]byte, len(data))
		if err := a.ReadRegion(bg, []int{0, 0}, []int{6, 7}, got); err != nil || !bytes.Equal(got, data) {
			t.Fatalf("%s/%s: %v", c.root, c.array, err)
		}
		rs.Close()
	}
	// A store without consolidated metadata opens arrays by their own
	// documents.
	rs, err := OpenURL(bg, srv.URL+"/v2/g")
	if err != nil || rs.Consolidated() {
		t.Fatalf("%v, consolidated %v", err, rs.Consolidated())
	}
	defer rs.Close()
	if _, err := Open(bg, rs, "b"); err != nil {
		t.Fatal(err)
	}
	// A broken .zmetadata is an error, not an empty store.
	srv.setFile("v2/.zmetadata", []byte("{"))
	if _, err := OpenURL(bg, srv.URL+"/v2"); !errors.Is(err, ErrInvalidMetadata) {
		t.Fatalf("broken .zmetadata: %v", err)
	}
	srv.setFault(func(key string, w http.ResponseWriter, r *http.Request) bool {
		http.Error(w, "AccessDenied", http.StatusForbidden)
		return true
	})
	// The probes for consolidated metadata read a 403 as absent (public
	// buckets answer so for missing keys); the array's own zarr.json,
	// which Open needs, keeps it.
	rv3, err := OpenURL(bg, srv.URL+"/v3")
	if err != nil || rv3.Consolidated() {
		t.Fatalf("probes refused: %v, consolidated %v", err, rv3.Consolidated())
	}
	defer rv3.Close()
	if _, err := Open(bg, rv3, ""); !errors.Is(err, fs.ErrPermission) {
		t.Fatalf("refused zarr.json: %v", err)
	}
}
