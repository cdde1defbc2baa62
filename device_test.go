package kvik_test

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"io"
	"math/rand/v2"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/kvikgo/kvik"
	"github.com/kvikgo/kvik/cuda"
	"github.com/kvikgo/kvik/cufile"
	"github.com/kvikgo/kvik/internal/testkit/gputest"
)

// needGPU skips the test, with the reason, where no CUDA device is usable,
// and returns device 0's primary context.
func needGPU(t testing.TB) cuda.Context {
	t.Helper()
	return gputest.Primary(t, 0)
}

// testDir returns a directory for files that cuFile may serve: the
// KVIK_TEST_DIR variable when set (cuFile refuses tmpfs), else a temp dir.
func testDir(t testing.TB) string {
	if d := os.Getenv("KVIK_TEST_DIR"); d != "" {
		dir, err := os.MkdirTemp(d, "kvik-test-")
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { os.RemoveAll(dir) })
		return dir
	}
	return t.TempDir()
}

func devAlloc(t testing.TB, ctx cuda.Context, n int) *cuda.DeviceBuffer {
	t.Helper()
	var b *cuda.DeviceBuffer
	if err := cuda.WithContext(ctx, func() (err error) { b, err = cuda.MemAlloc(n); return err }); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { b.Close() })
	return b
}

func toDevice(t testing.TB, ctx cuda.Context, dst cuda.DevicePtr, src []byte) {
	t.Helper()
	if err := cuda.WithContext(ctx, func() error { return cuda.MemcpyHtoD(dst, src) }); err != nil {
		t.Fatal(err)
	}
}

func fromDevice(t testing.TB, ctx cuda.Context, src cuda.DevicePtr, n int) []byte {
	t.Helper()
	b := make([]byte, n)
	if err := cuda.WithContext(ctx, func() error { return cuda.MemcpyDtoH(b, src) }); err != nil {
		t.Fatal(err)
	}
	return b
}

// compatModes returns the modes this machine can run: POSIX always, and
// cuFile when a file in dir can be registered with it.
func gpuCompatModes(t *testing.T, dir string) []kvik.CompatMode {
	modes := []kvik.CompatMode{kvik.CompatOn}
	probe := filepath.Join(dir, "probe")
	os.WriteFile(probe, []byte("x"), 0o644)
	f, err := kvik.Open(probe, "r", 0, kvik.WithCompatMode(kvik.CompatOff))
	if err != nil {
		t.Logf("cuFile path not tested: %v", err)
		return modes
	}
	f.Close()
	return append(modes, kvik.CompatOff)
}

type devConfig struct {
	threads, taskSize, gds, bounce int
}

func TestDeviceRoundTrip(t *testing.T) {
	ctx := needGPU(t)
	dir := testDir(t)
	rng := rand.New(rand.NewPCG(21, 22))
	configs := []devConfig{
		{1, 4 << 20, 0, 16 << 20}, {4, 1 << 20, 1 << 20, 1}, {16, 199, 0, 8192},
		{16, 4 << 20, 1 << 20, 4096}, {4, 199, 1 << 20, 1 << 20}, {1, 1 << 20, 0, 3 * 4096},
	}
	sizes := []int{1, 4095, 4097, 1<<20 + 7, 3<<20 + 11, 64<<20 + 123}
	for _, mode := range gpuCompatModes(t, dir) {
		for ci, c := range configs {
			for si, size := range sizes {
				if c.taskSize == 199 && size > 1<<20 {
					continue // hundreds of thousands of tasks: slow, and covered by larger tasks
				}
				if size > 4<<20 && ci > 1 {
					continue
				}
				name := fmt.Sprintf("%v/threads=%d/task=%d/gds=%d/bounce=%d/size=%d", mode, c.threads, c.taskSize, c.gds, c.bounce, size)
				t.Run(name, func(t *testing.T) {
					setDefaults(t, func(d *kvik.Defaults) {
						d.NumThreads, d.TaskSize, d.GDSThreshold, d.BounceBufferSize = c.threads, c.taskSize, c.gds, c.bounce
						d.AutoDirectIORead = si%2 == 0
					})
					deviceRoundTrip(t, ctx, dir, rng, mode, size)
				})
			}
		}
	}
}

func deviceRoundTrip(t *testing.T, ctx cuda.Context, dir string, rng *rand.Rand, mode kvik.CompatMode, size int) {
	data := randomBytes(rng, size)
	fileOff := int64(rng.IntN(5000))
	devOff := int64(rng.IntN(300))
	src := devAlloc(t, ctx, size+int(devOff)+rng.IntN(100))
	toDevice(t, ctx, src.Ptr()+cuda.DevicePtr(devOff), data)

	path := filepath.Join(dir, "rt")
	f, err := kvik.Open(path, "w+", 0, kvik.WithCompatMode(mode))
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	if f.CompatMode() != mode {
		t.Fatalf("asked for %v, handle uses %v (%s)", mode, f.CompatMode(), f.CompatReason())
	}
	if n, err := f.WriteDevice(src.Ptr(), size, fileOff, devOff); n != size || err != nil {
		t.Fatalf("WriteDevice: %d, %v", n, err)
	}
	onDisk, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	if len(onDisk) != int(fileOff)+size || !bytes.Equal(onDisk[fileOff:], data) {
		t.Fatalf("file written from device differs (len %d)", len(onDisk))
	}
	devOff2 := int64(rng.IntN(300))
	dst := devAlloc(t, ctx, size+int(devOff2)+600)
	if n, err := f.ReadDevice(dst.Ptr(), size, fileOff, devOff2); n != size || err != nil {
		t.Fatalf("ReadDevice: %d, %v", n, err)
	}
	if got := fromDevice(t, ctx, dst.Ptr()+cuda.DevicePtr(devOff2), size); !bytes.Equal(got, data) {
		t.Fatal("bytes read to the device differ from the file")
	}
	// A read that crosses the end of the file stops there with io.EOF.
	back := int64(min(size, 1000))
	n, err := f.PReadDevice(context.Background(), dst.Ptr(), int(back)+500, fileOff+int64(size)-back, 0).Get()
	if n != int(back) || err != io.EOF {
		t.Fatalf("read across EOF: %d, %v (want %d, EOF)", n, err, back)
	}
	if got := fromDevice(t, ctx, dst.Ptr(), n); !bytes.Equal(got, data[size-n:]) {
		t.Fatal("bytes read across EOF differ")
	}
}

func TestDeviceNonPrimaryContext(t *testing.T) {
	needGPU(t)
	dev, _ := cuda.DeviceGet(0)
	ctx, err := cuda.CtxCreate(0, dev)
	if err != nil {
		t.Fatal(err)
	}
	cuda.CtxPopCurrent() // CtxCreate leaves it current on this thread
	defer cuda.CtxDestroy(ctx)
	rng := rand.New(rand.NewPCG(31, 32))
	dir := testDir(t)
	for _, mode := range gpuCompatModes(t, dir) {
		t.Run(mode.String(), func(t *testing.T) {
			setDefaults(t, func(d *kvik.Defaults) { d.NumThreads, d.TaskSize = 4, 1<<20 })
			deviceRoundTrip(t, ctx, dir, rand.New(rand.NewPCG(rng.Uint64(), 1)), mode, 5<<20+3)
		})
	}
}

func TestDeviceAsync(t *testing.T) {
	ctx := needGPU(t)
	dir := testDir(t)
	rng := rand.New(rand.NewPCG(41, 42))
	for _, mode := range gpuCompatModes(t, dir) {
		t.Run(mode.String(), func(t *testing.T) {
			size := 2<<20 + 321
			data := randomBytes(rng, size)
			path := filepath.Join(dir, "async")
			f, err := kvik.Open(path, "w+", 0, kvik.WithCompatMode(mode))
			if err != nil {
				t.Fatal(err)
			}
			defer f.Close()
			var stream cuda.Stream
			if err := cuda.WithContext(ctx, func() (err error) { stream, err = cuda.StreamCreate(cuda.StreamNonBlocking); return err }); err != nil {
				t.Fatal(err)
			}
			defer cuda.WithContext(ctx, func() error { return cuda.StreamDestroy(stream) })
			src := devAlloc(t, ctx, size+10)
			toDevice(t, ctx, src.Ptr()+10, data)
			wf, err := f.WriteAsync(src.Ptr(), size, 7, 10, stream)
			if err != nil {
				t.Fatal(err)
			}
			if n, err := wf.Get(); n != size || err != nil {
				t.Fatalf("WriteAsync: %d, %v", n, err)
			}
			wf.Close()
			dst := devAlloc(t, ctx, size)
			rf, err := f.ReadAsync(dst.Ptr(), size, 7, 0, stream)
			if err != nil {
				t.Fatal(err)
			}
			if n, err := rf.Get(); n != size || err != nil {
				t.Fatalf("ReadAsync: %d, %v", n, err)
			}
			rf.Close()
			if got := fromDevice(t, ctx, dst.Ptr(), size); !bytes.Equal(got, data) {
				t.Fatal("async round trip differs")
			}
			onDisk, _ := os.ReadFile(path)
			if !bytes.Equal(onDisk[7:], data) {
				t.Fatal("file written asynchronously differs")
			}
		})
	}
}

func TestDeviceBatch(t *testing.T) {
	ctx := needGPU(t)
	dir := testDir(t)
	rng := rand.New(rand.NewPCG(51, 52))
	const n, chunk = 16, 64<<10 + 17
	data := randomBytes(rng, n*chunk)
	path := filepath.Join(dir, "batch")
	if err := os.WriteFile(path, data, 0o644); err != nil {
		t.Fatal(err)
	}
	if !slicesContains(gpuCompatModes(t, dir), kvik.CompatOff) {
		f, err := kvik.Open(path, "r", 0, kvik.WithCompatMode(kvik.CompatOn))
		if err != nil {
			t.Fatal(err)
		}
		defer f.Close()
		b, err := kvik.NewBatchHandle(n)
		if err != nil {
			if !errors.Is(err, kvik.ErrCuFileRequired) {
				t.Fatalf("NewBatchHandle without cuFile: %v", err)
			}
			return
		}
		defer b.Close()
		buf := devAlloc(t, ctx, chunk)
		if err := b.Submit([]kvik.BatchOp{{File: f, Buf: buf.Ptr(), Size: chunk}}); !errors.Is(err, kvik.ErrCuFileRequired) {
			t.Fatalf("batch on a POSIX handle: %v", err)
		}
		return
	}
	f, err := kvik.Open(path, "r+", 0, kvik.WithCompatMode(kvik.CompatOff))
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	b, err := kvik.NewBatchHandle(n)
	if err != nil {
		t.Fatal(err)
	}
	defer b.Close()
	buf := devAlloc(t, ctx, n*chunk)
	// One batch of 16 mixed operations: odd entries write fresh data from
	// the device, even entries read the original data; then a batch of 16
	// reads checks every entry.
	fresh := randomBytes(rng, n*chunk)
	toDevice(t, ctx, buf.Ptr(), fresh)
	want := append([]byte(nil), data...)
	var mixed []kvik.BatchOp
	for i := range n {
		op := kvik.BatchOp{File: f, Buf: buf.Ptr(), Size: chunk, FileOffset: int64(i * chunk), DevOffset: int64(i * chunk), Write: i%2 == 1}
		if op.Write {
			copy(want[i*chunk:], fresh[i*chunk:(i+1)*chunk])
		}
		mixed = append(mixed, op)
	}
	runBatch(t, b, mixed)
	got := fromDevice(t, ctx, buf.Ptr(), n*chunk)
	for i := 0; i < n; i += 2 {
		if !bytes.Equal(got[i*chunk:(i+1)*chunk], data[i*chunk:(i+1)*chunk]) {
			t.Fatalf("mixed batch: read entry %d differs", i)
		}
	}
	if onDisk, _ := os.ReadFile(path); !bytes.Equal(onDisk, want) {
		t.Fatal("mixed batch: file differs after the writes")
	}
	toDevice(t, ctx, buf.Ptr(), make([]byte, n*chunk))
	var reads []kvik.BatchOp
	for i := range n {
		reads = append(reads, kvik.BatchOp{File: f, Buf: buf.Ptr(), Size: chunk, FileOffset: int64(i * chunk), DevOffset: int64((n - 1 - i) * chunk)})
	}
	runBatch(t, b, reads)
	got = fromDevice(t, ctx, buf.Ptr(), n*chunk)
	for i := range n {
		if !bytes.Equal(got[(n-1-i)*chunk:(n-i)*chunk], want[i*chunk:(i+1)*chunk]) {
			t.Fatalf("batch entry %d differs", i)
		}
	}
}

func runBatch(t *testing.T, b *kvik.BatchHandle, ops []kvik.BatchOp) {
	t.Helper()
	if err := b.Submit(ops); err != nil {
		t.Fatal(err)
	}
	done := map[uintptr]bool{}
	deadline := time.Now().Add(30 * time.Second)
	for len(done) < len(ops) {
		ev, err := b.Status(1, len(ops), time.Second)
		if err != nil {
			t.Fatal(err)
		}
		for _, e := range ev {
			if e.Status != cufile.Complete || e.Ret != ops[e.Cookie].Size {
				t.Fatalf("batch op %d: status %v, ret %d", e.Cookie, e.Status, e.Ret)
			}
			done[e.Cookie] = true
		}
		if time.Now().After(deadline) {
			t.Fatalf("batch: %d of %d done after 30 s", len(done), len(ops))
		}
	}
}

func slicesContains(s []kvik.CompatMode, m kvik.CompatMode) bool {
	for _, x := range s {
		if x == m {
			return true
		}
	}
	return false
}

func TestDeviceHelpersAndBadInput(t *testing.T) {
	ctx := needGPU(t)
	dir := testDir(t)
	rng := rand.New(rand.NewPCG(61, 62))
	path, data := writeRandomFile(t, rng, dir, 3<<20+5)
	buf, err := kvik.ReadFileToDevice(path)
	if err != nil {
		t.Fatal(err)
	}
	defer buf.Close()
	if buf.Size() != len(data) || !bytes.Equal(fromDevice(t, buf.Context(), buf.Ptr(), len(data)), data) {
		t.Fatal("ReadFileToDevice differs")
	}
	out := filepath.Join(dir, "out")
	if err := kvik.WriteFileFromDevice(out, buf); err != nil {
		t.Fatal(err)
	}
	if got, _ := os.ReadFile(out); !bytes.Equal(got, data) {
		t.Fatal("WriteFileFromDevice differs")
	}

	f, err := kvik.Open(path, "r+", 0)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	host := make([]byte, 100)
	hostPtr := cuda.DevicePtr(uintptr(unsafePointer(host)))
	if _, err := f.ReadDevice(hostPtr, 100, 0, 0); !errors.Is(err, kvik.ErrNotDeviceMemory) {
		t.Fatalf("host memory: %v", err)
	}
	if _, err := f.RawRead(hostPtr, 100, 0, 0); !errors.Is(err, kvik.ErrNotDeviceMemory) {
		t.Fatalf("RawRead of host memory: %v", err)
	}
	small := devAlloc(t, ctx, 4096)
	if _, err := f.ReadDevice(small.Ptr(), 4097, 0, 0); !errors.Is(err, kvik.ErrInvalidArgument) {
		t.Fatalf("overrun: %v", err)
	}
	if _, err := f.ReadDevice(small.Ptr(), 10, 0, 4090); !errors.Is(err, kvik.ErrInvalidArgument) {
		t.Fatalf("overrun by offset: %v", err)
	}
	if _, err := f.ReadDevice(0, 10, 0, 0); !errors.Is(err, kvik.ErrInvalidArgument) {
		t.Fatalf("nil pointer: %v", err)
	}
	if _, err := f.ReadDevice(small.Ptr(), 10, -1, 0); !errors.Is(err, kvik.ErrInvalidArgument) {
		t.Fatalf("negative offset: %v", err)
	}
	freed := devAlloc(t, ctx, 1<<20)
	p := freed.Ptr()
	freed.Close()
	if _, err := f.ReadDevice(p, 10, 0, 0); !errors.Is(err, kvik.ErrNotDeviceMemory) {
		t.Fatalf("freed memory: %v", err)
	}
	// RawRead: one call, at most the asked size, correct bytes.
	n, err := f.RawRead(small.Ptr(), 4096, 1, 0)
	if err != nil || n <= 0 || n > 4096 || !bytes.Equal(fromDevice(t, ctx, small.Ptr(), n), data[1:1+n]) {
		t.Fatalf("RawRead: %d, %v", n, err)
	}
	// Registration is a no-op or works, and never breaks I/O.
	if err := kvik.MemoryRegister(small.Ptr()); err != nil {
		t.Fatalf("MemoryRegister: %v", err)
	}
	if n, err := f.ReadDevice(small.Ptr(), 4096, 10, 0); n != 4096 || err != nil || !bytes.Equal(fromDevice(t, ctx, small.Ptr(), n), data[10:10+n]) {
		t.Fatalf("read into registered memory: %d, %v", n, err)
	}
	if err := kvik.MemoryDeregister(small.Ptr()); err != nil {
		t.Fatalf("MemoryDeregister: %v", err)
	}
	f.Close()
	if _, err := f.ReadDevice(small.Ptr(), 10, 0, 0); !errors.Is(err, kvik.ErrClosed) {
		t.Fatalf("closed: %v", err)
	}
}

func TestCompatAutoPrefersPOSIXWithoutGDS(t *testing.T) {
	needGPU(t)
	st := kvik.ProbeCuFile()
	if !st.Usable || st.GDS {
		t.Skipf("needs cuFile usable without nvidia-fs (usable %v, GDS %v: %s)", st.Usable, st.GDS, st.Reason)
	}
	path, _ := writeRandomFile(t, rand.New(rand.NewPCG(1, 1)), testDir(t), 100)
	f, err := kvik.Open(path, "r", 0, kvik.WithCompatMode(kvik.CompatAuto))
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	if f.CompatMode() != kvik.CompatOn || !strings.Contains(f.CompatReason(), "nvidia-fs") {
		t.Fatalf("auto without GDS: %v (%s)", f.CompatMode(), f.CompatReason())
	}
	g, err := kvik.Open(path, "r", 0, kvik.WithCompatMode(kvik.CompatOff))
	if err != nil {
		t.Fatalf("compat off must still force cuFile: %v", err)
	}
	defer g.Close()
	if g.CompatMode() != kvik.CompatOff {
		t.Fatalf("compat off resolved to %v", g.CompatMode())
	}
}
