// Package gputest holds the GPU helpers of the tests of the packages that
// load tensors into device memory (safetensors, gguf, tensorload) and of
// the engine's kernels. It is imported by tests only.
package gputest

import (
	"testing"

	"github.com/kvikgo/kvik/cuda"
)

// Count returns the number of CUDA devices, 0 where there is no driver.
func Count() int {
	if cuda.Init() != nil {
		return 0
	}
	n, err := cuda.DeviceGetCount()
	if err != nil {
		return 0
	}
	return n
}

// Need skips t where no CUDA device is usable, with the reason, and
// returns the number of devices.
func Need(t testing.TB) int {
	t.Helper()
	if err := cuda.Init(); err != nil {
		t.Skipf("no CUDA driver: %v", err)
	}
	n, err := cuda.DeviceGetCount()
	if err != nil || n == 0 {
		t.Skipf("no CUDA device (count %d, %v)", n, err)
	}
	return n
}

// Primary skips t where no CUDA device is usable and returns device
// ord's primary context, retained until t ends.
func Primary(t testing.TB, ord int) cuda.Context {
	t.Helper()
	Need(t)
	dev, err := cuda.DeviceGet(ord)
	if err != nil {
		t.Fatal(err)
	}
	ctx, err := dev.PrimaryCtxRetain()
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { dev.PrimaryCtxRelease() })
	return ctx
}

// FromDevice copies n bytes at p on device ord to the host.
func FromDevice(t testing.TB, ord int, p cuda.DevicePtr, n int64) []byte {
	t.Helper()
	out := make([]byte, n)
	if n == 0 {
		return out
	}
	ctx := Primary(t, ord)
	if err := cuda.WithContext(ctx, func() error { return cuda.MemcpyDtoH(out, p) }); err != nil {
		t.Fatal(err)
	}
	return out
}

// FreeMemory returns the free memory of device ord in bytes. It retains
// the device's primary context until the test ends, so that the context
// (which holds memory of its own) lives on between two measurements.
func FreeMemory(t testing.TB, ord int) int64 {
	t.Helper()
	ctx := Primary(t, ord)
	var free int64
	if err := cuda.WithContext(ctx, func() (err error) { free, _, err = cuda.MemGetInfo(); return err }); err != nil {
		t.Fatal(err)
	}
	return free
}
