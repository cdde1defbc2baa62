package cuda_test

import (
	"errors"
	"runtime"
	"testing"
	"unsafe"

	"github.com/kvikgo/kvik/cuda"
)

// fillPTX is PTX (clang's NVPTX back end, sm_75) of
//
//	extern "C" __global__ void fill(unsigned char *p, unsigned char v, unsigned int n)
//
// which sets p[i] to v+i for i < n, a thread per byte.
const fillPTX = `.version 6.3
.target sm_75
.address_size 64

.visible .entry fill(
	.param .u64 fill_param_0,
	.param .u8 fill_param_1,
	.param .u32 fill_param_2
)
{
	.reg .pred 	%p<2>;
	.reg .b16 	%rs<4>;
	.reg .b32 	%r<6>;
	.reg .b64 	%rd<5>;

	ld.param.u32 	%r1, [fill_param_2];
	mov.u32 	%r2, %ctaid.x;
	mov.u32 	%r3, %ntid.x;
	mov.u32 	%r4, %tid.x;
	mad.lo.s32 	%r5, %r2, %r3, %r4;
	setp.ge.u32 	%p1, %r5, %r1;
	@%p1 bra 	LBB0_2;
	ld.param.u64 	%rd2, [fill_param_0];
	cvta.to.global.u64 	%rd3, %rd2;
	ld.param.u8 	%rs2, [fill_param_1];
	cvt.u64.u32 	%rd4, %r5;
	add.s64 	%rd1, %rd3, %rd4;
	cvt.u16.u32 	%rs3, %r5;
	add.s16 	%rs1, %rs3, %rs2;
	st.global.u8 	[%rd1], %rs1;
LBB0_2:
	ret;
}
`

// TestModule loads a PTX module, launches its kernel over part of a
// buffer on a stream and checks every byte (those past n untouched); an
// unknown kernel name is ErrorNotFound, bytes that are no image are
// refused, and the module unloads.
func TestModule(t *testing.T) {
	ctx := needGPU(t)
	err := cuda.WithContext(ctx, func() error {
		m, err := cuda.ModuleLoadData([]byte(fillPTX))
		if err != nil {
			return err
		}
		f, err := cuda.ModuleGetFunction(m, "fill")
		if err != nil {
			return err
		}
		if _, err := cuda.ModuleGetFunction(m, "nofill"); !errors.Is(err, cuda.ErrorNotFound) {
			t.Errorf("ModuleGetFunction(nofill) = %v, want ErrorNotFound", err)
		}
		const size, n, v = 5000, 4321, 77
		buf, err := cuda.MemAlloc(size)
		if err != nil {
			return err
		}
		defer buf.Close()
		if err := cuda.MemsetD8(buf.Ptr(), 0xee, size); err != nil {
			return err
		}
		s, err := cuda.StreamCreate(cuda.StreamNonBlocking)
		if err != nil {
			return err
		}
		defer cuda.StreamDestroy(s)
		p, val, count := buf.Ptr(), uint8(v), uint32(n)
		params := []unsafe.Pointer{unsafe.Pointer(&p), unsafe.Pointer(&val), unsafe.Pointer(&count)}
		if err := cuda.LaunchKernel(f, cuda.Dim3{X: (n + 127) / 128}, cuda.Dim3{X: 128}, 0, s, params); err != nil {
			return err
		}
		if err := cuda.StreamSynchronize(s); err != nil {
			return err
		}
		got := make([]byte, size)
		if err := cuda.MemcpyDtoH(got, buf.Ptr()); err != nil {
			return err
		}
		for i, b := range got {
			want := byte(0xee)
			if i < n {
				want = byte(v + i)
			}
			if b != want {
				t.Fatalf("byte %d = %#x, want %#x", i, b, want)
			}
		}
		if _, err := cuda.ModuleLoadData([]byte("not a module")); err == nil {
			t.Error("ModuleLoadData of text that is no PTX succeeded")
		}
		return cuda.ModuleUnload(m)
	})
	if err != nil {
		t.Fatal(err)
	}
}

// TestCtxGetID: a context's ID is the same each time asked, and a
// context made after is another.
func TestCtxGetID(t *testing.T) {
	primary := needGPU(t)
	id, err := cuda.CtxGetID(primary)
	if err != nil {
		t.Fatal(err)
	}
	if again, err := cuda.CtxGetID(primary); err != nil || again != id {
		t.Errorf("CtxGetID again = %d, %v; want %d", again, err, id)
	}
	dev, err := cuda.DeviceGet(0)
	if err != nil {
		t.Fatal(err)
	}
	runtime.LockOSThread()
	defer runtime.UnlockOSThread()
	c, err := cuda.CtxCreate(cuda.CtxSchedAuto, dev)
	if err != nil {
		t.Fatal(err)
	}
	defer cuda.CtxDestroy(c)
	if other, err := cuda.CtxGetID(c); err != nil || other == id {
		t.Errorf("CtxGetID of a new context = %d, %v; want other than %d", other, err, id)
	}
}

// TestModuleLoadDataEmpty: an empty image fails before the driver is
// called (no GPU needed).
func TestModuleLoadDataEmpty(t *testing.T) {
	if _, err := cuda.ModuleLoadData(nil); !errors.Is(err, cuda.ErrorInvalidValue) {
		t.Errorf("ModuleLoadData(nil) = %v, want ErrorInvalidValue", err)
	}
}
