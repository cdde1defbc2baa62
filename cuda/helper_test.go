package cuda_test

import (
	"math/rand"
	"sync"
	"testing"

	"github.com/kvikgo/kvik/cuda"
)

var gpu struct {
	once sync.Once
	ctx  cuda.Context
	skip string
	err  error
}

// needGPU initialises the driver and returns device 0's primary context,
// retained once for the whole test binary. It skips the test, saying why,
// when there is no driver or no device.
func needGPU(t testing.TB) cuda.Context {
	t.Helper()
	gpu.once.Do(func() {
		if err := cuda.Init(); err != nil {
			gpu.skip = "CUDA driver not usable: " + err.Error()
			return
		}
		n, err := cuda.DeviceGetCount()
		if err != nil || n == 0 {
			gpu.skip = "no CUDA device"
			if err != nil {
				gpu.skip += ": " + err.Error()
			}
			return
		}
		dev, err := cuda.DeviceGet(0)
		if err != nil {
			gpu.err = err
			return
		}
		gpu.ctx, gpu.err = dev.PrimaryCtxRetain()
	})
	if gpu.skip != "" {
		t.Skip(gpu.skip)
	}
	if gpu.err != nil {
		t.Fatalf("retaining device 0's primary context: %v", gpu.err)
	}
	return gpu.ctx
}

// inCtx runs f with ctx current, failing the test on error. f may call
// t.Fatal: the context is popped on the way out.
func inCtx(t testing.TB, ctx cuda.Context, f func()) {
	t.Helper()
	if err := cuda.WithContext(ctx, func() error { f(); return nil }); err != nil {
		t.Fatalf("WithContext: %v", err)
	}
}

// randomBytes returns n random bytes, none of them zero, so that a copy
// that did nothing cannot pass for one of zeroes.
func randomBytes(r *rand.Rand, n int) []byte {
	b := make([]byte, n)
	for i := range b {
		b[i] = byte(1 + r.Intn(255))
	}
	return b
}
