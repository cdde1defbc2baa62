package zarr

import (
	"context"
	"errors"
	"log/slog"
	"net"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"golang.org/x/sys/unix"

	"github.com/kvikgo/kvik"
	"github.com/kvikgo/kvik/internal/testkit/fielddata"
	"github.com/kvikgo/kvik/internal/testkit/logtest"
)

// TestHostReadsSkipCuFile reads arrays of a DirStore into host memory,
// whole and in part: chunks of at most 4 MiB (uncompressed and zstd) are
// read through a plain descriptor, no kvik FileHandle (whose O_DIRECT
// descriptor and cuFile registration cost more than a small chunk's
// read), and a larger chunk through a FileHandle of the same file (its
// descriptor's /proc link) asking for POSIX I/O (CompatOn): host reads
// never use cuFile.
func TestHostReadsSkipCuFile(t *testing.T) {
	dir := t.TempDir()
	s, err := NewDirStore(dir)
	if err != nil {
		t.Fatal(err)
	}
	log := &logtest.Capture{Level: kvik.LevelInfo}
	defer kvik.SetLogger(slog.New(log))()
	arrays := []struct {
		name          string
		shape, chunks []int
		codecs        []Codec
	}{
		{"raw", []int{40, 36}, []int{16, 12}, nil},
		{"zstd", []int{40, 36}, []int{16, 12}, writeCodecs["zstd"]},
		{"large", []int{1200, 1000}, []int{1100, 1000}, nil}, // 4.4 MB chunks
	}
	for _, c := range arrays {
		src := fielddata.Float32(c.shape[0], c.shape[1], 4)
		a, err := Create(bg, s, c.name, Metadata{Shape: c.shape, ChunkShape: c.chunks, DataType: DataType{Kind: Float, Size: 4}, Codecs: c.codecs})
		if err != nil {
			t.Fatal(err)
		}
		if err := a.WriteRegion(bg, []int{0, 0}, c.shape, src); err != nil {
			t.Fatal(err)
		}
		got := make([]byte, len(src))
		if err := a.ReadRegion(bg, []int{0, 0}, c.shape, got); err != nil {
			t.Fatal(err)
		}
		part := make([]byte, 10*7*4)
		if err := a.ReadRegion(bg, []int{13, 5}, []int{23, 12}, part); err != nil {
			t.Fatal(err)
		}
		w := c.shape[1]
		if string(got) != string(src) || string(part[:7*4]) != string(src[(13*w+5)*4:(13*w+12)*4]) {
			t.Fatalf("%s: read back other bytes", c.name)
		}
	}
	large := 0
	for _, r := range log.Find("kvik: open") {
		p, req := r.Attrs["path"], r.Attrs["requested"]
		if !strings.HasPrefix(p, dir) && !strings.HasPrefix(p, "/proc/self/fd/") {
			continue
		}
		if strings.HasPrefix(p, "/proc/") { // a large chunk's file opened again
			large++
			if req != kvik.CompatOn.String() {
				t.Errorf("%s opened for a host read asking for compat %q, want %q", p, req, kvik.CompatOn)
			}
			continue
		}
		if strings.Contains(p, "/c/") && !strings.Contains(p, ".kvik-tmp") { // not metadata, not a write's
			t.Errorf("%s was opened as a kvik FileHandle by its path for a host read", p)
		}
	}
	if large == 0 {
		t.Fatal("the 4.4 MB chunks were not read through a FileHandle")
	}
}

// TestDirStoreNotRegular puts a FIFO, a directory, a socket and a link to
// a device node where a DirStore's values would be: reading them fails at once with
// kvik.ErrNotRegular (a FIFO's open blocked until a writer came), into
// host memory and, before any CUDA call, into device memory; an array
// read of a chunk that is a FIFO fails the same way.
func TestDirStoreNotRegular(t *testing.T) {
	dir := t.TempDir()
	s, err := NewDirStore(dir)
	if err != nil {
		t.Fatal(err)
	}
	a, err := Create(bg, s, "a", Metadata{Shape: []int{8, 8}, ChunkShape: []int{4, 4}, DataType: DataType{Kind: Float, Size: 4}})
	if err != nil {
		t.Fatal(err)
	}
	if err := os.MkdirAll(filepath.Join(dir, "a", "c", "0"), 0o755); err != nil {
		t.Fatal(err)
	}
	if err := unix.Mkfifo(filepath.Join(dir, "a", "c", "0", "0"), 0o644); err != nil {
		t.Fatal(err)
	}
	if err := os.MkdirAll(filepath.Join(dir, "a", "c", "0", "1"), 0o755); err != nil {
		t.Fatal(err)
	}
	sock, err := net.Listen("unix", filepath.Join(dir, "a", "c", "1"))
	if err != nil {
		t.Fatal(err)
	}
	defer sock.Close()
	if err := os.Symlink("/dev/null", filepath.Join(dir, "a", "c", "2")); err != nil { // a device node, behind a link
		t.Fatal(err)
	}
	ctx, cancel := context.WithTimeout(bg, 10*time.Second)
	defer cancel()
	for _, key := range []string{"a/c/0/0", "a/c/0/1", "a/c/1", "a/c/2"} {
		_, err := s.Get(ctx, key, nil)
		_, rerr := s.ReadRange(ctx, key, 0, make([]byte, 4))
		_, derr := s.ReadRangeDevice(ctx, key, 0, 0, 4, 0)
		for _, e := range []error{err, rerr, derr} {
			if !errors.Is(e, kvik.ErrNotRegular) {
				t.Errorf("%s: %v, want kvik.ErrNotRegular", key, e)
			}
		}
	}
	err = a.ReadRegion(ctx, []int{0, 0}, []int{4, 4}, make([]byte, 64))
	if !errors.Is(err, kvik.ErrNotRegular) {
		t.Errorf("a region read over a FIFO chunk: %v, want kvik.ErrNotRegular", err)
	}
}

// TestDirStoreLargeValueReplaced reads a value of more than 4 MiB (its
// read goes through a FileHandle, which opens the file again) after a
// write has replaced its file: the read returns the value whose size it
// took, whole, not the new file's bytes cut to that size; where /proc is
// missing the read fails with kvik.ErrFileChanged.
func TestDirStoreLargeValueReplaced(t *testing.T) {
	dir := t.TempDir()
	s, err := NewDirStore(dir)
	if err != nil {
		t.Fatal(err)
	}
	old, repl := fielddata.Float32(1100, 1000, 5), fielddata.Float32(1200, 1000, 6)
	if err := s.Set(bg, "v", old); err != nil {
		t.Fatal(err)
	}
	f, err := s.openHost("v")
	if err != nil {
		t.Fatal(err)
	}
	defer f.close()
	if err := s.Set(bg, "v", repl); err != nil {
		t.Fatal(err)
	}
	got := make([]byte, f.size)
	if err := f.read(bg, got, 0); err != nil || string(got) != string(old) {
		t.Fatalf("read after the file was replaced: %v (the old value: %t)", err, string(got) == string(old))
	}
	// Without /proc the handle opens the path, now the new file's.
	if _, err := f.readPoolVia(bg, got, 0, "/nonexistent/proc/%d"); !errors.Is(err, kvik.ErrFileChanged) {
		t.Fatalf("read of the replaced path: %v, want kvik.ErrFileChanged", err)
	}
}
