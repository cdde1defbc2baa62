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
	"time"

	"golang.org/x/sys/unix"

	"github.com/kvikgo/kvik/internal/testkit/fskinds"
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

// TestOpenStat opens a FIFO without a writer, which Open would wait on,
// and gets its stat, blocking again; a FIFO opened to write without a
// reader and a socket give ENXIO, and a directory opened to write
// EISDIR, each with the path's stat; O_DIRECT survives, as does an
// O_NONBLOCK that the caller asked for.
func TestOpenStat(t *testing.T) {
	dir := t.TempDir()
	fifo, sock, reg := filepath.Join(dir, "fifo"), filepath.Join(dir, "socket"), filepath.Join(dir, "regular")
	if err := unix.Mkfifo(fifo, 0o600); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(reg, make([]byte, 8192), 0o600); err != nil {
		t.Fatal(err)
	}
	s, err := unix.Socket(unix.AF_UNIX, unix.SOCK_STREAM, 0)
	if err != nil {
		t.Fatal(err)
	}
	defer unix.Close(s)
	if err := unix.Bind(s, &unix.SockaddrUnix{Name: sock}); err != nil {
		t.Fatal(err)
	}

	done := make(chan struct{})
	var fd int
	var st unix.Stat_t
	go func() { fd, st, err = OpenStat(fifo, unix.O_RDONLY|unix.O_CLOEXEC, 0); close(done) }()
	select {
	case <-done:
	case <-time.After(5 * time.Second):
		t.Fatal("OpenStat of a FIFO without a writer did not return within 5s")
	}
	if err != nil || st.Mode&unix.S_IFMT != unix.S_IFIFO {
		t.Fatalf("FIFO: mode %#o, %v", st.Mode, err)
	}
	checkFlags(t, "FIFO", fd, 0, unix.O_NONBLOCK)
	unix.Close(fd)

	for _, c := range []struct {
		path string
		flag int
		err  error
		mode uint32
	}{
		{fifo, unix.O_WRONLY, unix.ENXIO, unix.S_IFIFO},
		{sock, unix.O_RDONLY, unix.ENXIO, unix.S_IFSOCK},
		{dir, unix.O_WRONLY, unix.EISDIR, unix.S_IFDIR},
		{filepath.Join(dir, "missing"), unix.O_RDONLY, unix.ENOENT, 0},
	} {
		fd, st, err := OpenStat(c.path, c.flag|unix.O_CLOEXEC, 0)
		if fd != -1 || !errors.Is(err, c.err) || st.Mode&unix.S_IFMT != c.mode {
			t.Errorf("%s, flags %#o: fd %d, mode %#o, %v; want -1, type %#o, %v", c.path, c.flag, fd, st.Mode, err, c.mode, c.err)
		}
	}

	fd, st, err = OpenStat(reg, unix.O_RDONLY|unix.O_CLOEXEC|unix.O_NONBLOCK, 0)
	if err != nil || st.Size != 8192 {
		t.Fatalf("regular file with O_NONBLOCK: size %d, %v", st.Size, err)
	}
	checkFlags(t, "O_NONBLOCK asked for", fd, unix.O_NONBLOCK, 0)
	unix.Close(fd)
	fd, _, err = OpenStat(reg, unix.O_RDONLY|unix.O_CLOEXEC|unix.O_DIRECT, 0)
	if errors.Is(err, unix.EINVAL) {
		t.Skipf("no O_DIRECT on %s: %v", dir, err)
	}
	if err != nil {
		t.Fatal(err)
	}
	checkFlags(t, "O_DIRECT", fd, unix.O_DIRECT, unix.O_NONBLOCK)
	unix.Close(fd)
}

// checkFlags fails unless fd's status flags have all of set and none of
// clear.
func checkFlags(t *testing.T, what string, fd, set, clear int) {
	t.Helper()
	fl, err := unix.FcntlInt(uintptr(fd), unix.F_GETFL, 0)
	if err != nil {
		t.Fatal(err)
	}
	if fl&set != set || fl&clear != 0 {
		t.Errorf("%s: flags %#o, want %#o set and %#o clear", what, fl, set, clear)
	}
}

// TestOpenStatLease opens to write a file on which a read lease is held:
// the non-blocking open fails with EWOULDBLOCK, and OpenStat waits for
// the lease to go, as a blocking open does, rather than fail.
func TestOpenStatLease(t *testing.T) {
	p := filepath.Join(t.TempDir(), "leased")
	if err := os.WriteFile(p, []byte("leased"), 0o600); err != nil {
		t.Fatal(err)
	}
	holder, err := unix.Open(p, unix.O_RDONLY|unix.O_CLOEXEC, 0)
	if err != nil {
		t.Fatal(err)
	}
	defer unix.Close(holder)
	if _, err := unix.FcntlInt(uintptr(holder), unix.F_SETLEASE, unix.F_RDLCK); err != nil {
		t.Skipf("no lease here: %v", err)
	}
	if _, err := Open(p, unix.O_WRONLY|unix.O_NONBLOCK|unix.O_CLOEXEC, 0); !errors.Is(err, unix.EWOULDBLOCK) {
		t.Fatalf("a non-blocking open of a leased file: %v, want EWOULDBLOCK", err)
	}
	time.AfterFunc(100*time.Millisecond, func() { unix.FcntlInt(uintptr(holder), unix.F_SETLEASE, unix.F_UNLCK) })
	fd, st, err := OpenStat(p, unix.O_WRONLY|unix.O_CLOEXEC, 0)
	if err != nil || st.Size != 6 {
		t.Fatalf("OpenStat of a leased file: size %d, %v", st.Size, err)
	}
	checkFlags(t, "leased", fd, unix.O_WRONLY, unix.O_NONBLOCK)
	unix.Close(fd)
}

// TestSizeOf: a regular file's size is its stat's; a block device's,
// whose stat says 0, is the device's (a loop device over a file of
// random size).
func TestSizeOf(t *testing.T) {
	dir := t.TempDir()
	rng := rand.New(rand.NewPCG(7, uint64(time.Now().UnixNano())))
	size := func(path string) int64 {
		fd, st, err := OpenStat(path, unix.O_RDONLY|unix.O_CLOEXEC, 0)
		if err != nil {
			t.Fatal(err)
		}
		defer unix.Close(fd)
		n, err := SizeOf(fd, &st)
		if err != nil {
			t.Fatalf("SizeOf(%s): %v", path, err)
		}
		if off, err := unix.Seek(fd, 0, io.SeekCurrent); err != nil || off != 0 {
			t.Errorf("SizeOf(%s) moved the descriptor's offset to %d (%v)", path, off, err)
		}
		return n
	}
	reg := filepath.Join(dir, "f")
	data := make([]byte, 1+rng.IntN(1<<20))
	if err := os.WriteFile(reg, data, 0o600); err != nil {
		t.Fatal(err)
	}
	if got := size(reg); got != int64(len(data)) {
		t.Errorf("regular file: SizeOf %d, want %d", got, len(data))
	}
	blk := make([]byte, 512*(1+rng.IntN(4096)))
	dev := fskinds.LoopDevice(t, dir, blk)
	if got := size(dev); got != int64(len(blk)) {
		t.Errorf("block device %s over %d bytes: SizeOf %d", dev, len(blk), got)
	}
}
