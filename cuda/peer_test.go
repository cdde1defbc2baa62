package cuda_test

import (
	"bytes"
	"errors"
	"math/rand"
	"testing"

	"github.com/kvikgo/kvik/cuda"
)

// TestPeerCopy copies random bytes from device 0 to device 1 with
// MemcpyPeerAsync, with peer access enabled where the devices allow it,
// and reads them back; enabling it twice reports
// ErrorPeerAccessAlreadyEnabled.
func TestPeerCopy(t *testing.T) {
	ctx0 := needGPU(t)
	n, err := cuda.DeviceGetCount()
	if err != nil || n < 2 {
		t.Skipf("needs two GPUs, found %d (%v)", n, err)
	}
	d0, _ := cuda.DeviceGet(0)
	d1, err := cuda.DeviceGet(1)
	if err != nil {
		t.Fatal(err)
	}
	ctx1, err := d1.PrimaryCtxRetain()
	if err != nil {
		t.Fatal(err)
	}
	defer d1.PrimaryCtxRelease()
	can, err := cuda.DeviceCanAccessPeer(d1, d0)
	if err != nil {
		t.Fatal("DeviceCanAccessPeer:", err)
	}
	t.Logf("device 1 can access device 0: %v", can)
	if can {
		inCtx(t, ctx1, func() {
			if err := cuda.CtxEnablePeerAccess(ctx0); err != nil && !errors.Is(err, cuda.ErrorPeerAccessAlreadyEnabled) {
				t.Fatal("CtxEnablePeerAccess:", err)
			}
			if err := cuda.CtxEnablePeerAccess(ctx0); !errors.Is(err, cuda.ErrorPeerAccessAlreadyEnabled) {
				t.Errorf("enabling twice: %v, want ErrorPeerAccessAlreadyEnabled", err)
			}
		})
	}
	const size = 3<<20 + 101
	src := make([]byte, size)
	rand.New(rand.NewSource(17)).Read(src)
	var a, b *cuda.DeviceBuffer
	inCtx(t, ctx0, func() {
		if a, err = cuda.MemAlloc(size); err != nil {
			t.Fatal(err)
		}
		if err := cuda.MemcpyHtoD(a.Ptr(), src); err != nil {
			t.Fatal(err)
		}
	})
	defer a.Close()
	got := make([]byte, size-7)
	inCtx(t, ctx1, func() {
		if b, err = cuda.MemAlloc(size); err != nil {
			t.Fatal(err)
		}
		s, err := cuda.StreamCreate(cuda.StreamNonBlocking)
		if err != nil {
			t.Fatal(err)
		}
		defer cuda.StreamDestroy(s)
		if err := cuda.MemcpyPeerAsync(b.Ptr()+3, ctx1, a.Ptr()+7, ctx0, size-7, s); err != nil {
			t.Fatal("MemcpyPeerAsync:", err)
		}
		if err := cuda.MemcpyPeerAsync(b.Ptr(), ctx1, a.Ptr(), ctx0, -1, s); !errors.Is(err, cuda.ErrorInvalidValue) {
			t.Errorf("negative count: %v", err)
		}
		if err := cuda.StreamSynchronize(s); err != nil {
			t.Fatal(err)
		}
		if err := cuda.MemcpyDtoH(got, b.Ptr()+3); err != nil {
			t.Fatal(err)
		}
	})
	defer b.Close()
	if !bytes.Equal(got, src[7:]) {
		t.Fatal("peer copy differs from the source")
	}
}
