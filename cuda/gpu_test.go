package cuda_test

import (
	"bytes"
	"errors"
	"fmt"
	"math/rand"
	"runtime"
	"strings"
	"sync"
	"testing"
	"unsafe"

	"golang.org/x/sys/unix"

	"github.com/kvikgo/kvik/cuda"
)

func TestDevice(t *testing.T) {
	needGPU(t)
	v, err := cuda.DriverGetVersion()
	if err != nil || v < 1000 {
		t.Errorf("DriverGetVersion() = %d, %v", v, err)
	}
	n, err := cuda.DeviceGetCount()
	if err != nil || n < 1 {
		t.Fatalf("DeviceGetCount() = %d, %v", n, err)
	}
	t.Logf("driver %d.%d, %d device(s), library %s", v/1000, v%1000/10, n, cuda.LibraryPath())
	if _, err := cuda.DeviceGet(n); !errors.Is(err, cuda.ErrorInvalidDevice) {
		t.Errorf("DeviceGet(%d) error = %v, want ErrorInvalidDevice", n, err)
	}
	for i := range n {
		d, err := cuda.DeviceGet(i)
		if err != nil {
			t.Fatalf("DeviceGet(%d): %v", i, err)
		}
		name, err := d.Name()
		if err != nil || name == "" {
			t.Errorf("Name() = %q, %v", name, err)
		}
		mem, err := d.TotalMem()
		if err != nil || mem < 1<<30 {
			t.Errorf("TotalMem() = %d, %v", mem, err)
		}
		attr := func(a cuda.DeviceAttribute) int {
			t.Helper()
			v, err := d.Attribute(a)
			if err != nil {
				t.Errorf("Attribute(%d): %v", a, err)
			}
			return v
		}
		major, minor := attr(cuda.DeviceAttributeComputeCapabilityMajor), attr(cuda.DeviceAttributeComputeCapabilityMinor)
		sms := attr(cuda.DeviceAttributeMultiprocessorCount)
		domain, bus, dev := attr(cuda.DeviceAttributePCIDomainID), attr(cuda.DeviceAttributePCIBusID), attr(cuda.DeviceAttributePCIDeviceID)
		if major < 3 || minor < 0 || sms < 1 {
			t.Errorf("compute capability %d.%d, %d SMs", major, minor, sms)
		}
		if ua := attr(cuda.DeviceAttributeUnifiedAddressing); ua != 1 {
			t.Errorf("unified addressing = %d, want 1", ua)
		}
		hp := attr(cuda.DeviceAttributeCanUseHostPointerForRegisteredMem)
		rdma := attr(cuda.DeviceAttributeGPUDirectRDMASupported)
		pci, err := d.PCIBusID()
		if err != nil {
			t.Errorf("PCIBusID(): %v", err)
		}
		if want := fmt.Sprintf("%04x:%02x:%02x.", domain, bus, dev); !strings.HasPrefix(strings.ToLower(pci), want) {
			t.Errorf("PCIBusID() = %q, want prefix %q from the attributes", pci, want)
		}
		t.Logf("device %d: %s, %d MiB, sm_%d%d, %d SMs, PCI %s, host-pointer-for-registered %d, GPUDirect RDMA %d",
			i, name, mem>>20, major, minor, sms, pci, hp, rdma)
	}
}

func TestMemRoundTrip(t *testing.T) {
	ctx := needGPU(t)
	r := rand.New(rand.NewSource(1))
	const n = 1<<20 + 13
	inCtx(t, ctx, func() {
		free, total, err := cuda.MemGetInfo()
		if err != nil || total <= 0 || free <= 0 || free > total {
			t.Fatalf("MemGetInfo() = %d, %d, %v", free, total, err)
		}
		a, err := cuda.MemAlloc(n)
		if err != nil {
			t.Fatal(err)
		}
		defer a.Close()
		b, err := cuda.MemAlloc(n)
		if err != nil {
			t.Fatal(err)
		}
		defer b.Close()
		if a.Size() != n || a.Ptr() == 0 || a.Context() != ctx {
			t.Errorf("buffer: size %d ptr %#x ctx %#x, want %d, non-zero, %#x", a.Size(), a.Ptr(), a.Context(), n, ctx)
		}
		src := randomBytes(r, n)
		if err := cuda.MemcpyHtoD(a.Ptr(), src); err != nil {
			t.Fatal("MemcpyHtoD:", err)
		}
		if err := cuda.MemcpyDtoD(b.Ptr(), a.Ptr(), n); err != nil {
			t.Fatal("MemcpyDtoD:", err)
		}
		dst := make([]byte, n)
		if err := cuda.MemcpyDtoH(dst, b.Ptr()); err != nil {
			t.Fatal("MemcpyDtoH:", err)
		}
		if !bytes.Equal(src, dst) {
			t.Fatal("data differs after HtoD, DtoD, DtoH")
		}
		// A copy at an offset, of an odd length.
		if err := cuda.MemcpyDtoH(dst[:1001], a.Ptr()+7); err != nil {
			t.Fatal(err)
		}
		if !bytes.Equal(dst[:1001], src[7:1008]) {
			t.Fatal("offset copy differs")
		}
		if err := cuda.MemsetD8(b.Ptr()+100, 0xa5, 5000); err != nil {
			t.Fatal("MemsetD8:", err)
		}
		if err := cuda.CtxSynchronize(); err != nil {
			t.Fatal(err)
		}
		if err := cuda.MemcpyDtoH(dst, b.Ptr()); err != nil {
			t.Fatal(err)
		}
		want := append([]byte(nil), src...)
		for i := 100; i < 5100; i++ {
			want[i] = 0xa5
		}
		if !bytes.Equal(dst, want) {
			t.Fatal("MemsetD8 result differs")
		}
		if free2, _, _ := cuda.MemGetInfo(); free2 >= free {
			t.Logf("free memory did not drop after allocating (%d -> %d)", free, free2)
		}
	})
}

func TestAsyncCopy(t *testing.T) {
	ctx := needGPU(t)
	r := rand.New(rand.NewSource(2))
	const n = 4<<20 + 3
	inCtx(t, ctx, func() {
		s, err := cuda.StreamCreate(cuda.StreamNonBlocking)
		if err != nil {
			t.Fatal("StreamCreate:", err)
		}
		defer func() {
			if err := cuda.StreamDestroy(s); err != nil {
				t.Error("StreamDestroy:", err)
			}
		}()
		src, err := cuda.MemHostAlloc(n, 0)
		if err != nil {
			t.Fatal("MemHostAlloc:", err)
		}
		defer src.Close()
		dst, err := cuda.MemHostAlloc(n, cuda.MemHostAllocPortable)
		if err != nil {
			t.Fatal("MemHostAlloc:", err)
		}
		defer dst.Close()
		if src.Len() != n || len(src.Bytes()) != n {
			t.Fatalf("Len %d, len(Bytes) %d, want %d", src.Len(), len(src.Bytes()), n)
		}
		copy(src.Bytes(), randomBytes(r, n))
		clear(dst.Bytes())
		d, err := cuda.MemAlloc(n)
		if err != nil {
			t.Fatal(err)
		}
		defer d.Close()
		if err := cuda.MemcpyHtoDAsync(d.Ptr(), src.Bytes(), s); err != nil {
			t.Fatal("MemcpyHtoDAsync:", err)
		}
		if err := cuda.MemcpyDtoHAsync(dst.Bytes(), d.Ptr(), s); err != nil {
			t.Fatal("MemcpyDtoHAsync:", err)
		}
		if err := cuda.StreamSynchronize(s); err != nil {
			t.Fatal("StreamSynchronize:", err)
		}
		if err := cuda.StreamQuery(s); err != nil {
			t.Errorf("StreamQuery after synchronising = %v", err)
		}
		if !bytes.Equal(src.Bytes(), dst.Bytes()) {
			t.Fatal("async round trip differs")
		}
		// The per-thread default stream works as a Stream too.
		if err := cuda.MemcpyDtoHAsync(dst.Bytes()[:10], d.Ptr(), cuda.StreamPerThread); err != nil {
			t.Fatal(err)
		}
		if err := cuda.StreamSynchronize(cuda.StreamPerThread); err != nil {
			t.Fatal(err)
		}
	})
}

func TestPointerAttributes(t *testing.T) {
	ctx := needGPU(t)
	inCtx(t, ctx, func() {
		const n = 3<<20 + 5
		d, err := cuda.MemAlloc(n)
		if err != nil {
			t.Fatal(err)
		}
		defer d.Close()
		a, err := cuda.PointerGetAttributes(uintptr(d.Ptr() + 1000))
		if err != nil {
			t.Fatal("PointerGetAttributes(device):", err)
		}
		t.Logf("device: %+v", a)
		if a.MemoryType != cuda.MemoryTypeDevice || a.DeviceOrdinal != 0 || a.Context != ctx ||
			a.RangeStart != d.Ptr() || a.RangeSize != n || a.DevicePointer != d.Ptr()+1000 || a.IsManaged {
			t.Errorf("device attributes %+v, want type device, ordinal 0, ctx %#x, range %#x+%d", a, ctx, d.Ptr(), n)
		}
		if v, err := cuda.PointerGetAttribute(cuda.PointerAttributeMemoryType, uintptr(d.Ptr())); err != nil || cuda.MemoryType(v) != cuda.MemoryTypeDevice {
			t.Errorf("PointerGetAttribute(MemoryType) = %d, %v", v, err)
		}
		if v, err := cuda.PointerGetAttribute(cuda.PointerAttributeRangeSize, uintptr(d.Ptr())); err != nil || v != n {
			t.Errorf("PointerGetAttribute(RangeSize) = %d, %v", v, err)
		}
		base, size, err := cuda.MemGetAddressRange(d.Ptr() + 12345)
		if err != nil || base != d.Ptr() || size != n {
			t.Errorf("MemGetAddressRange = %#x, %d, %v; want %#x, %d", base, size, err, d.Ptr(), n)
		}

		h, err := cuda.MemHostAlloc(1<<16, 0)
		if err != nil {
			t.Fatal(err)
		}
		defer h.Close()
		hp := uintptr(unsafe.Pointer(&h.Bytes()[0]))
		a, err = cuda.PointerGetAttributes(hp)
		if err != nil {
			t.Fatal("PointerGetAttributes(pinned):", err)
		}
		t.Logf("pinned: %+v", a)
		if a.MemoryType != cuda.MemoryTypeHost || a.HostPointer != hp || a.Context != ctx {
			t.Errorf("pinned attributes %+v, want type host, host pointer %#x", a, hp)
		}

		g := make([]byte, 1<<16)
		a, err = cuda.PointerGetAttributes(uintptr(unsafe.Pointer(&g[0])))
		if err != nil {
			t.Fatal("PointerGetAttributes(pageable):", err)
		}
		t.Logf("pageable: %+v", a)
		if a.MemoryType != 0 || a.Context != 0 || a.RangeSize != 0 {
			t.Errorf("pageable attributes %+v, want memory type 0", a)
		}
		runtime.KeepAlive(g)
		_, err = cuda.PointerGetAttribute(cuda.PointerAttributeMemoryType, uintptr(unsafe.Pointer(&g[0])))
		t.Logf("PointerGetAttribute(pageable) error: %v", err)
	})
}

func TestMemHostRegister(t *testing.T) {
	ctx := needGPU(t)
	const n = 1 << 20
	m, err := unix.Mmap(-1, 0, n, unix.PROT_READ|unix.PROT_WRITE, unix.MAP_ANON|unix.MAP_PRIVATE)
	if err != nil {
		t.Fatal(err)
	}
	defer unix.Munmap(m)
	r := rand.New(rand.NewSource(3))
	copy(m, randomBytes(r, n))
	inCtx(t, ctx, func() {
		p := uintptr(unsafe.Pointer(&m[0]))
		if a, err := cuda.PointerGetAttributes(p); err != nil || a.MemoryType != 0 {
			t.Errorf("before registering: %+v, %v", a, err)
		}
		if err := cuda.MemHostRegister(m, cuda.MemHostRegisterPortable); err != nil {
			t.Fatal("MemHostRegister:", err)
		}
		registered := true
		defer func() {
			if registered {
				cuda.MemHostUnregister(m)
			}
		}()
		a, err := cuda.PointerGetAttributes(p + 100)
		if err != nil {
			t.Fatal(err)
		}
		t.Logf("registered: %+v", a)
		if a.MemoryType != cuda.MemoryTypeHost || a.HostPointer != p+100 || a.RangeStart != cuda.DevicePtr(p) || a.RangeSize != n {
			t.Errorf("registered attributes %+v, want type host at %#x, range %#x+%d", a, p+100, p, n)
		}
		if err := cuda.MemHostRegister(m, 0); !errors.Is(err, cuda.ErrorHostMemoryAlreadyRegistered) {
			t.Errorf("registering twice: %v, want ErrorHostMemoryAlreadyRegistered", err)
		}
		// Registered memory takes part in asynchronous copies.
		d, err := cuda.MemAlloc(n)
		if err != nil {
			t.Fatal(err)
		}
		defer d.Close()
		s, err := cuda.StreamCreate(cuda.StreamNonBlocking)
		if err != nil {
			t.Fatal(err)
		}
		defer cuda.StreamDestroy(s)
		if err := cuda.MemcpyHtoDAsync(d.Ptr(), m, s); err != nil {
			t.Fatal(err)
		}
		if err := cuda.StreamSynchronize(s); err != nil {
			t.Fatal(err)
		}
		back := make([]byte, n)
		if err := cuda.MemcpyDtoH(back, d.Ptr()); err != nil {
			t.Fatal(err)
		}
		if !bytes.Equal(back, m) {
			t.Error("copy from registered memory differs")
		}
		if err := cuda.MemHostUnregister(m); err != nil {
			t.Fatal("MemHostUnregister:", err)
		}
		registered = false
		if err := cuda.MemHostUnregister(m); !errors.Is(err, cuda.ErrorHostMemoryNotRegistered) {
			t.Errorf("unregistering twice: %v, want ErrorHostMemoryNotRegistered", err)
		}
		if a, err := cuda.PointerGetAttributes(p); err != nil || a.MemoryType != 0 {
			t.Errorf("after unregistering: %+v, %v", a, err)
		}
	})
}

func TestCtxCreate(t *testing.T) {
	primary := needGPU(t)
	dev, err := cuda.DeviceGet(0)
	if err != nil {
		t.Fatal(err)
	}
	// CtxCreate makes the new context current on this thread: stay on it
	// until it is popped.
	runtime.LockOSThread()
	c, err := cuda.CtxCreate(cuda.CtxSchedAuto, dev)
	if err != nil {
		runtime.UnlockOSThread()
		t.Fatal("CtxCreate:", err)
	}
	if cur, err := cuda.CtxGetCurrent(); err != nil || cur != c {
		t.Errorf("CtxGetCurrent after CtxCreate = %#x, %v; want %#x", cur, err, c)
	}
	if c == primary {
		t.Error("CtxCreate returned the primary context")
	}
	buf, err := cuda.MemAlloc(1 << 20)
	if err != nil {
		t.Error("MemAlloc in created context:", err)
	}
	popped, err := cuda.CtxPopCurrent()
	runtime.UnlockOSThread()
	if err != nil || popped != c {
		t.Fatalf("CtxPopCurrent = %#x, %v; want %#x", popped, err, c)
	}
	defer func() {
		if err := cuda.CtxDestroy(c); err != nil {
			t.Error("CtxDestroy:", err)
		}
	}()
	if buf == nil {
		return
	}
	if buf.Context() != c {
		t.Errorf("buffer context %#x, want %#x", buf.Context(), c)
	}

	// Use the context from other goroutines.
	var wg sync.WaitGroup
	errs := make(chan error, 8)
	for i := range 8 {
		wg.Go(func() {
			errs <- cuda.WithContext(c, func() error {
				cur, err := cuda.CtxGetCurrent()
				if err != nil || cur != c {
					return fmt.Errorf("current %#x, %v", cur, err)
				}
				if d, err := cuda.CtxGetDevice(); err != nil || d != dev {
					return fmt.Errorf("CtxGetDevice = %d, %v", d, err)
				}
				base, size, err := cuda.MemGetAddressRange(buf.Ptr() + cuda.DevicePtr(i*1000))
				if err != nil || base != buf.Ptr() || size != buf.Size() {
					return fmt.Errorf("MemGetAddressRange = %#x, %d, %v", base, size, err)
				}
				a, err := cuda.PointerGetAttributes(uintptr(buf.Ptr()))
				if err != nil || a.Context != c {
					return fmt.Errorf("pointer context %#x, %v; want %#x", a.Context, err, c)
				}
				return cuda.MemsetD8(buf.Ptr()+cuda.DevicePtr(i), byte(i), 1)
			})
		})
	}
	wg.Wait()
	close(errs)
	for err := range errs {
		if err != nil {
			t.Error(err)
		}
	}
	got := make([]byte, 8)
	if err := cuda.WithContext(c, func() error { return cuda.MemcpyDtoH(got, buf.Ptr()) }); err != nil {
		t.Fatal(err)
	}
	if !bytes.Equal(got, []byte{0, 1, 2, 3, 4, 5, 6, 7}) {
		t.Errorf("memset from goroutines gave %v", got)
	}
	// Close from a goroutine with no context current: Close pushes its own.
	done := make(chan error, 2)
	go func() { done <- buf.Close(); done <- buf.Close() }()
	if err := <-done; err != nil {
		t.Error("Close:", err)
	}
	if err := <-done; err != nil {
		t.Error("second Close:", err)
	}
}

func TestCloseTwice(t *testing.T) {
	ctx := needGPU(t)
	var d *cuda.DeviceBuffer
	var h *cuda.HostBuffer
	inCtx(t, ctx, func() {
		var err error
		if d, err = cuda.MemAlloc(4096); err != nil {
			t.Fatal(err)
		}
		if h, err = cuda.MemHostAlloc(4096, 0); err != nil {
			d.Close()
			t.Fatal(err)
		}
	})
	for i := range 2 {
		if err := d.Close(); err != nil {
			t.Errorf("DeviceBuffer.Close #%d: %v", i+1, err)
		}
		if err := h.Close(); err != nil {
			t.Errorf("HostBuffer.Close #%d: %v", i+1, err)
		}
	}
	if h.Bytes() != nil {
		t.Error("Bytes() after Close is not nil")
	}
}

func TestNoCurrentContext(t *testing.T) {
	needGPU(t)
	runtime.LockOSThread()
	defer runtime.UnlockOSThread()
	if c, err := cuda.CtxGetCurrent(); err != nil || c != 0 {
		t.Skipf("this thread has context %#x current (%v)", c, err)
	}
	if _, err := cuda.MemAlloc(1024); !errors.Is(err, cuda.ErrorInvalidContext) {
		t.Errorf("MemAlloc without a context: %v, want ErrorInvalidContext", err)
	}
	if _, err := cuda.CtxPopCurrent(); err == nil {
		t.Error("CtxPopCurrent with an empty stack succeeded")
	}
}

func TestWithContext(t *testing.T) {
	ctx := needGPU(t)
	runtime.LockOSThread()
	defer runtime.UnlockOSThread()
	before, err := cuda.CtxGetCurrent()
	if err != nil {
		t.Fatal(err)
	}
	// f's error comes back.
	sentinel := errors.New("sentinel")
	if err := cuda.WithContext(ctx, func() error { return sentinel }); err != sentinel {
		t.Errorf("WithContext returned %v, want f's error", err)
	}
	// Nested use, with the context already current.
	err = cuda.WithContext(ctx, func() error {
		return cuda.WithContext(ctx, func() error {
			c, err := cuda.CtxGetCurrent()
			if err == nil && c != ctx {
				err = fmt.Errorf("current %#x, want %#x", c, ctx)
			}
			return err
		})
	})
	if err != nil {
		t.Error("nested:", err)
	}
	// A panic in f still pops the context.
	func() {
		defer func() {
			if r := recover(); r != "boom" {
				t.Errorf("recovered %v, want boom", r)
			}
		}()
		cuda.WithContext(ctx, func() error { panic("boom") })
	}()
	if after, err := cuda.CtxGetCurrent(); err != nil || after != before {
		t.Errorf("current context after WithContext = %#x, %v; want %#x", after, err, before)
	}
	// What the driver makes of pushing a null context is up to it; f must
	// run exactly when the push succeeded.
	ran := false
	err = cuda.WithContext(0, func() error { ran = true; return nil })
	if (err == nil) != ran {
		t.Errorf("WithContext(0) = %v, but f ran: %v", err, ran)
	}
	t.Logf("WithContext(0): %v", err)
}

func TestDriverErrorText(t *testing.T) {
	needGPU(t)
	// With the driver loaded, the text comes from cuGetErrorName/String.
	got := cuda.ErrorOutOfMemory.Error()
	if !strings.HasPrefix(got, "CUDA_ERROR_OUT_OF_MEMORY (2): ") {
		t.Errorf("Error() = %q", got)
	}
	t.Logf("%s | %s", got, cuda.Result(123456).Error())
}

// TestEvents waits for copies through events of each kind: a blocking-sync
// event recorded after a round trip lets the host read the result, and an
// event recorded on an idle stream is complete at once.
func TestEvents(t *testing.T) {
	ctx := needGPU(t)
	r := rand.New(rand.NewSource(5))
	inCtx(t, ctx, func() {
		s, err := cuda.StreamCreate(cuda.StreamNonBlocking)
		if err != nil {
			t.Fatal("StreamCreate:", err)
		}
		defer cuda.StreamDestroy(s)
		for _, flags := range []uint32{cuda.EventDefault, cuda.EventBlockingSync | cuda.EventDisableTiming} {
			n := 1<<20 + r.Intn(3<<20)
			src, err := cuda.MemHostAlloc(n, 0)
			if err != nil {
				t.Fatal(err)
			}
			dst, err := cuda.MemHostAlloc(n, 0)
			if err != nil {
				t.Fatal(err)
			}
			d, err := cuda.MemAlloc(n)
			if err != nil {
				t.Fatal(err)
			}
			e, err := cuda.EventCreate(flags)
			if err != nil {
				t.Fatalf("EventCreate(%#x): %v", flags, err)
			}
			copy(src.Bytes(), randomBytes(r, n))
			clear(dst.Bytes())
			if err := cuda.MemcpyHtoDAsync(d.Ptr(), src.Bytes(), s); err != nil {
				t.Fatal(err)
			}
			if err := cuda.MemcpyDtoHAsync(dst.Bytes(), d.Ptr(), s); err != nil {
				t.Fatal(err)
			}
			if err := cuda.EventRecord(e, s); err != nil {
				t.Fatal("EventRecord:", err)
			}
			if err := cuda.EventSynchronize(e); err != nil {
				t.Fatal("EventSynchronize:", err)
			}
			if err := cuda.EventQuery(e); err != nil {
				t.Errorf("EventQuery after EventSynchronize (flags %#x) = %v", flags, err)
			}
			if !bytes.Equal(src.Bytes(), dst.Bytes()) {
				t.Errorf("flags %#x: the round trip waited for through the event differs", flags)
			}
			if err := cuda.EventDestroy(e); err != nil {
				t.Error("EventDestroy:", err)
			}
			d.Close()
			src.Close()
			dst.Close()
		}
	})
}

// TestMemcpy2D copies a box of rows from pinned memory to device memory
// with other row pitches on each side, then within device memory to a
// third pitch and back over rows overwritten meanwhile, then back into
// other host rows, and compares every byte, the gaps between rows
// included (left alone).
func TestMemcpy2D(t *testing.T) {
	ctx := needGPU(t)
	r := rand.New(rand.NewSource(9))
	inCtx(t, ctx, func() {
		s, err := cuda.StreamCreate(cuda.StreamNonBlocking)
		if err != nil {
			t.Fatal(err)
		}
		defer cuda.StreamDestroy(s)
		const width, height, hostPitch, devPitch = 2051, 97, 2051 + 13, 4096
		host, err := cuda.MemHostAlloc(hostPitch*height, 0)
		if err != nil {
			t.Fatal(err)
		}
		defer host.Close()
		copy(host.Bytes(), randomBytes(r, hostPitch*height))
		d, err := cuda.MemAlloc(devPitch * height)
		if err != nil {
			t.Fatal(err)
		}
		defer d.Close()
		if err := cuda.MemsetD8(d.Ptr(), 0xA5, devPitch*height); err != nil {
			t.Fatal(err)
		}
		// The memset runs on the legacy stream, which a non-blocking
		// stream does not wait for: finish it before the copy.
		if err := cuda.CtxSynchronize(); err != nil {
			t.Fatal(err)
		}
		if err := cuda.MemcpyHtoD2DAsync(d.Ptr(), devPitch, host.Bytes(), hostPitch, width, height, s); err != nil {
			t.Fatal("MemcpyHtoD2DAsync:", err)
		}
		if err := cuda.StreamSynchronize(s); err != nil {
			t.Fatal(err)
		}
		got := make([]byte, devPitch*height)
		if err := cuda.MemcpyDtoH(got, d.Ptr()); err != nil {
			t.Fatal(err)
		}
		for y := 0; y < height; y++ {
			row, gap := got[y*devPitch:y*devPitch+width], got[y*devPitch+width:(y+1)*devPitch]
			if !bytes.Equal(row, host.Bytes()[y*hostPitch:y*hostPitch+width]) || bytes.Count(gap, []byte{0xA5}) != len(gap) {
				t.Fatalf("row %d differs after MemcpyHtoD2DAsync", y)
			}
		}
		// Within device memory: into rows of a third pitch, then back.
		const devPitch2 = 2560
		d2, err := cuda.MemAlloc(devPitch2 * height)
		if err != nil {
			t.Fatal(err)
		}
		defer d2.Close()
		if err := cuda.MemcpyDtoD2DAsync(d2.Ptr(), devPitch2, d.Ptr(), devPitch, width, height, s); err != nil {
			t.Fatal("MemcpyDtoD2DAsync:", err)
		}
		if err := cuda.MemsetD8(d.Ptr(), 0x5A, devPitch*height); err != nil {
			t.Fatal(err)
		}
		if err := cuda.CtxSynchronize(); err != nil {
			t.Fatal(err)
		}
		if err := cuda.MemcpyDtoD2DAsync(d.Ptr(), devPitch, d2.Ptr(), devPitch2, width, height, s); err != nil {
			t.Fatal("MemcpyDtoD2DAsync:", err)
		}
		back, err := cuda.MemHostAlloc(width*height, 0)
		if err != nil {
			t.Fatal(err)
		}
		defer back.Close()
		if err := cuda.MemcpyDtoH2DAsync(back.Bytes(), width, d.Ptr(), devPitch, width, height, s); err != nil {
			t.Fatal("MemcpyDtoH2DAsync:", err)
		}
		if err := cuda.StreamSynchronize(s); err != nil {
			t.Fatal(err)
		}
		for y := 0; y < height; y++ {
			if !bytes.Equal(back.Bytes()[y*width:(y+1)*width], host.Bytes()[y*hostPitch:y*hostPitch+width]) {
				t.Fatalf("row %d differs after MemcpyDtoH2DAsync", y)
			}
		}
	})
}
