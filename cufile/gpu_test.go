package cufile

import (
	"bytes"
	"errors"
	"math/rand"
	"os"
	"path/filepath"
	"sync"
	"syscall"
	"testing"
	"time"

	"golang.org/x/sys/unix"

	"github.com/kvikgo/kvik/cuda"
)

// The tests in this file need a GPU, libcuda and libcufile; they skip,
// saying why, where any is missing. The I/O tests also need cuFile to
// accept file handles, which it does only with the nvidia-fs driver or the
// udev data of the file's block device (/run/udev): without either they
// skip, and TestHandleRegisterRefusedWithoutUdev checks the refusal.

var gpu struct {
	once sync.Once
	ctx  cuda.Context
	skip string
	err  error
}

// needGPU returns device 0's primary context, retained once for the test
// binary, with the cuFile driver open.
func needGPU(t *testing.T) cuda.Context {
	t.Helper()
	gpu.once.Do(func() {
		if err := cuda.Init(); err != nil {
			gpu.skip = "CUDA driver not usable: " + err.Error()
			return
		}
		if n, err := cuda.DeviceGetCount(); err != nil || n == 0 {
			gpu.skip = "no CUDA device"
			return
		}
		if err := Load(); err != nil {
			gpu.skip = "libcufile not usable: " + err.Error()
			return
		}
		if m := MissingSymbols(); m != nil {
			gpu.skip = "libcufile lacks required symbols: " + fmtList(m)
			return
		}
		dev, err := cuda.DeviceGet(0)
		if err != nil {
			gpu.err = err
			return
		}
		if gpu.ctx, gpu.err = dev.PrimaryCtxRetain(); gpu.err != nil {
			return
		}
		gpu.err = cuda.WithContext(gpu.ctx, DriverOpen)
	})
	if gpu.skip != "" {
		t.Skip(gpu.skip)
	}
	if gpu.err != nil {
		t.Fatalf("GPU setup: %v", gpu.err)
	}
	return gpu.ctx
}

func fmtList(s []string) string {
	var b bytes.Buffer
	for i, x := range s {
		if i > 0 {
			b.WriteString(", ")
		}
		b.WriteString(x)
	}
	return b.String()
}

// inCtx runs f with ctx current on a locked thread; f may call t.Fatal.
func inCtx(t *testing.T, ctx cuda.Context, f func()) {
	t.Helper()
	if err := cuda.WithContext(ctx, func() error { f(); return nil }); err != nil {
		t.Fatalf("WithContext: %v", err)
	}
}

const tmpfsMagic = 0x01021994

// testDir returns a fresh directory for test files on a file system that
// cuFile can serve (not tmpfs): $KVIK_TEST_DIR if set, else the first of
// os.TempDir(), /root and the working directory that is not tmpfs.
func testDir(t *testing.T) string {
	t.Helper()
	cands := []string{os.TempDir(), "/root", "."}
	if d := os.Getenv("KVIK_TEST_DIR"); d != "" {
		cands = []string{d}
	}
	for _, d := range cands {
		var st unix.Statfs_t
		if err := unix.Statfs(d, &st); err != nil || st.Type == tmpfsMagic {
			continue
		}
		dir, err := os.MkdirTemp(d, "kvik-cufile-test-")
		if err != nil {
			continue
		}
		t.Cleanup(func() { os.RemoveAll(dir) })
		t.Logf("test files in %s (file system magic %#x)", dir, st.Type)
		return dir
	}
	t.Skipf("no directory off tmpfs among %v", cands)
	return ""
}

// randomBytes returns n pseudo-random bytes, none of them zero.
func randomBytes(n int, seed int64) []byte {
	b := make([]byte, n)
	rand.New(rand.NewSource(seed)).Read(b)
	for i := range b {
		if b[i] == 0 {
			b[i] = 0xa5
		}
	}
	return b
}

// dataFile writes size random bytes to a new file in dir and opens it for
// reading and writing.
func dataFile(t *testing.T, dir, name string, size int) (*os.File, []byte) {
	t.Helper()
	data := randomBytes(size, int64(size))
	path := filepath.Join(dir, name)
	if err := os.WriteFile(path, data, 0o644); err != nil {
		t.Fatal(err)
	}
	f, err := os.OpenFile(path, os.O_RDWR, 0)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { f.Close() })
	return f, data
}

func udevPresent() bool {
	st, err := os.Stat("/run/udev")
	return err == nil && st.IsDir()
}

// register registers f with cuFile, skipping the test where cuFile refuses
// file handles for want of /run/udev.
func register(t *testing.T, f *os.File) Handle {
	t.Helper()
	h, err := HandleRegister(int(f.Fd()))
	if err != nil {
		if errors.Is(err, ErrHandleNotRegistered) && !udevPresent() {
			t.Skipf("cuFile refuses file handles here (%v): no nvidia-fs and no /run/udev "+
				"(run the udev shim; TestHandleRegisterRefusedWithoutUdev covers this case)", err)
		}
		t.Fatalf("HandleRegister(%s): %v", f.Name(), err)
	}
	return h
}

func alloc(t *testing.T, size int) *cuda.DeviceBuffer {
	t.Helper()
	b, err := cuda.MemAlloc(size)
	if err != nil {
		t.Fatalf("MemAlloc(%d): %v", size, err)
	}
	return b
}

// deviceBytes copies n bytes at p to the host.
func deviceBytes(t *testing.T, p cuda.DevicePtr, n int) []byte {
	t.Helper()
	b := make([]byte, n)
	if err := cuda.MemcpyDtoH(b, p); err != nil {
		t.Fatalf("MemcpyDtoH: %v", err)
	}
	return b
}

// fileBytes reads n bytes at off of f with os.File.ReadAt.
func fileBytes(t *testing.T, f *os.File, off int64, n int) []byte {
	t.Helper()
	b := make([]byte, n)
	if _, err := f.ReadAt(b, off); err != nil {
		t.Fatalf("ReadAt(%d, %d): %v", off, n, err)
	}
	return b
}

func TestDriverOpenClose(t *testing.T) {
	ctx := needGPU(t)
	inCtx(t, ctx, func() {
		if err := DriverOpen(); err != nil {
			t.Fatalf("DriverOpen with the driver open: %v", err)
		}
		if err := DriverClose(); err != nil {
			t.Fatalf("DriverClose: %v", err)
		}
		if err := DriverOpen(); err != nil {
			t.Fatalf("DriverOpen after DriverClose: %v", err)
		}
		if n, err := UseCount(); err != nil {
			t.Logf("UseCount: %v", err)
		} else {
			t.Logf("UseCount = %d", n)
		}
	})
	t.Logf("libcufile: %s", LibraryPath())
}

func TestGetVersion(t *testing.T) {
	needGPU(t)
	v, err := GetVersion()
	if errors.Is(err, ErrLibraryNotFound) {
		t.Skipf("library predates cuFileGetVersion: %v", err)
	}
	if err != nil {
		t.Fatal(err)
	}
	t.Logf("cuFile version %d (%d.%d)", v, v/1000, v%1000/10)
	if v < 1080 || v >= 2000 {
		t.Errorf("version %d outside [1080, 2000)", v)
	}
}

func TestDriverGetProperties(t *testing.T) {
	ctx := needGPU(t)
	inCtx(t, ctx, func() {
		p, err := DriverGetProperties()
		if err != nil {
			t.Fatal(err)
		}
		t.Logf("properties: %+v", p)
		t.Logf("status %v; control %v; features %v; nvidia-fs %v; compat %v; poll %v",
			p.StatusFlags, p.ControlFlags, p.FeatureFlags, p.NVFSAvailable(), p.AllowCompatMode(), p.PollMode())
		if p.MaxDirectIOSizeKB <= 0 || p.MaxDirectIOSizeKB%4 != 0 {
			t.Errorf("MaxDirectIOSizeKB = %d, want a positive multiple of 4", p.MaxDirectIOSizeKB)
		}
		if p.MaxBatchIOSize == 0 || p.MaxDeviceCacheSizeKB == 0 {
			t.Errorf("MaxBatchIOSize %d, MaxDeviceCacheSizeKB %d: want both set", p.MaxBatchIOSize, p.MaxDeviceCacheSizeKB)
		}
		if !p.NVFSAvailable() && !p.AllowCompatMode() {
			t.Errorf("neither nvidia-fs nor compatibility mode: cuFile could do no I/O")
		}
	})
}

func TestHandleRegisterRefusedWithoutUdev(t *testing.T) {
	ctx := needGPU(t)
	if udevPresent() {
		t.Skip("/run/udev is present: the refusal this test checks does not apply")
	}
	dir := testDir(t)
	f, _ := dataFile(t, dir, "refused.bin", 4096)
	inCtx(t, ctx, func() {
		h, err := HandleRegister(int(f.Fd()))
		if err == nil {
			HandleDeregister(h)
			p, _ := DriverGetProperties()
			t.Skipf("cuFile registered the file without /run/udev (nvidia-fs %v)", p.NVFSAvailable())
		}
		if !errors.Is(err, ErrHandleNotRegistered) {
			t.Fatalf("HandleRegister = %v, want an error matching ErrHandleNotRegistered", err)
		}
		var e *Error
		if !errors.As(err, &e) || e.Op != ErrHandleNotRegistered {
			t.Fatalf("HandleRegister error %#v is not an *Error with Op 5027", err)
		}
		t.Logf("refused as expected: %v", err)
	})
}

func TestReadWrite(t *testing.T) {
	ctx := needGPU(t)
	dir := testDir(t)
	const fileSize = 3 << 20
	rf, _ := dataFile(t, dir, "read.bin", fileSize)
	wpath := filepath.Join(dir, "write.bin")
	wf, err := os.OpenFile(wpath, os.O_RDWR|os.O_CREATE|os.O_TRUNC, 0o644)
	if err != nil {
		t.Fatal(err)
	}
	defer wf.Close()
	sizes := []int{1, 4095, 4096, 4097, 1<<20 + 123}
	fileOffs := []int64{0, 1, 4097}
	bufOffs := []int64{5, 4099, 1}
	const bufSize = 1<<20 + 123 + 8192
	inCtx(t, ctx, func() {
		rh := register(t, rf)
		defer HandleDeregister(rh)
		wh := register(t, wf)
		defer HandleDeregister(wh)
		buf := alloc(t, bufSize)
		defer buf.Close()
		i := 0
		for _, size := range sizes {
			for _, fo := range fileOffs {
				bo := bufOffs[i%len(bufOffs)]
				i++
				if err := cuda.MemsetD8(buf.Ptr(), 0, bufSize); err != nil {
					t.Fatal(err)
				}
				n, err := Read(rh, buf.Ptr(), size, fo, bo)
				if err != nil || n != size {
					t.Fatalf("Read(size %d, file %d, buf %d) = %d, %v", size, fo, bo, n, err)
				}
				if got, want := deviceBytes(t, buf.Ptr()+cuda.DevicePtr(bo), size), fileBytes(t, rf, fo, size); !bytes.Equal(got, want) {
					t.Fatalf("Read(size %d, file %d, buf %d): data differ", size, fo, bo)
				}

				src := randomBytes(size, int64(i))
				if err := cuda.MemcpyHtoD(buf.Ptr()+cuda.DevicePtr(bo), src); err != nil {
					t.Fatal(err)
				}
				n, err = Write(wh, buf.Ptr(), size, fo, bo)
				if err != nil || n != size {
					t.Fatalf("Write(size %d, file %d, buf %d) = %d, %v", size, fo, bo, n, err)
				}
				if got := fileBytes(t, wf, fo, size); !bytes.Equal(got, src) {
					t.Fatalf("Write(size %d, file %d, buf %d): file differs", size, fo, bo)
				}
			}
		}
		t.Logf("%d read and %d write cases verified", i, i)
		n, err := Read(rh, buf.Ptr(), 100, fileSize-10, 0)
		t.Logf("Read of 100 bytes 10 before the end of the file = %d, %v", n, err)
	})
}

func TestAsync(t *testing.T) {
	ctx := needGPU(t)
	dir := testDir(t)
	rf, _ := dataFile(t, dir, "async-read.bin", 2<<20)
	wf, _ := dataFile(t, dir, "async-write.bin", 2<<20)
	type tc struct {
		size   int
		fo, bo int64
	}
	cases := []tc{{4097, 1, 0}, {1<<20 + 123, 4097, 0}, {1, 0, 0}, {4095, 12345, 0}}
	bo := int64(5)
	for i := range cases {
		cases[i].bo = bo
		bo += int64(cases[i].size) + 7
	}
	bufSize := int(bo)
	inCtx(t, ctx, func() {
		s, err := cuda.StreamCreate(0)
		if err != nil {
			t.Fatal(err)
		}
		defer cuda.StreamDestroy(s)
		if err := StreamRegister(s, 0); err != nil {
			t.Fatalf("StreamRegister: %v", err)
		}
		defer func() { // before StreamDestroy, as cufile.h asks
			if err := StreamDeregister(s); err != nil {
				t.Errorf("StreamDeregister: %v", err)
			}
		}()
		rh := register(t, rf)
		defer HandleDeregister(rh)
		wh := register(t, wf)
		defer HandleDeregister(wh)

		// run enqueues one operation per case, several in flight at once,
		// synchronises the stream and checks each result.
		run := func(what string, submit func(c tc) (*AsyncIO, error), check func(i int, c tc)) {
			t.Helper()
			ios := make([]*AsyncIO, len(cases))
			for i, c := range cases {
				if ios[i], err = submit(c); err != nil {
					t.Fatalf("%s %+v: %v", what, c, err)
				}
			}
			if err := cuda.StreamSynchronize(s); err != nil {
				t.Fatal(err)
			}
			for i, c := range cases {
				n, err := ios[i].BytesDone()
				ios[i].Close()
				if err != nil || n != c.size {
					t.Fatalf("%s %+v: BytesDone = %d, %v", what, c, n, err)
				}
				check(i, c)
			}
		}
		// Written ranges must not overlap: the buffer offsets do not.
		writeOff := func(_ int, c tc) int64 { return c.bo + 1 }

		for _, registered := range []bool{false, true} {
			buf := alloc(t, bufSize)
			defer buf.Close()
			if err := cuda.MemsetD8(buf.Ptr(), 0, bufSize); err != nil {
				t.Fatal(err)
			}
			// An unregistered buffer takes the place in the pointer (see
			// ReadAsync); a registered one in the buffer offset.
			at := func(c tc) (cuda.DevicePtr, int64) { return buf.Ptr() + cuda.DevicePtr(c.bo), 0 }
			if registered {
				if err := BufRegister(buf.Ptr(), bufSize, 0); err != nil {
					t.Fatalf("BufRegister: %v", err)
				}
				at = func(c tc) (cuda.DevicePtr, int64) { return buf.Ptr(), c.bo }
			}
			what := map[bool]string{false: "unregistered", true: "registered"}[registered]

			run("ReadAsync, "+what, func(c tc) (*AsyncIO, error) {
				p, off := at(c)
				return ReadAsync(rh, p, c.size, c.fo, off, s)
			}, func(_ int, c tc) {
				if !bytes.Equal(deviceBytes(t, buf.Ptr()+cuda.DevicePtr(c.bo), c.size), fileBytes(t, rf, c.fo, c.size)) {
					t.Fatalf("ReadAsync, %s %+v: data differ", what, c)
				}
			})

			srcs := make([][]byte, len(cases))
			for i, c := range cases {
				srcs[i] = randomBytes(c.size, int64(100+i))
				if registered {
					srcs[i][0] ^= 0xff // differ from the first round
				}
				if err := cuda.MemcpyHtoD(buf.Ptr()+cuda.DevicePtr(c.bo), srcs[i]); err != nil {
					t.Fatal(err)
				}
			}
			i := 0
			run("WriteAsync, "+what, func(c tc) (*AsyncIO, error) {
				p, off := at(c)
				a, err := WriteAsync(wh, p, c.size, writeOff(i, c), off, s)
				i++
				return a, err
			}, func(i int, c tc) {
				if !bytes.Equal(fileBytes(t, wf, writeOff(i, c), c.size), srcs[i]) {
					t.Fatalf("WriteAsync, %s %+v: file differs", what, c)
				}
			})
			if registered {
				if err := BufDeregister(buf.Ptr()); err != nil {
					t.Errorf("BufDeregister: %v", err)
				}
			}
		}
	})
}

// TestIOErrorDecoding provokes failing reads and writes and checks that
// they come back as *Error values with a cause.
func TestIOErrorDecoding(t *testing.T) {
	ctx := needGPU(t)
	dir := testDir(t)
	dataFile(t, dir, "ro.bin", 1<<16)
	ro, err := os.Open(filepath.Join(dir, "ro.bin"))
	if err != nil {
		t.Fatal(err)
	}
	defer ro.Close()
	wo, err := os.OpenFile(filepath.Join(dir, "ro.bin"), os.O_WRONLY, 0)
	if err != nil {
		t.Fatal(err)
	}
	defer wo.Close()
	inCtx(t, ctx, func() {
		rh := register(t, ro)
		defer HandleDeregister(rh)
		wh, werr := HandleRegister(int(wo.Fd()))
		if werr != nil {
			t.Logf("HandleRegister of a write-only descriptor: %v", werr)
		} else {
			defer HandleDeregister(wh)
		}
		buf := alloc(t, 1<<16)
		defer buf.Close()
		for _, tc := range []struct {
			what string
			h    Handle
			call func(h Handle) (int, error)
		}{
			{"Write to a read-only descriptor", rh, func(h Handle) (int, error) { return Write(h, buf.Ptr(), 4096, 0, 0) }},
			{"Read from a write-only descriptor", wh, func(h Handle) (int, error) { return Read(h, buf.Ptr(), 4096, 0, 0) }},
		} {
			if tc.h == 0 {
				continue
			}
			n, err := tc.call(tc.h)
			t.Logf("%s = %d, %v", tc.what, n, err)
			var e *Error
			if !errors.As(err, &e) {
				t.Errorf("%s: error %#v is not an *Error", tc.what, err)
				continue
			}
			if e.Op == Success && e.Errno == 0 {
				t.Errorf("%s: no cause (%+v)", tc.what, *e)
			}
		}
		// The raw results behind the decoding.
		ret, errno, err := callSSize(fnWrite, uintptr(rh), uintptr(buf.Ptr()), 4096, 0, 0)
		t.Logf("raw cuFileWrite to a read-only descriptor: ret %d, errno %d, %v", ret, int(errno), err)
		if wh != 0 {
			ret, errno, err = callSSize(fnRead, uintptr(wh), uintptr(buf.Ptr()), 4096, 0, 0)
			t.Logf("raw cuFileRead from a write-only descriptor: ret %d, errno %d, %v", ret, int(errno), err)
			// cuFile 1.15 returns -1 with errno 5019 here.
			if _, err := Read(wh, buf.Ptr(), 4096, 0, 0); ret == -1 && errno == syscall.Errno(ErrInvalidFileOpenFlag) &&
				!errors.Is(err, ErrInvalidFileOpenFlag) {
				t.Errorf("Read from a write-only descriptor = %v, want ErrInvalidFileOpenFlag", err)
			}
		}
	})
}

func TestBatchRead(t *testing.T) {
	ctx := needGPU(t)
	dir := testDir(t)
	const entries = 16
	const chunk = 64<<10 + 13
	f, _ := dataFile(t, dir, "batch.bin", entries*chunk+4096)
	inCtx(t, ctx, func() {
		p, err := DriverGetProperties()
		if err != nil {
			t.Fatal(err)
		}
		if p.MaxBatchIOSize < entries {
			t.Skipf("MaxBatchIOSize %d < %d", p.MaxBatchIOSize, entries)
		}
		h := register(t, f)
		defer HandleDeregister(h)
		bufSize := entries * (chunk + 7)
		buf := alloc(t, bufSize)
		defer buf.Close()
		if err := cuda.MemsetD8(buf.Ptr(), 0, bufSize); err != nil {
			t.Fatal(err)
		}
		b, err := BatchIOSetUp(entries)
		if err != nil {
			t.Fatalf("BatchIOSetUp: %v", err)
		}
		defer BatchIODestroy(b)
		params := make([]IOParams, entries)
		for i := range params {
			params[i] = IOParams{
				Handle:     h,
				Buf:        buf.Ptr(),
				FileOffset: int64(i*chunk + 1),
				BufOffset:  int64(i * (chunk + 7)),
				Size:       chunk,
				Opcode:     BatchRead,
				Cookie:     uintptr(i + 1),
			}
		}
		if err := BatchIOSubmit(b, params, 0); err != nil {
			t.Fatalf("BatchIOSubmit: %v", err)
		}
		done := map[uintptr]IOEvent{}
		events := make([]IOEvent, entries)
		polls := 0
		for deadline := time.Now().Add(60 * time.Second); len(done) < entries && time.Now().Before(deadline); polls++ {
			n, err := BatchIOGetStatus(b, 1, events, time.Second)
			if err != nil {
				t.Fatalf("BatchIOGetStatus: %v", err)
			}
			for _, ev := range events[:n] {
				if ev.Status.Done() {
					done[ev.Cookie] = ev
				}
			}
		}
		t.Logf("%d entries done after %d polls", len(done), polls)
		t.Logf("BatchIOCancel after completion: %v", BatchIOCancel(b))
		if len(done) < entries {
			t.Fatalf("only %d of %d entries done", len(done), entries)
		}
		for i, pr := range params {
			ev, ok := done[pr.Cookie]
			if !ok || ev.Status != Complete || ev.Ret != chunk {
				t.Fatalf("entry %d: event %+v (found %v)", i, ev, ok)
			}
			if !bytes.Equal(deviceBytes(t, buf.Ptr()+cuda.DevicePtr(pr.BufOffset), chunk), fileBytes(t, f, pr.FileOffset, chunk)) {
				t.Fatalf("entry %d: data differ", i)
			}
		}
	})
}

func TestBufRegister(t *testing.T) {
	ctx := needGPU(t)
	dir := testDir(t)
	f, _ := dataFile(t, dir, "bufreg.bin", 1<<20)
	const size = 65536 + 3
	inCtx(t, ctx, func() {
		h := register(t, f)
		defer HandleDeregister(h)
		const bufSize = 2 << 20
		buf := alloc(t, bufSize)
		defer buf.Close()
		if err := cuda.MemsetD8(buf.Ptr(), 0, bufSize); err != nil {
			t.Fatal(err)
		}
		if err := BufRegister(buf.Ptr(), bufSize, 0); err != nil {
			t.Fatalf("BufRegister: %v", err)
		}
		err := BufRegister(buf.Ptr(), bufSize, 0)
		t.Logf("second BufRegister of the same buffer: %v", err)
		n, err := Read(h, buf.Ptr(), size, 4097, 4096)
		if err != nil || n != size {
			t.Fatalf("Read into registered buffer = %d, %v", n, err)
		}
		if !bytes.Equal(deviceBytes(t, buf.Ptr()+4096, size), fileBytes(t, f, 4097, size)) {
			t.Fatal("Read into registered buffer: data differ")
		}
		if err := BufDeregister(buf.Ptr()); err != nil {
			t.Fatalf("BufDeregister: %v", err)
		}
		err = BufDeregister(buf.Ptr())
		t.Logf("BufDeregister of a buffer no longer registered: %v", err)
		var e *Error
		if err != nil && !errors.As(err, &e) {
			t.Errorf("BufDeregister error %#v is not an *Error", err)
		}
	})
}

func TestParameters(t *testing.T) {
	ctx := needGPU(t)
	inCtx(t, ctx, func() {
		v, err := GetParameterSizeT(ParamPropertiesMaxDirectIOSizeKB)
		if errors.Is(err, ErrLibraryNotFound) {
			t.Skipf("no parameter API: %v", err)
		}
		if err != nil {
			t.Fatalf("GetParameterSizeT: %v", err)
		}
		p, err := DriverGetProperties()
		if err != nil {
			t.Fatal(err)
		}
		if int64(v) != p.MaxDirectIOSizeKB {
			t.Errorf("max direct I/O size: parameter %d KB, properties %d KB", v, p.MaxDirectIOSizeKB)
		}
		compat, err := GetParameterBool(ParamPropertiesAllowCompatMode)
		if err != nil || compat != p.AllowCompatMode() {
			t.Errorf("GetParameterBool(allow compat) = %v, %v; properties say %v", compat, err, p.AllowCompatMode())
		}
		for sp := ParamProfileStats; sp <= ParamPropertiesBatchIOTimeoutMs; sp++ {
			v, err := GetParameterSizeT(sp)
			lo, hi, rerr := GetParameterMinMaxValue(sp)
			t.Logf("%v = %d (%v), range [%d, %d] (%v)", sp, v, err, lo, hi, rerr)
		}
		for bp := ParamPropertiesUsePollMode; bp <= ParamStreamMemopsBypass; bp++ {
			v, err := GetParameterBool(bp)
			t.Logf("%v = %v (%v)", bp, v, err)
		}
		for sp := ParamLoggingLevel; sp <= ParamLogDir; sp++ {
			v, err := GetParameterString(sp)
			t.Logf("%v = %q (%v)", sp, v, err)
		}
		err = SetParameterSizeT(ParamPropertiesMaxDirectIOSizeKB, v)
		if !errors.Is(err, ErrDriverAlreadyOpen) {
			t.Errorf("SetParameterSizeT with the driver open = %v, want ErrDriverAlreadyOpen", err)
		}
		bar, err := GetBARSizeInKB(0)
		t.Logf("GetBARSizeInKB(0) = %d, %v", bar, err)
	})
}

func TestStats(t *testing.T) {
	ctx := needGPU(t)
	dir := testDir(t)
	f, _ := dataFile(t, dir, "stats.bin", 1<<20)
	inCtx(t, ctx, func() {
		if err := SetStatsLevel(1); errors.Is(err, ErrLibraryNotFound) {
			t.Skipf("no statistics API: %v", err)
		} else if err != nil {
			t.Fatalf("SetStatsLevel(1): %v", err)
		}
		if l, err := GetStatsLevel(); err != nil || l != 1 {
			t.Errorf("GetStatsLevel = %d, %v", l, err)
		}
		if err := StatsStart(); err != nil {
			t.Fatalf("StatsStart: %v", err)
		}
		defer StatsStop()
		if err := StatsReset(); err != nil {
			t.Fatalf("StatsReset: %v", err)
		}
		h := register(t, f)
		defer HandleDeregister(h)
		buf := alloc(t, 1<<20)
		defer buf.Close()
		if n, err := Read(h, buf.Ptr(), 1<<20, 0, 0); err != nil || n != 1<<20 {
			t.Fatalf("Read = %d, %v", n, err)
		}
		s, err := GetStatsL1()
		if err != nil {
			t.Fatalf("GetStatsL1: %v", err)
		}
		t.Logf("stats: %+v", s)
		if s.ReadOps.OK < 1 || s.ReadBytes < 1<<20 {
			t.Errorf("stats after a 1 MiB read: %d reads, %d bytes", s.ReadOps.OK, s.ReadBytes)
		}
	})
}

// TestSetParametersWhileClosed closes the driver completely (UseCount 0),
// stages parameters and reads them back, then reopens it.
func TestSetParametersWhileClosed(t *testing.T) {
	ctx := needGPU(t)
	inCtx(t, ctx, func() {
		orig, err := GetParameterSizeT(ParamPropertiesMaxDirectIOSizeKB)
		if errors.Is(err, ErrLibraryNotFound) {
			t.Skipf("no parameter API: %v", err)
		}
		if err != nil {
			t.Fatal(err)
		}
		// cuFile counts opens (UseCount): close until none is left.
		closeAll := func() {
			t.Helper()
			for i := 0; i < 16; i++ {
				n, err := UseCount()
				if err != nil {
					t.Fatalf("UseCount: %v", err)
				}
				if n == 0 {
					return
				}
				if err := DriverClose(); err != nil {
					t.Fatalf("DriverClose with use count %d: %v", n, err)
				}
			}
			t.Fatal("driver still in use after 16 DriverClose calls")
		}
		n, _ := UseCount()
		closeAll()
		t.Logf("closed the driver from use count %d", n)
		defer func() {
			closeAll()
			if err := SetParameterSizeT(ParamPropertiesMaxDirectIOSizeKB, orig); err != nil {
				t.Errorf("restoring: %v", err)
			}
			if err := DriverOpen(); err != nil {
				t.Errorf("DriverOpen: %v", err)
			}
		}()
		want := orig / 2
		if err := SetParameterSizeT(ParamPropertiesMaxDirectIOSizeKB, want); err != nil {
			t.Fatalf("SetParameterSizeT with the driver closed: %v", err)
		}
		if v, err := GetParameterSizeT(ParamPropertiesMaxDirectIOSizeKB); err != nil || v != want {
			t.Errorf("staged value = %d, %v; want %d", v, err, want)
		}
		if err := SetParameterBool(ParamPropertiesUsePollMode, false); err != nil {
			t.Errorf("SetParameterBool: %v", err)
		}
		if err := SetParameterString(ParamLoggingLevel, "ERROR"); err != nil {
			t.Errorf("SetParameterString: %v", err)
		}
		if v, err := GetParameterString(ParamLoggingLevel); err != nil || v != "ERROR" {
			t.Errorf("staged logging level = %q, %v", v, err)
		}
		if err := DriverOpen(); err != nil {
			t.Fatalf("DriverOpen: %v", err)
		}
		p, err := DriverGetProperties()
		if err != nil {
			t.Fatal(err)
		}
		// cuFile 1.15 leaves the property at its configured value here (seen
		// on an H200 in compatibility mode): log, do not insist.
		v, err := GetParameterSizeT(ParamPropertiesMaxDirectIOSizeKB)
		t.Logf("after DriverOpen with %d KB staged: property %d KB, parameter %d KB (%v)",
			want, p.MaxDirectIOSizeKB, v, err)
	})
}
