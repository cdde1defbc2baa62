package posix

import (
	"bytes"
	"errors"
	"io"
	"io/fs"
	"math/rand/v2"
	"os"
	"path/filepath"
	"syscall"
	"testing"

	"golang.org/x/sys/unix"
)

// fakeFile serves pread/pwrite from memory, at most step bytes a call, with
// an EINTR before every other call.
type fakeFile struct {
	data  []byte
	step  int
	calls int
	limit int // writes beyond this offset fail with ENOSPC
}

func (f *fakeFile) interrupt() bool { f.calls++; return f.calls%2 == 1 }

func (f *fakeFile) pread(_ int, p []byte, off int64) (int, error) {
	if f.interrupt() {
		return 0, syscall.EINTR
	}
	if off >= int64(len(f.data)) {
		return 0, nil
	}
	return copy(p[:min(len(p), f.step)], f.data[off:]), nil
}

func (f *fakeFile) pwrite(_ int, p []byte, off int64) (int, error) {
	if f.interrupt() {
		return 0, syscall.EINTR
	}
	if off >= int64(f.limit) {
		return 0, syscall.ENOSPC
	}
	n := min(len(p), f.step, f.limit-int(off))
	if need := int(off) + n; need > len(f.data) {
		f.data = append(f.data, make([]byte, need-len(f.data))...)
	}
	return copy(f.data[off:], p[:n]), nil
}

func use(t *testing.T, f *fakeFile) {
	t.Cleanup(SetSyscalls(Syscalls{Pread: f.pread, Pwrite: f.pwrite}))
}

func TestReadFullLoopsAndReportsEOF(t *testing.T) {
	rng := rand.New(rand.NewPCG(1, 2))
	data := make([]byte, 10007)
	for i := range data {
		data[i] = byte(rng.IntN(255) + 1)
	}
	f := &fakeFile{data: data, step: 333}
	use(t, f)
	p := make([]byte, 5000)
	if n, err := ReadFull(0, p, 17); n != 5000 || err != nil || !bytes.Equal(p, data[17:5017]) {
		t.Fatalf("ReadFull: %d, %v", n, err)
	}
	if n, err := ReadFull(0, p, 9000); n != 1007 || err != io.EOF || !bytes.Equal(p[:n], data[9000:]) {
		t.Fatalf("ReadFull at the end: %d, %v", n, err)
	}
}

func TestWriteFullLoopsAndReportsENOSPC(t *testing.T) {
	f := &fakeFile{step: 100, limit: 1234}
	use(t, f)
	src := bytes.Repeat([]byte{7, 9, 11}, 1000)
	n, err := WriteFull(0, src, 0)
	if n != 1234 || !errors.Is(err, syscall.ENOSPC) || !bytes.Equal(f.data, src[:1234]) {
		t.Fatalf("WriteFull: %d, %v", n, err)
	}
}

func TestEndlessEINTRStops(t *testing.T) {
	eintr := func(int, []byte, int64) (int, error) { return 0, syscall.EINTR }
	t.Cleanup(SetSyscalls(Syscalls{Pread: eintr, Pwrite: eintr}))
	if _, err := ReadFull(0, make([]byte, 10), 0); !errors.Is(err, syscall.EINTR) {
		t.Fatalf("ReadFull: %v", err)
	}
	if _, err := WriteFull(0, make([]byte, 10), 0); !errors.Is(err, syscall.EINTR) {
		t.Fatalf("WriteFull: %v", err)
	}
}

func TestWriteWithoutProgress(t *testing.T) {
	next := CurrentSyscalls()
	next.Pwrite = func(int, []byte, int64) (int, error) { return 0, nil }
	t.Cleanup(SetSyscalls(next))
	if n, err := WriteFull(0, make([]byte, 10), 0); n != 0 || err != io.ErrShortWrite {
		t.Fatalf("WriteFull: %d, %v", n, err)
	}
}

// preadv serves preadv from f as pread does: at most step bytes a call
// (a short read across buffers), an EINTR before every other call, and
// more than IOV_MAX buffers refused as the kernel refuses them.
func (f *fakeFile) preadv(fd int, iovs [][]byte, off int64) (int, error) {
	if len(iovs) > iovMax {
		return 0, syscall.EINVAL
	}
	if f.interrupt() {
		return 0, syscall.EINTR
	}
	f.calls++ // the pread calls below are one call
	done := 0
	for _, b := range iovs {
		if done == f.step || off+int64(done) >= int64(len(f.data)) {
			break
		}
		done += copy(b[:min(len(b), f.step-done)], f.data[off+int64(done):])
	}
	return done, nil
}

// TestReadvFullScattersAndReportsEOF reads random buffers, some empty,
// more than IOV_MAX of them, through short reads and EINTR, and checks
// them against the file; a read past the end gives io.EOF and the bytes
// there were.
func TestReadvFullScattersAndReportsEOF(t *testing.T) {
	rng := rand.New(rand.NewPCG(3, 4))
	data := make([]byte, 200003)
	for i := range data {
		data[i] = byte(rng.IntN(255) + 1)
	}
	f := &fakeFile{data: data, step: 4097}
	t.Cleanup(SetSyscalls(Syscalls{Pread: f.pread, Pwrite: f.pwrite, Preadv: f.preadv}))
	var bufs [][]byte
	total := 0
	for total < 150000 {
		b := make([]byte, rng.IntN(200))
		bufs = append(bufs, b)
		total += len(b)
	}
	if len(bufs) <= iovMax {
		t.Fatalf("%d buffers: the test needs more than %d", len(bufs), iovMax)
	}
	lens := make([]int, len(bufs))
	for i, b := range bufs {
		lens[i] = len(b)
	}
	n, err := ReadvFull(0, bufs, 1234)
	if n != total || err != nil || !bytes.Equal(bytes.Join(bufs, nil), data[1234:1234+total]) {
		t.Fatalf("ReadvFull: %d of %d, %v", n, total, err)
	}
	for i, b := range bufs {
		if len(b) != lens[i] {
			t.Fatalf("buffer %d changed length from %d to %d", i, lens[i], len(b))
		}
	}
	n, err = ReadvFull(0, bufs, int64(len(data)-1000))
	if n != 1000 || err != io.EOF || !bytes.Equal(bytes.Join(bufs, nil)[:1000], data[len(data)-1000:]) {
		t.Fatalf("ReadvFull at the end: %d, %v", n, err)
	}
}

// TestOpen opens a file with Open and reads it back; a missing path is
// fs.ErrNotExist; a file it creates has the mode asked for.
func TestOpen(t *testing.T) {
	p := filepath.Join(t.TempDir(), "f")
	want := []byte("posix.Open reads this")
	if err := os.WriteFile(p, want, 0o644); err != nil {
		t.Fatal(err)
	}
	fd, err := Open(p, unix.O_RDONLY|unix.O_CLOEXEC, 0)
	if err != nil {
		t.Fatal(err)
	}
	defer unix.Close(fd)
	got := make([]byte, len(want))
	if n, err := ReadFull(fd, got, 0); n != len(want) || err != nil || string(got) != string(want) {
		t.Fatalf("read %d bytes %q, %v", n, got[:n], err)
	}
	if _, err := Open(p+"-missing", unix.O_RDONLY, 0); !errors.Is(err, fs.ErrNotExist) {
		t.Fatalf("a missing path: %v, want fs.ErrNotExist", err)
	}
	created := p + "-new"
	fd, err = Open(created, unix.O_WRONLY|unix.O_CREAT|unix.O_EXCL|unix.O_CLOEXEC, 0o600)
	if err != nil {
		t.Fatal(err)
	}
	unix.Close(fd)
	if fi, err := os.Stat(created); err != nil || fi.Mode().Perm() != 0o600 {
		t.Fatalf("created: %v, %v; want mode 0600", fi, err)
	}
}
