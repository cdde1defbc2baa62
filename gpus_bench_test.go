package kvik_test

import (
	"context"
	"fmt"
	"sync"
	"testing"

	"github.com/kvikgo/kvik"
	"github.com/kvikgo/kvik/cuda"
)

// BenchmarkGPUs reads benchFile's file whole into each of the first n GPUs
// at once, one ReadDevice call per GPU from its own goroutine, for n = 1
// and every count up to the GPUs present (KVIK_BENCH_GPUS caps it). GB/s
// counts every byte copied to every GPU, so the ratio of gpus=2 to gpus=1
// is what a second GPU adds:
//
//	KVIK_BENCH_DIR=/dev/shm KVIK_BENCH_SIZE=4294967296 go test -run '^$' -bench GPUs -benchtime 5x
func BenchmarkGPUs(b *testing.B) {
	needGPU(b)
	count, err := cuda.DeviceGetCount()
	if err != nil {
		b.Fatal(err)
	}
	path, size := benchFile(b)
	f, err := kvik.Open(path, "r", 0)
	if err != nil {
		b.Fatal(err)
	}
	defer f.Close()
	bufs := make([]*cuda.DeviceBuffer, count)
	for i := range count {
		dev, err := cuda.DeviceGet(i)
		if err != nil {
			b.Fatal(err)
		}
		ctx, err := dev.PrimaryCtxRetain()
		if err != nil {
			b.Fatal(err)
		}
		b.Cleanup(func() { dev.PrimaryCtxRelease() })
		bufs[i] = devAlloc(b, ctx, size)
	}
	if count >= 2 {
		// The shape of a balanced load: each GPU reads its half, started
		// from one goroutine as Futures (tensorload does this).
		b.Run("halves-futures", func(b *testing.B) {
			b.SetBytes(int64(size))
			half := size / 2
			for b.Loop() {
				f0 := f.PReadDevice(context.Background(), bufs[0].Ptr(), half, 0, 0)
				f1 := f.PReadDevice(context.Background(), bufs[1].Ptr(), size-half, int64(half), 0)
				for i, fu := range []*kvik.Future{f0, f1} {
					if _, err := fu.Get(); err != nil {
						b.Fatalf("GPU %d: %v", i, err)
					}
				}
			}
		})
	}
	for n := 1; n <= count; n++ {
		b.Run(fmt.Sprintf("gpus=%d", n), func(b *testing.B) {
			b.SetBytes(int64(size * n))
			for b.Loop() {
				var wg sync.WaitGroup
				errs := make([]error, n)
				for i := range n {
					wg.Go(func() {
						got, err := f.ReadDevice(bufs[i].Ptr(), size, 0, 0)
						if err == nil && got != size {
							err = fmt.Errorf("GPU %d: read %d of %d bytes", i, got, size)
						}
						errs[i] = err
					})
				}
				wg.Wait()
				for _, err := range errs {
					if err != nil {
						b.Fatal(err)
					}
				}
			}
		})
	}
}
