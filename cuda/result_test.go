package cuda_test

import (
	"errors"
	"fmt"
	"strings"
	"testing"

	"github.com/kvikgo/kvik/cuda"
	"github.com/kvikgo/kvik/internal/dl"
)

func TestResultError(t *testing.T) {
	for _, c := range []struct {
		r      cuda.Result
		prefix string
	}{
		{cuda.ErrorInvalidValue, "CUDA_ERROR_INVALID_VALUE (1): "},
		{cuda.ErrorOutOfMemory, "CUDA_ERROR_OUT_OF_MEMORY (2): "},
		{cuda.ErrorNoDevice, "CUDA_ERROR_NO_DEVICE (100): "},
		{cuda.ErrorHostMemoryNotRegistered, "CUDA_ERROR_HOST_MEMORY_NOT_REGISTERED (713): "},
		{cuda.ErrorUnknown, "CUDA_ERROR_UNKNOWN (999): "},
	} {
		msg := c.r.Error()
		if !strings.HasPrefix(msg, c.prefix) || len(msg) == len(c.prefix) {
			t.Errorf("Result(%d).Error() = %q, want prefix %q and a description", int32(c.r), msg, c.prefix)
		}
	}
	if got, want := cuda.Result(123456).Error(), "CUresult (123456): unrecognized error code"; got != want {
		t.Errorf("unknown code: Error() = %q, want %q", got, want)
	}
	var err error = cuda.ErrorOutOfMemory
	wrapped := fmt.Errorf("alloc: %w", err)
	if !errors.Is(wrapped, cuda.ErrorOutOfMemory) || errors.Is(wrapped, cuda.ErrorInvalidValue) {
		t.Errorf("errors.Is on a wrapped Result is wrong")
	}
	var r cuda.Result
	if !errors.As(wrapped, &r) || r != cuda.ErrorOutOfMemory {
		t.Errorf("errors.As: got %v", r)
	}
}

func TestErrLibraryNotFound(t *testing.T) {
	if cuda.ErrLibraryNotFound != dl.ErrNotFound {
		t.Fatal("ErrLibraryNotFound is not dl.ErrNotFound")
	}
	const bad = "/nonexistent/kvik-test/libcuda.so.1"
	t.Setenv(cuda.LibraryEnv, bad)
	l := &dl.Library{Sonames: []string{"libcuda.so.1"}, EnvVar: cuda.LibraryEnv}
	_, err := l.Load()
	if !errors.Is(err, cuda.ErrLibraryNotFound) {
		t.Fatalf("Load error %v does not match ErrLibraryNotFound", err)
	}
	if !strings.Contains(err.Error(), bad) {
		t.Errorf("Load error %q does not name %s", err, bad)
	}
}

func TestArgumentChecks(t *testing.T) {
	// None of these reach the driver, so they pass with or without one.
	for name, err := range map[string]error{
		"MemAlloc(0)":          func() error { _, err := cuda.MemAlloc(0); return err }(),
		"MemAlloc(-1)":         func() error { _, err := cuda.MemAlloc(-1); return err }(),
		"MemHostAlloc(0)":      func() error { _, err := cuda.MemHostAlloc(0, 0); return err }(),
		"MemHostAlloc(-5)":     func() error { _, err := cuda.MemHostAlloc(-5, 0); return err }(),
		"MemcpyDtoD(n=-1)":     cuda.MemcpyDtoD(0, 0, -1),
		"MemsetD8(n=-1)":       cuda.MemsetD8(0, 0, -1),
		"MemHostRegister(nil)": cuda.MemHostRegister(nil, 0),
	} {
		if !errors.Is(err, cuda.ErrorInvalidValue) {
			t.Errorf("%s: error %v, want one matching ErrorInvalidValue", name, err)
		}
	}
	for name, err := range map[string]error{
		"MemcpyHtoD(empty)":          cuda.MemcpyHtoD(0, nil),
		"MemcpyDtoH(empty)":          cuda.MemcpyDtoH([]byte{}, 0),
		"MemcpyDtoD(0)":              cuda.MemcpyDtoD(0, 0, 0),
		"MemcpyHtoDAsync(empty)":     cuda.MemcpyHtoDAsync(0, nil, 0),
		"MemcpyDtoHAsync(empty)":     cuda.MemcpyDtoHAsync(nil, 0, 0),
		"MemsetD8(0)":                cuda.MemsetD8(0, 1, 0),
		"(*DeviceBuffer)(nil).Close": (*cuda.DeviceBuffer)(nil).Close(),
		"(*HostBuffer)(nil).Close":   (*cuda.HostBuffer)(nil).Close(),
	} {
		if err != nil {
			t.Errorf("%s: %v, want nil", name, err)
		}
	}
	var b *cuda.DeviceBuffer
	if b.Ptr() != 0 || b.Size() != 0 || b.Context() != 0 {
		t.Error("nil DeviceBuffer accessors are not zero")
	}
	var h *cuda.HostBuffer
	if h.Bytes() != nil || h.Len() != 0 {
		t.Error("nil HostBuffer accessors are not zero")
	}
}

func TestMemoryTypeString(t *testing.T) {
	for mt, want := range map[cuda.MemoryType]string{
		0:                      "unregistered",
		cuda.MemoryTypeHost:    "host",
		cuda.MemoryTypeDevice:  "device",
		cuda.MemoryTypeArray:   "array",
		cuda.MemoryTypeUnified: "unified",
		9:                      "MemoryType(9)",
	} {
		if got := mt.String(); got != want {
			t.Errorf("MemoryType(%d).String() = %q, want %q", uint32(mt), got, want)
		}
	}
}
