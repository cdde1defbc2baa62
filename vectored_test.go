package kvik_test

import (
	"bytes"
	"context"
	"errors"
	"io"
	"io/fs"
	"math/rand/v2"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"syscall"
	"testing"

	"github.com/kvikgo/kvik"
)

// randomVec returns buffers of random sizes, some empty, that hold about
// total bytes in all, filled with junk so that a read that leaves a byte
// alone shows.
func randomVec(rng *rand.Rand, total int) [][]byte {
	var bufs [][]byte
	for left := total; left > 0; {
		var n int
		switch rng.IntN(5) {
		case 0:
			n = 0
		case 1:
			n = rng.IntN(16) + 1
		default:
			n = rng.IntN(min(left, 300<<10)) + 1
		}
		n = min(n, left)
		left -= n
		bufs = append(bufs, randomBytes(rng, n))
	}
	if rng.IntN(2) == 0 {
		bufs = append([][]byte{{}}, bufs...)
	}
	return bufs
}

func vecLen(bufs [][]byte) int {
	n := 0
	for _, b := range bufs {
		n += len(b)
	}
	return n
}

// refReadV is ReadV done with ReadAt on the reference: the buffers laid
// end to end.
func refReadV(r io.ReaderAt, bufs [][]byte, off int64) (int, error) {
	all := make([]byte, vecLen(bufs))
	n, err := r.ReadAt(all, off)
	all = all[:n] // bytes past n are left as they were
	for _, b := range bufs {
		all = all[copy(b, all):]
	}
	return n, err
}

func cloneVec(bufs [][]byte) [][]byte {
	c := make([][]byte, len(bufs))
	for i, b := range bufs {
		c[i] = bytes.Clone(b)
	}
	return c
}

// checkReadV compares r.ReadV with ReadAt of ref for random vectors at
// random, unaligned offsets, some ending past the end of the data.
func checkReadV(t *testing.T, rng *rand.Rand, name string, readV func([][]byte, int64) (int, error), ref io.ReaderAt, size int) {
	t.Helper()
	for i := range 40 {
		off := int64(rng.IntN(size + 10))
		total := rng.IntN(size + 1)
		if i%4 == 0 {
			total = size - int(min(off, int64(size))) + rng.IntN(5000) // ends past the data
		}
		bufs := randomVec(rng, total)
		want := cloneVec(bufs)
		wn, werr := refReadV(ref, want, off)
		n, err := readV(bufs, off)
		if n != wn || (err == nil) != (werr == nil) || (werr == io.EOF) != (err == io.EOF) {
			t.Fatalf("%s: ReadV of %d bytes in %d buffers at %d = %d, %v; ReadAt = %d, %v", name, vecLen(bufs), len(bufs), off, n, err, wn, werr)
		}
		for j := range bufs {
			if !bytes.Equal(bufs[j], want[j]) {
				t.Fatalf("%s: ReadV of %d buffers at %d: buffer %d (%d bytes) differs", name, len(bufs), off, j, len(bufs[j]))
			}
		}
	}
}

func TestReadVWriteV(t *testing.T) {
	noLeaks(t)
	smallTasks(t, 64<<10)
	rng := rand.New(rand.NewPCG(27, 3))
	path := filepath.Join(t.TempDir(), "v")
	const size = 2<<20 + 4097
	data := randomBytes(rng, size)
	if err := os.WriteFile(path, data, 0o644); err != nil {
		t.Fatal(err)
	}
	ref, f := openWithReference(t, path)
	checkReadV(t, rng, "FileHandle", f.ReadV, ref, size)

	// WriteV leaves the file as WriteAt of the buffers laid end to end.
	for range 20 {
		off := int64(rng.IntN(size + 5000))
		bufs := randomVec(rng, rng.IntN(1<<20))
		n, err := f.WriteV(bufs, off)
		if n != vecLen(bufs) || err != nil {
			t.Fatalf("WriteV of %d bytes at %d = %d, %v", vecLen(bufs), off, n, err)
		}
		if _, err := ref.WriteAt(bytes.Join(bufs, nil), off); err != nil {
			t.Fatal(err)
		}
	}
	want, _ := os.ReadFile(path)
	// The kvik writes and the reference writes went to the same file: do
	// them again to a second file from the reference data to compare.
	path2 := filepath.Join(t.TempDir(), "w")
	g, err := kvik.Open(path2, "w+", 0)
	if err != nil {
		t.Fatal(err)
	}
	defer g.Close()
	bufs := randomVec(rng, len(want))
	refReadV(bytes.NewReader(want), bufs, 0)
	if n, err := g.WriteV(bufs, 0); n != len(want) || err != nil {
		t.Fatalf("WriteV of the whole file = %d, %v", n, err)
	}
	if got, _ := os.ReadFile(path2); !bytes.Equal(got, want) {
		t.Fatal("WriteV: file differs from the buffers laid end to end")
	}
	checkReadV(t, rng, "FileHandle after WriteV", g.ReadV, bytes.NewReader(want), len(want))

	// Empty vectors, at the end and past it.
	for _, off := range []int64{0, int64(len(want)), int64(len(want)) + 9} {
		if n, err := g.ReadV(nil, off); n != 0 || err != nil {
			t.Fatalf("ReadV(nil, %d) = %d, %v", off, n, err)
		}
		if n, err := g.ReadV([][]byte{{}, {}}, off); n != 0 || err != nil {
			t.Fatalf("ReadV of empty buffers at %d = %d, %v", off, n, err)
		}
	}
	// A read that starts past the end, and one that ends mid-vector.
	if n, err := g.ReadV([][]byte{make([]byte, 3)}, int64(len(want))+1); n != 0 || err != io.EOF {
		t.Fatalf("ReadV past the end = %d, %v", n, err)
	}
	tail := [][]byte{make([]byte, 5), {}, make([]byte, 7), make([]byte, 9)}
	if n, err := g.ReadV(tail, int64(len(want))-8); n != 8 || err != io.EOF {
		t.Fatalf("ReadV ending mid-vector = %d, %v, want 8, EOF", n, err)
	}
	if !bytes.Equal(append(tail[0], tail[2][:3]...), want[len(want)-8:]) || !bytes.Equal(tail[2][3:], make([]byte, 4)) {
		t.Fatalf("ReadV ending mid-vector: %x %x", tail[0], tail[2])
	}
}

func TestReadVWriteVErrors(t *testing.T) {
	noLeaks(t)
	dir := t.TempDir()
	path := filepath.Join(dir, "e")
	if err := os.WriteFile(path, []byte("0123456789"), 0o644); err != nil {
		t.Fatal(err)
	}
	r, err := kvik.Open(path, "r", 0)
	if err != nil {
		t.Fatal(err)
	}
	var pe *fs.PathError
	if n, err := r.WriteV([][]byte{[]byte("x")}, 0); n != 0 || !errors.Is(err, kvik.ErrNotWritable) || !errors.As(err, &pe) || pe.Op != "write" {
		t.Fatalf("WriteV on a read-only handle = %d, %v", n, err)
	}
	if n, err := r.ReadV([][]byte{make([]byte, 1)}, -1); n != 0 || !errors.Is(err, kvik.ErrInvalidArgument) {
		t.Fatalf("ReadV at -1 = %d, %v", n, err)
	}
	if n, err := r.ReadDeviceV([]kvik.DeviceVec{{Size: -1}}, 0); n != 0 || !errors.Is(err, kvik.ErrInvalidArgument) {
		t.Fatalf("ReadDeviceV of a negative size = %d, %v", n, err)
	}
	r.Close()
	if n, err := r.ReadV([][]byte{make([]byte, 1)}, 0); n != 0 || !errors.Is(err, kvik.ErrClosed) {
		t.Fatalf("ReadV after Close = %d, %v", n, err)
	}
	w, err := kvik.Open(path, "w", 0)
	if err != nil {
		t.Fatal(err)
	}
	defer w.Close()
	if n, err := w.ReadV([][]byte{make([]byte, 1)}, 0); n != 0 || !errors.Is(err, kvik.ErrNotReadable) {
		t.Fatalf("ReadV on a write-only handle = %d, %v", n, err)
	}
}

func TestReadVReadOnlyHandles(t *testing.T) {
	noLeaks(t)
	smallTasks(t, 64<<10)
	rng := rand.New(rand.NewPCG(27, 4))
	dir := t.TempDir()
	const size = 1<<20 + 777
	data := randomBytes(rng, size)
	path := filepath.Join(dir, "f.bin")
	if err := os.WriteFile(path, data, 0o644); err != nil {
		t.Fatal(err)
	}
	m, err := kvik.OpenMmap(path, "r")
	if err != nil {
		t.Fatal(err)
	}
	defer m.Close()
	checkReadV(t, rng, "MmapHandle", m.ReadV, bytes.NewReader(data), size)

	srv := httptest.NewServer(http.FileServer(http.Dir(dir)))
	defer srv.Close()
	h, err := kvik.OpenRemote(context.Background(), srv.URL+"/f.bin")
	if err != nil {
		t.Fatal(err)
	}
	checkReadV(t, rng, "RemoteHandle", h.ReadV, bytes.NewReader(data), size)
	h.Close()
	if _, err := h.ReadV([][]byte{make([]byte, 4)}, 0); !errors.Is(err, kvik.ErrClosed) {
		t.Fatalf("RemoteHandle.ReadV after Close: %v", err)
	}
	srv.CloseClientConnections()
}

// TestReadVWriteVEIO: an I/O error at a random offset inside a vector
// stops the count there, as ReadAt and WriteAt do: n is the bytes before
// the failing offset, in whichever buffer it lies, and the error is EIO.
func TestReadVWriteVEIO(t *testing.T) {
	rng := rand.New(rand.NewPCG(27, 6))
	path := filepath.Join(t.TempDir(), "eio")
	const size = 1<<20 + 999
	data := randomBytes(rng, size)
	if err := os.WriteFile(path, data, 0o644); err != nil {
		t.Fatal(err)
	}
	f, err := kvik.Open(path, "r+", 0)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	l := relInstallFaults(t, f, 6, func(l *relFaultLayer, c relCall) (int, error) {
		end := c.off + int64(len(c.p))
		if l.at < c.off || l.at >= end {
			return c.do(c.p)
		}
		l.fault()
		if l.at == c.off {
			return -1, syscall.EIO
		}
		return c.do(c.p[:l.at-c.off])
	})
	relWithConfig(t, relPropConfig{threads: 4, taskSize: 64 << 10, bounce: 1 << 20}, func() {
		for i := range 30 {
			off := int64(rng.IntN(size / 2))
			bufs := randomVec(rng, rng.IntN(size/2)+1)
			total := vecLen(bufs)
			if total == 0 {
				continue
			}
			l.at = off + rng.Int64N(int64(total))
			var n int
			var err error
			op := "ReadV"
			if i%2 == 0 {
				n, err = f.ReadV(bufs, off)
			} else {
				op = "WriteV"
				n, err = f.WriteV(bufs, off)
			}
			if n != int(l.at-off) || !errors.Is(err, syscall.EIO) {
				t.Fatalf("%s of %d bytes at %d, EIO at %d: (%d, %v), want (%d, EIO)", op, total, off, l.at, n, err, l.at-off)
			}
			if op == "ReadV" && !bytes.Equal(bytes.Join(bufs, nil)[:n], data[off:off+int64(n)]) {
				t.Fatalf("ReadV: the %d bytes before the error differ", n)
			}
			if op == "WriteV" {
				// Tasks after the failing one may have written too.
				onDisk, err := os.ReadFile(path)
				if err != nil || !bytes.Equal(onDisk[off:off+int64(n)], bytes.Join(bufs, nil)[:n]) {
					t.Fatalf("WriteV: the %d bytes before the error are not on disk (%v)", n, err)
				}
				data = onDisk
			}
		}
	})
}
