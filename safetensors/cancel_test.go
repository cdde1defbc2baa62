package safetensors

import (
	"bytes"
	"context"
	"errors"
	"math/rand/v2"
	"net/http"
	"os"
	"path/filepath"
	"runtime"
	"strings"
	"testing"

	"go.uber.org/goleak"

	"github.com/kvikgo/kvik"
	"github.com/kvikgo/kvik/internal/gputest"
	"github.com/kvikgo/kvik/internal/s3test"
)

// bigTensors makes n tensors of size bytes each, of random bytes.
func bigTensors(rng *rand.Rand, n, size int) []SaveTensor {
	ts := make([]SaveTensor, n)
	for i := range ts {
		b := make([]byte, size)
		for j := range b {
			b[j] = byte(rng.Uint32())
		}
		ts[i] = SaveTensor{Name: "t" + string(rune('a'+i)), Dtype: U8, Shape: []int64{int64(size)}, Data: b}
	}
	return ts
}

// heapInUse returns the bytes of live heap objects after a collection.
func heapInUse() int64 {
	runtime.GC()
	var ms runtime.MemStats
	runtime.ReadMemStats(&ms)
	return int64(ms.HeapAlloc)
}

// checkNoLeaks fails the test if goroutines started from now on are left
// when it ends.
func checkNoLeaks(t *testing.T) {
	ignore := goleak.IgnoreCurrent()
	t.Cleanup(func() { goleak.VerifyNone(t, ignore) })
}

// TestCancelS3 cancels a load from S3 (into host memory, into device
// memory where there is a GPU, and the header-only read) and a save to S3 (a multipart upload, over an object that
// exists) while one of their requests is in flight. Each returns
// context.Canceled at once and leaves no goroutine behind; the load keeps
// no buffer (a device load no device memory); the save leaves the old object as it was and no multipart
// upload in progress.
func TestCancelS3(t *testing.T) {
	v := s3test.Start(t)
	checkNoLeaks(t)
	restore, err := kvik.UpdateDefaults(func(d *kvik.Defaults) { d.TaskSize = 5 << 20 })
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(restore)
	ts := bigTensors(rand.New(rand.NewPCG(26, 1)), 6, 4<<20+99)
	path := filepath.Join(t.TempDir(), "m.safetensors")
	if err := Save(context.Background(), path, ts, nil); err != nil {
		t.Fatal(err)
	}
	file, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	url := v.Put(t, "in/m.safetensors", file)

	// The load: the header comes, the GETs from a quarter of the file
	// on are held.
	holdData := func() *s3test.Proxy {
		return v.HoldProxy(t, func(r *http.Request) bool {
			return r.Method == http.MethodGet && s3test.RangeStart(r) >= int64(len(file)/4)
		})
	}
	p := holdData()
	before := heapInUse()
	err = p.CancelWhenHeld(t, func(ctx context.Context) error {
		m, err := LoadHost(ctx, url, nil, p.Opts()...)
		if err == nil {
			m.Close()
		}
		return err
	})
	if !errors.Is(err, context.Canceled) {
		t.Fatalf("cancelled load: %v, want context.Canceled", err)
	}
	if grown := heapInUse() - before; grown > int64(len(file)/2) {
		t.Errorf("the heap holds %d more bytes after a cancelled load of %d", grown, len(file))
	}
	if gputest.Count() > 0 {
		// Into device memory: the memory it took is freed.
		free := gputest.FreeMemory(t, 0)
		p := holdData()
		err = p.CancelWhenHeld(t, func(ctx context.Context) error {
			m, err := Load(ctx, url, nil, p.Opts()...)
			if err == nil {
				m.Close()
			}
			return err
		})
		if !errors.Is(err, context.Canceled) {
			t.Fatalf("cancelled device load: %v, want context.Canceled", err)
		}
		if lost := free - gputest.FreeMemory(t, 0); lost > int64(len(file)/2) {
			t.Errorf("device 0 has %d bytes less free memory after a cancelled load of %d", lost, len(file))
		}
	}

	// The header alone: its first GET is held.
	p = v.HoldProxy(t, func(r *http.Request) bool { return r.Method == http.MethodGet && s3test.RangeStart(r) == 0 })
	err = p.CancelWhenHeld(t, func(ctx context.Context) error {
		_, err := ReadHeader(ctx, url, nil, p.Opts()...)
		return err
	})
	if !errors.Is(err, context.Canceled) {
		t.Fatalf("cancelled header read: %v, want context.Canceled", err)
	}

	// The save: the second part's PUT is held.
	old := []byte("the old object")
	out := v.Put(t, "out/m.safetensors", old)
	p = v.HoldProxy(t, func(r *http.Request) bool {
		return r.Method == http.MethodPut && r.URL.Query().Get("partNumber") == "2"
	})
	err = p.CancelWhenHeld(t, func(ctx context.Context) error { return Save(ctx, out, ts, nil, p.Opts()...) })
	if !errors.Is(err, context.Canceled) {
		t.Fatalf("cancelled save: %v, want context.Canceled", err)
	}
	if got, ok := v.Object("out/m.safetensors"); !ok || !bytes.Equal(got, old) {
		t.Errorf("a cancelled save changed the object: %q (present %v)", got, ok)
	}
	if ups := v.Uploads(t); strings.Contains(ups, "out/m.safetensors") {
		t.Errorf("a cancelled save left an upload in progress: %s", ups)
	}
}

// TestCancelLocal cancels a load from a local file midway (its reads
// after the header are held) and loads and saves whose context is
// cancelled before they start: each returns context.Canceled, a save
// leaves the old file as it was and no temporary file.
func TestCancelLocal(t *testing.T) {
	checkNoLeaks(t)
	ts := bigTensors(rand.New(rand.NewPCG(26, 2)), 3, 1<<20+7)
	dir := t.TempDir()
	path := filepath.Join(dir, "m.safetensors")
	if err := Save(context.Background(), path, ts, nil); err != nil {
		t.Fatal(err)
	}
	old, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	f, err := kvik.Open(path, "r", 0)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	for _, host := range []bool{true, false} {
		if !host && gputest.Count() == 0 {
			continue // TestCancelLocalDevice
		}
		r := s3test.NewHoldReader(f, 8) // every read of tensor data
		err := r.CancelWhenHeld(t, func(ctx context.Context) error {
			load := LoadReader
			if host {
				load = LoadHostReader
			}
			m, err := load(ctx, r, nil)
			if err == nil {
				m.Close()
			}
			return err
		})
		if !errors.Is(err, context.Canceled) {
			t.Fatalf("cancelled load (host %v): %v, want context.Canceled", host, err)
		}
	}

	ctx, cancel := context.WithCancel(context.Background())
	cancel()
	if _, err := LoadHost(ctx, path, nil); !errors.Is(err, context.Canceled) {
		t.Errorf("LoadHost with a cancelled context: %v", err)
	}
	if _, err := Load(ctx, path, nil); !errors.Is(err, context.Canceled) {
		t.Errorf("Load with a cancelled context: %v", err)
	}
	if _, err := ReadHeader(ctx, path, nil); !errors.Is(err, context.Canceled) {
		t.Errorf("ReadHeader with a cancelled context: %v", err)
	}
	if err := Save(ctx, path, bigTensors(rand.New(rand.NewPCG(26, 3)), 2, 4<<20), nil); !errors.Is(err, context.Canceled) {
		t.Errorf("Save with a cancelled context: %v", err)
	}
	if got, err := os.ReadFile(path); err != nil || !bytes.Equal(got, old) {
		t.Errorf("a cancelled save changed the file (%v)", err)
	}
	if ents, _ := os.ReadDir(dir); len(ents) != 1 {
		t.Errorf("a cancelled save left %d files, want 1", len(ents))
	}
}
