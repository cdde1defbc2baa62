package safetensors

import (
	"bytes"
	"context"
	"encoding/binary"
	"errors"
	"fmt"
	"math/rand/v2"
	"net"
	"net/http"
	"net/http/httptest"
	"path/filepath"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/kvikgo/kvik"
	"github.com/kvikgo/kvik/internal/testkit/httpfault"
)

// shardFile returns a one-tensor safetensors file holding data as U8.
func shardFile(name string, data []byte) []byte {
	hdr := fmt.Sprintf(`{%q:{"dtype":"U8","shape":[%d],"data_offsets":[0,%d]}}`, name, len(data), len(data))
	for len(hdr)%8 != 0 {
		hdr += " "
	}
	var b bytes.Buffer
	binary.Write(&b, binary.LittleEndian, uint64(len(hdr)))
	b.WriteString(hdr)
	b.Write(data)
	return b.Bytes()
}

// connCounter counts a server's open connections and their peak.
type connCounter struct {
	mu               sync.Mutex
	open, peak, seen int
}

func (c *connCounter) state(_ net.Conn, s http.ConnState) {
	c.mu.Lock()
	defer c.mu.Unlock()
	switch s {
	case http.StateNew:
		c.open++
		c.seen++
		c.peak = max(c.peak, c.open)
	case http.StateClosed, http.StateHijacked:
		c.open--
	}
}

// TestLoadIndexSharesConnections loads an index of many shards over
// HTTP: the shards share connections under the request cap instead of
// each keeping its own (issue 28, finding 7: 2,000 shards made 1,963
// simultaneous connections).
func TestLoadIndexSharesConnections(t *testing.T) {
	const shards, limit = 64, 4
	restore, err := kvik.UpdateDefaults(func(d *kvik.Defaults) { d.RemoteMaxRequests = limit })
	if err != nil {
		t.Fatal(err)
	}
	defer restore()
	objects := map[string][]byte{}
	want := map[string][]byte{}
	var wm []string
	for i := range shards {
		name, file := fmt.Sprintf("w%d", i), fmt.Sprintf("s%03d.safetensors", i)
		data := make([]byte, 16+i)
		for j := range data {
			data[j] = byte(i*31 + j*7 + 1)
		}
		want[name] = data
		objects["/m/"+file] = shardFile(name, data)
		wm = append(wm, fmt.Sprintf("%q:%q", name, file))
	}
	objects["/m/model.safetensors.index.json"] = []byte(`{"metadata":{},"weight_map":{` + strings.Join(wm, ",") + `}}`)
	var cc connCounter
	srv := httptest.NewUnstartedServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		b, ok := objects[r.URL.Path]
		if !ok {
			http.NotFound(w, r)
			return
		}
		http.ServeContent(w, r, "", time.Time{}, bytes.NewReader(b))
	}))
	srv.Config.ConnState = cc.state
	srv.Start()
	defer srv.Close()
	m, err := LoadIndexHost(context.Background(), srv.URL+"/m/model.safetensors.index.json", nil)
	if err != nil {
		t.Fatal(err)
	}
	defer m.Close()
	for name, data := range want {
		if tt := m.Tensor(name); tt == nil || !bytes.Equal(tt.Data, data) {
			t.Fatalf("tensor %s differs", name)
		}
	}
	cc.mu.Lock()
	defer cc.mu.Unlock()
	t.Logf("peak %d connections, %d in all", cc.peak, cc.seen)
	// The cap, and a few for connections closed while others open.
	if cc.peak > 2*limit {
		t.Errorf("%d shards under a cap of %d requests: %d connections at once (%d in all)", shards, limit, cc.peak, cc.seen)
	}
}

// TestS3IndexEscapesRefused checks that an s3:// index naming a shard
// that leaves its directory once percent-decoded fails before any shard
// request (issue 28, finding 1: the old code sent GET
// .../models/../../private/secret.safetensors).
func TestS3IndexEscapesRefused(t *testing.T) {
	for _, file := range []string{"%2e%2e/%2e%2e/private/secret.safetensors", "sub/%2E%2E/%2e%2e/x.safetensors", "%2e%2e%2fx.safetensors"} {
		ix := []byte(`{"metadata":{},"weight_map":{"w":"` + file + `"}}`)
		srv := httpfault.New(t, map[string][]byte{"/bkt/models/model.index.json": ix}, nil)
		_, err := LoadIndexHost(context.Background(), "s3://bkt/models/model.index.json", nil,
			kvik.WithS3Credentials("AKIDTESTKEY", "TESTSECRETKEY", ""), kvik.WithS3Region("us-east-1"), kvik.WithS3Endpoint(srv.URL))
		if !errors.Is(err, ErrInvalidIndex) {
			t.Errorf("index naming %q: %v, want ErrInvalidIndex", file, err)
		}
		if n := srv.GETs.Load(); n != 1 {
			t.Errorf("index naming %q: %d GETs, want the index's alone", file, n)
		}
	}
}

// TestLoadIndexFailedShardCancelsOthers: an index of three shards on an
// HTTP server that refuses one shard (403) and holds another's reads until
// their request is cancelled. The load fails with the refusal, promptly:
// the first failing shard cancels the others instead of waiting for them
// (before, LoadIndexHost waited for every shard, here until the test's
// bound).
func TestLoadIndexFailedShardCancelsOthers(t *testing.T) {
	rng := rand.New(rand.NewPCG(29, 3))
	dir := t.TempDir()
	var ts []SaveTensor
	for i := range 3 {
		b := make([]byte, 1<<20+int(rng.IntN(4096)))
		for j := range b {
			b[j] = byte(rng.Uint32())
		}
		ts = append(ts, SaveTensor{Name: fmt.Sprintf("w%d", i), Dtype: U8, Shape: []int64{int64(len(b))}, Data: b})
	}
	index, err := SaveSharded(context.Background(), dir, ts, nil, &ShardOptions{MaxShardSize: 1 << 20})
	if err != nil {
		t.Fatal(err)
	}
	files := http.FileServer(http.Dir(dir))
	var held atomic.Int32
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		switch {
		case strings.Contains(r.URL.Path, "00002-of") && r.Header.Get("Range") != "":
			// Refuse only once shard 3's data read is held, so that the
			// refusal finds it in flight.
			for i := 0; held.Load() == 0 && i < 1000; i++ {
				time.Sleep(10 * time.Millisecond)
			}
			http.Error(w, "AccessDenied", http.StatusForbidden)
		case strings.Contains(r.URL.Path, "00003-of") && r.Header.Get("Range") != "" && !strings.HasPrefix(r.Header.Get("Range"), "bytes=0-"):
			held.Add(1)
			<-r.Context().Done() // a stalled server: held until the client gives up
		default:
			files.ServeHTTP(w, r)
		}
	}))
	defer srv.Close()
	start := time.Now()
	done := make(chan error, 1)
	go func() {
		m, err := LoadIndexHost(context.Background(), srv.URL+"/"+filepath.Base(index), nil)
		if m != nil {
			m.Close()
		}
		done <- err
	}()
	select {
	case err := <-done:
		if err == nil || !strings.Contains(err.Error(), "403") {
			t.Fatalf("LoadIndexHost with a refused shard: %v, want the 403", err)
		}
		t.Logf("failed after %v (%d held reads cancelled): %v", time.Since(start).Round(time.Millisecond), held.Load(), err)
	case <-time.After(20 * time.Second):
		t.Fatal("LoadIndexHost still waiting for a stalled shard 20 s after another shard failed")
	}
}
