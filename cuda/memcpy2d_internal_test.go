package cuda

import (
	"errors"
	"testing"
	"unsafe"
)

// TestMemcpy2DLayout checks memcpy2D against CUDA_MEMCPY2D's layout in
// cuda.h on 64-bit Linux: 16 eight-byte slots, the memory types 4-byte
// enums padded to 8.
func TestMemcpy2DLayout(t *testing.T) {
	var m memcpy2D
	if s := unsafe.Sizeof(m); s != 128 {
		t.Fatalf("size %d, want 128", s)
	}
	for _, f := range []struct {
		name      string
		got, want uintptr
	}{
		{"srcXInBytes", unsafe.Offsetof(m.srcXInBytes), 0}, {"srcY", unsafe.Offsetof(m.srcY), 8},
		{"srcMemoryType", unsafe.Offsetof(m.srcMemoryType), 16}, {"srcHost", unsafe.Offsetof(m.srcHost), 24},
		{"srcDevice", unsafe.Offsetof(m.srcDevice), 32}, {"srcArray", unsafe.Offsetof(m.srcArray), 40},
		{"srcPitch", unsafe.Offsetof(m.srcPitch), 48}, {"dstXInBytes", unsafe.Offsetof(m.dstXInBytes), 56},
		{"dstY", unsafe.Offsetof(m.dstY), 64}, {"dstMemoryType", unsafe.Offsetof(m.dstMemoryType), 72},
		{"dstHost", unsafe.Offsetof(m.dstHost), 80}, {"dstDevice", unsafe.Offsetof(m.dstDevice), 88},
		{"dstArray", unsafe.Offsetof(m.dstArray), 96}, {"dstPitch", unsafe.Offsetof(m.dstPitch), 104},
		{"WidthInBytes", unsafe.Offsetof(m.widthInBytes), 112}, {"Height", unsafe.Offsetof(m.height), 120},
	} {
		if f.got != f.want {
			t.Errorf("%s at %d, want %d", f.name, f.got, f.want)
		}
	}
}

// TestMemcpy2DArguments checks that bad shapes fail before the driver is
// called: rows past the host buffer, pitches below the width or above
// MaxPitch, negative sizes. Empty copies do nothing.
func TestMemcpy2DArguments(t *testing.T) {
	buf := make([]byte, 1000)
	for _, c := range []struct{ hostPitch, devPitch, width, height int }{
		{100, 100, 100, 11}, {99, 100, 100, 2}, {100, 99, 100, 2}, {-1, 100, 10, 2},
		{100, 100, -1, 2}, {100, 100, 10, -1}, {MaxPitch + 1, 100, 10, 1}, {100, MaxPitch + 1, 10, 1},
	} {
		err := MemcpyHtoD2DAsync(0, c.devPitch, buf, c.hostPitch, c.width, c.height, 0)
		if !errors.Is(err, ErrorInvalidValue) {
			t.Errorf("HtoD %+v: %v, want ErrorInvalidValue", c, err)
		}
		err = MemcpyDtoH2DAsync(buf, c.hostPitch, 0, c.devPitch, c.width, c.height, 0)
		if !errors.Is(err, ErrorInvalidValue) {
			t.Errorf("DtoH %+v: %v, want ErrorInvalidValue", c, err)
		}
		if c.height*c.hostPitch > len(buf) && c.hostPitch >= c.width && c.hostPitch <= MaxPitch {
			continue // only a host buffer bounds the rows
		}
		if err := MemcpyDtoD2DAsync(0, c.devPitch, 0, c.hostPitch, c.width, c.height, 0); !errors.Is(err, ErrorInvalidValue) {
			t.Errorf("DtoD %+v: %v, want ErrorInvalidValue", c, err)
		}
	}
	if err := MemcpyHtoD2DAsync(0, 10, buf, 10, 0, 5, 0); err != nil {
		t.Errorf("empty copy: %v", err)
	}
	if err := MemcpyHtoD2DAsync(0, 10, buf, 100, 100, 10, 0); !errors.Is(err, ErrorInvalidValue) {
		t.Errorf("device pitch below the width: %v", err)
	}
}
