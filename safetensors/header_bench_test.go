package safetensors

import (
	"context"
	"encoding/binary"
	"encoding/json"
	"fmt"
	"net/http"
	"net/http/httptest"
	"strconv"
	"sync/atomic"
	"testing"
	"time"
)

// benchHeader is the JSON header of a checkpoint of n bf16 tensors of a
// few shapes, laid out back to back, as a loader meets it.
func benchHeader(n int) ([]byte, int64) {
	m := map[string]any{"__metadata__": map[string]string{"format": "pt"}}
	var off int64
	for i := range n {
		shape := []int64{4096, int64(1024 + 64*(i%7))}
		size := shape[0] * shape[1] * 2
		m[fmt.Sprintf("model.layers.%d.mlp.down_proj.weight%d", i/9, i)] = map[string]any{"dtype": "BF16", "shape": shape, "data_offsets": []int64{off, off + size}}
		off += size
	}
	b, _ := json.Marshal(m)
	return b, off
}

// BenchmarkParseHeader parses the header of a 570-tensor checkpoint (a
// 7B model's count), which every load of the file does before its reads.
func BenchmarkParseHeader(b *testing.B) {
	h, size := benchHeader(570)
	b.SetBytes(int64(len(h)))
	for b.Loop() {
		if _, err := ParseHeader(h, size); err != nil {
			b.Fatal(err)
		}
	}
}

// BenchmarkURLHeader opens a checkpoint by URL and reads its header
// (ReadHeader: open, header, close), the first step of every load from a
// server, against an HTTP server that answers each request after a 2 ms
// delay, a nearby object store's round trip. The object is the
// 570-tensor header followed by a data area that is never read.
func BenchmarkURLHeader(b *testing.B) {
	h, size := benchHeader(570)
	head := binary.LittleEndian.AppendUint64(nil, uint64(len(h)))
	head = append(head, h...)
	total := int64(len(head)) + size
	var requests atomic.Int64
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		requests.Add(1)
		time.Sleep(2 * time.Millisecond)
		w.Header().Set("ETag", `"v1"`)
		if r.Method == http.MethodHead {
			w.Header().Set("Content-Length", strconv.FormatInt(total, 10))
			return
		}
		var first, last int64
		if _, err := fmt.Sscanf(r.Header.Get("Range"), "bytes=%d-%d", &first, &last); err != nil || first >= total {
			http.Error(w, "bad range", http.StatusRequestedRangeNotSatisfiable)
			return
		}
		last = min(last, total-1)
		body := make([]byte, last-first+1) // zeros past the header
		if first < int64(len(head)) {
			copy(body, head[first:])
		}
		w.Header().Set("Content-Range", fmt.Sprintf("bytes %d-%d/%d", first, last, total))
		w.Header().Set("Content-Length", strconv.Itoa(len(body)))
		w.WriteHeader(http.StatusPartialContent)
		w.Write(body)
	}))
	defer srv.Close()
	ctx := context.Background()
	for b.Loop() {
		if _, err := ReadHeader(ctx, srv.URL+"/m.safetensors", nil); err != nil {
			b.Fatal(err)
		}
	}
	b.ReportMetric(float64(requests.Load())/float64(b.N), "requests/op")
}
