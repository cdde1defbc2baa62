package kvik_test

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"hash/crc32"
	"io"
	"io/fs"
	"math/rand/v2"
	"net/http"
	"os"
	"path/filepath"
	"runtime"
	"strings"
	"sync"
	"testing"

	"github.com/kvikgo/kvik"
	"github.com/kvikgo/kvik/cuda"
	"github.com/kvikgo/kvik/internal/testkit/s3test"
)

var castagnoli = crc32.MakeTable(crc32.Castagnoli)

// failFirst is a FaultProxy rule that fails the first attempt of each
// part (or PUT) that pick selects with status, and counts the faults.
type failFirst struct {
	mu     sync.Mutex
	seen   map[string]bool
	status int
	pick   func(*http.Request) bool
	faults int
}

func (f *failFirst) rule(r *http.Request) int {
	if r.Method != http.MethodPut || !f.pick(r) {
		return 0
	}
	f.mu.Lock()
	defer f.mu.Unlock()
	k := r.URL.Path + "?" + r.URL.Query().Get("partNumber")
	if f.seen[k] {
		return 0
	}
	if f.seen == nil {
		f.seen = map[string]bool{}
	}
	f.seen[k] = true
	f.faults++
	return f.status
}

// TestUploadCRC32C uploads random, unaligned sizes (one PUT and
// multipart) with WithUploadCRC32C, through a proxy that fails the first
// attempt of some parts midway through their bodies (a 503 or a dropped
// connection): the object must be the bytes, and the checksum reported
// that of the bytes, not of the failed attempts' halves.
func TestUploadCRC32C(t *testing.T) {
	v := s3test.Start(t)
	smallTasks(t, 5<<20)
	rng := rand.New(rand.NewPCG(41, 7))
	for _, status := range []int{http.StatusServiceUnavailable, s3test.Reset} {
		ff := &failFirst{status: status, pick: func(r *http.Request) bool {
			n := r.URL.Query().Get("partNumber")
			return n == "" || n == "2" || n == "4"
		}}
		p := v.FaultProxy(t, ff.rule)
		for _, size := range []int{0, 1 + rng.IntN(4096), 5<<20 - 1 - rng.IntN(1000), 5 << 20, 21<<20 + rng.IntN(1<<20)} {
			want := randomBytes(rng, size)
			key := fmt.Sprintf("crc/%d-%d.bin", status, size)
			var sum uint32 = 0xdeadbeef
			if err := kvik.UploadS3(context.Background(), v.URLOf(key), want, append(p.Opts(), kvik.WithUploadCRC32C(&sum))...); err != nil {
				t.Fatalf("%d bytes, fault %d: %v", size, status, err)
			}
			if got, ok := v.Object(key); !ok || !bytes.Equal(got, want) {
				t.Fatalf("%d bytes, fault %d: stored %d bytes or different ones", size, status, len(got))
			}
			if w := crc32.Checksum(want, castagnoli); sum != w {
				t.Fatalf("%d bytes, fault %d: CRC-32C sent %08x, want %08x", size, status, sum, w)
			}
		}
		if ff.faults < 3 {
			t.Fatalf("fault %d: only %d faults injected", status, ff.faults)
		}
	}
}

// TestSaveFileS3CRC32C saves host pieces of random sizes to S3 with
// WithUploadCRC32C: parts that cross pieces checksum in order.
func TestSaveFileS3CRC32C(t *testing.T) {
	v := s3test.Start(t)
	smallTasks(t, 5<<20)
	rng := rand.New(rand.NewPCG(43, 7))
	var ps []kvik.Piece
	var want []byte
	for range 7 {
		b := randomBytes(rng, rng.IntN(4<<20))
		ps, want = append(ps, kvik.Piece{Data: b}), append(want, b...)
	}
	var sum uint32
	if err := kvik.SaveFile(context.Background(), v.URLOf("pieces.bin"), ps, append(v.Opts(), kvik.WithUploadCRC32C(&sum))...); err != nil {
		t.Fatal(err)
	}
	if got, _ := v.Object("pieces.bin"); !bytes.Equal(got, want) || sum != crc32.Checksum(want, castagnoli) {
		t.Fatalf("stored %d of %d bytes; CRC-32C %08x, want %08x", len(got), len(want), sum, crc32.Checksum(want, castagnoli))
	}
}

// TestRemoteDeviceUploadStaged uploads device memory in parts that span
// several staging chunks (the part is copied chunk by chunk while the
// previous chunk is sent), through a proxy that fails the first attempt
// of some parts midway (the device range is staged again), from device
// offsets that are not aligned, and checks the object and the checksum
// sent. SaveFile of device and host pieces to S3 checks the same with a
// part that mixes both. Needs a GPU.
func TestRemoteDeviceUploadStaged(t *testing.T) {
	cctx := needGPU(t)
	v := s3test.Start(t)
	smallTasks(t, 5<<20)
	// Small bounce buffers: each part takes several chunks.
	restore, err := kvik.UpdateDefaults(func(d *kvik.Defaults) { d.BounceBufferSize = 1 << 20 })
	if err != nil {
		t.Fatal(err)
	}
	defer restore()
	rng := rand.New(rand.NewPCG(47, 3))
	for _, status := range []int{http.StatusServiceUnavailable, s3test.Reset} {
		ff := &failFirst{status: status, pick: func(r *http.Request) bool {
			n := r.URL.Query().Get("partNumber")
			return n == "" || n == "1" || n == "3"
		}}
		p := v.FaultProxy(t, ff.rule)
		for _, size := range []int{1 + rng.IntN(4096), 3<<20 + rng.IntN(1<<20), 17<<20 + rng.IntN(1<<20)} {
			want := randomBytes(rng, size)
			devOff := 1 + rng.IntN(4095)
			d := devAlloc(t, cctx, size+devOff)
			toDevice(t, cctx, d.Ptr()+cuda.DevicePtr(devOff), want)
			key := fmt.Sprintf("devstaged/%d-%d.bin", status, size)
			var sum uint32
			if err := kvik.UploadS3Device(context.Background(), v.URLOf(key), d.Ptr(), size, int64(devOff), append(p.Opts(), kvik.WithUploadCRC32C(&sum))...); err != nil {
				t.Fatalf("%d device bytes, fault %d: %v", size, status, err)
			}
			if got, ok := v.Object(key); !ok || !bytes.Equal(got, want) {
				t.Fatalf("%d device bytes, fault %d: stored %d bytes or different ones", size, status, len(got))
			}
			if w := crc32.Checksum(want, castagnoli); sum != w {
				t.Fatalf("%d device bytes: CRC-32C sent %08x, want %08x", size, sum, w)
			}
			d.Close()
			noStagingGoroutines(t)
		}
		if ff.faults < 2 {
			t.Fatalf("fault %d: only %d faults injected", status, ff.faults)
		}
	}
	// Pieces alternating host and device memory, parts crossing them.
	var ps []kvik.Piece
	var want []byte
	for i := range 6 {
		b := randomBytes(rng, 1+rng.IntN(4<<20))
		want = append(want, b...)
		if i%2 == 0 {
			ps = append(ps, kvik.Piece{Data: b})
			continue
		}
		d := devAlloc(t, cctx, len(b)+64)
		toDevice(t, cctx, d.Ptr()+7, b)
		ps = append(ps, kvik.Piece{Ptr: d.Ptr() + 7, Size: int64(len(b))})
	}
	var sum uint32
	if err := kvik.SaveFile(context.Background(), v.URLOf("devmixed.bin"), ps, append(v.Opts(), kvik.WithUploadCRC32C(&sum))...); err != nil {
		t.Fatal(err)
	}
	if got, _ := v.Object("devmixed.bin"); !bytes.Equal(got, want) || sum != crc32.Checksum(want, castagnoli) {
		t.Fatalf("mixed pieces: stored %d of %d bytes or different ones; CRC-32C %08x", len(got), len(want), sum)
	}
}

// TestRemoteDeviceUploadAbortNoLeak fails one part of a device upload
// for good: the upload is aborted, no staging goroutine outlives it (each
// returns its pinned buffer before its request ends), and nothing is
// left on the server.
func TestRemoteDeviceUploadAbortNoLeak(t *testing.T) {
	cctx := needGPU(t)
	v := s3test.Start(t)
	smallTasks(t, 5<<20)
	p := v.FaultProxy(t, func(r *http.Request) int {
		if r.Method == http.MethodPut && r.URL.Query().Get("partNumber") == "2" {
			return http.StatusBadRequest
		}
		return 0
	})
	size := 16<<20 + 3
	want := randomBytes(rand.New(rand.NewPCG(53, 1)), size)
	d := devAlloc(t, cctx, size)
	toDevice(t, cctx, d.Ptr(), want)
	err := kvik.UploadS3Device(context.Background(), v.URLOf("devfail.bin"), d.Ptr(), size, 0, p.Opts()...)
	var se *kvik.HTTPStatusError
	if !errors.As(err, &se) || se.Code != http.StatusBadRequest {
		t.Fatalf("device upload with a failing part: %v", err)
	}
	if _, ok := v.Object("devfail.bin"); ok {
		t.Fatal("a partial object was left")
	}
	noStagingGoroutines(t)
}

// noStagingGoroutines fails the test if a device upload body's staging
// goroutine is still running.
func noStagingGoroutines(t *testing.T) {
	t.Helper()
	buf := make([]byte, 1<<20)
	buf = buf[:runtime.Stack(buf, true)]
	if bytes.Contains(buf, []byte("staging.(*PipeBody)")) {
		t.Fatalf("a staging goroutine outlived its upload:\n%s", buf)
	}
}

// TestUploadFileS3 uploads files of random, unaligned sizes from their
// path (parts read from the file as they are sent) with the checksum of
// the bytes sent, and checks the object and the checksum.
func TestUploadFileS3(t *testing.T) {
	v := s3test.Start(t)
	smallTasks(t, 5<<20)
	rng := rand.New(rand.NewPCG(59, 7))
	for _, size := range []int{0, 1 + rng.IntN(4096), 5 << 20, 16<<20 + rng.IntN(1<<20)} {
		want := randomBytes(rng, size)
		path := filepath.Join(t.TempDir(), "src.bin")
		if err := os.WriteFile(path, want, 0o644); err != nil {
			t.Fatal(err)
		}
		key := fmt.Sprintf("file/%d.bin", size)
		var sum uint32
		if err := kvik.UploadFileS3(context.Background(), v.URLOf(key), path, append(v.Opts(), kvik.WithUploadCRC32C(&sum))...); err != nil {
			t.Fatal(err)
		}
		if got, ok := v.Object(key); !ok || !bytes.Equal(got, want) || sum != crc32.Checksum(want, castagnoli) {
			t.Fatalf("%d bytes: stored %d bytes (present %v) or different ones; CRC-32C %08x", size, len(got), ok, sum)
		}
	}
	if err := kvik.UploadFileS3(context.Background(), v.URLOf("dir"), t.TempDir(), v.Opts()...); !errors.Is(err, kvik.ErrInvalidArgument) {
		t.Fatalf("upload of a directory: %v", err)
	}
	if err := kvik.UploadFileS3(context.Background(), v.URLOf("missing"), filepath.Join(t.TempDir(), "missing"), v.Opts()...); !errors.Is(err, fs.ErrNotExist) {
		t.Fatalf("upload of a missing file: %v", err)
	}
}

// TestUploadFileS3Shrinks truncates the file while its upload runs, when
// the second part's request arrives (one worker: most of that part and
// all of the third lie beyond the new end): the upload fails with
// io.ErrUnexpectedEOF, is aborted and leaves nothing.
func TestUploadFileS3Shrinks(t *testing.T) {
	v := s3test.Start(t)
	restore, err := kvik.UpdateDefaults(func(d *kvik.Defaults) { d.TaskSize, d.NumThreads = 5<<20, 1 })
	if err != nil {
		t.Fatal(err)
	}
	defer restore()
	path := filepath.Join(t.TempDir(), "src.bin")
	if err := os.WriteFile(path, randomBytes(rand.New(rand.NewPCG(61, 1)), 3*(5<<20)+99), 0o644); err != nil {
		t.Fatal(err)
	}
	var once sync.Once
	p := v.FaultProxy(t, func(r *http.Request) int {
		if r.Method == http.MethodPut && r.URL.Query().Get("partNumber") == "2" {
			once.Do(func() { os.Truncate(path, 1<<20) })
		}
		return 0
	})
	err = kvik.UploadFileS3(context.Background(), v.URLOf("shrunk.bin"), path, p.Opts()...)
	if !errors.Is(err, io.ErrUnexpectedEOF) {
		t.Fatalf("upload of a file that shrank: %v", err)
	}
	t.Logf("as expected: %v", err)
	if _, ok := v.Object("shrunk.bin"); ok {
		t.Fatal("an object was left")
	}
	if ups := listUploads(t, v); strings.Contains(ups, "shrunk.bin") {
		t.Fatalf("upload still listed: %s", ups)
	}
}
