package kvik_test

import (
	"context"
	"fmt"
	"os"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/kvikgo/kvik"
	"github.com/kvikgo/kvik/cuda"
	"github.com/kvikgo/kvik/internal/testkit/gputest"
	"github.com/kvikgo/kvik/safetensors"
)

// BenchmarkGPUs reads benchFile's file whole into each of the first n GPUs
// at once, one ReadDevice call per GPU from its own goroutine, for n = 1
// and every count up to the GPUs present, and (on two or more) its halves
// onto GPUs 0 and 1 as two Futures. GB/s counts every byte copied to
// every GPU, so the ratio of gpus=2 to gpus=1 is what a second GPU adds:
//
//	KVIK_BENCH_DIR=/dev/shm KVIK_BENCH_SIZE=4294967296 go test -run '^$' -bench 'GPUs$' -benchtime 5x
//
// KVIK_BENCH_VARIANTS times staging variants in turn (benchVariants);
// KVIK_BENCH_FRESH=1 adds benchFresh's reads.
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
	ctxs := make([]cuda.Context, count)
	for i := range count {
		ctx := gputest.Primary(b, i)
		bufs[i], ctxs[i] = devAlloc(b, ctx, size), ctx
	}
	if os.Getenv("KVIK_BENCH_FRESH") == "1" {
		benchFresh(b, path, f, ctxs, bufs, size)
	}
	variants := benchVariants()
	for _, v := range variants {
		name := ""
		if len(variants) > 1 {
			name = "/" + v
		}
		restore, err := kvik.SetStagingVariant(v)
		if err != nil {
			b.Fatal(err)
		}
		benchGPUs(b, f, bufs, size, name)
		restore()
	}
}

func benchGPUs(b *testing.B, f *kvik.FileHandle, bufs []*cuda.DeviceBuffer, size int, variant string) {
	count := len(bufs)
	if count >= 2 {
		// The shape of a balanced load: each GPU reads its half, started
		// from one goroutine as Futures (tensorload does this).
		b.Run("halves-futures"+variant, func(b *testing.B) {
			b.SetBytes(int64(size))
			for b.Loop() {
				readSplit(b, f, []cuda.DevicePtr{bufs[0].Ptr(), bufs[1].Ptr()}, 0, size)
			}
		})
	}
	for n := 1; n <= count; n++ {
		b.Run(fmt.Sprintf("gpus=%d%s", n, variant), func(b *testing.B) {
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

// benchFresh times what a load does that the reads above do not: device
// memory allocated for each read (and freed, untimed), a handle opened
// for each read, a file offset that is not page-aligned (a safetensors
// data section starts at 8 + the header's length).
func benchFresh(b *testing.B, path string, f *kvik.FileHandle, ctxs []cuda.Context, bufs []*cuda.DeviceBuffer, size int) {
	counts := []int{1}
	if len(bufs) > 1 {
		counts = append(counts, len(bufs))
	}
	for _, ng := range counts {
		ptrs := make([]cuda.DevicePtr, ng)
		for i := range ng {
			ptrs[i] = bufs[i].Ptr()
		}
		b.Run(fmt.Sprintf("fresh/gpus=%d/reused", ng), func(b *testing.B) {
			b.SetBytes(int64(size))
			for b.Loop() {
				readSplit(b, f, ptrs, 0, size)
			}
		})
		b.Run(fmt.Sprintf("fresh/gpus=%d/offset-8200", ng), func(b *testing.B) {
			b.SetBytes(int64(size - 8200))
			for b.Loop() {
				readSplit(b, f, ptrs, 8200, size)
			}
		})
		b.Run(fmt.Sprintf("fresh/gpus=%d/handle", ng), func(b *testing.B) {
			b.SetBytes(int64(size))
			for b.Loop() {
				g, err := kvik.Open(path, "r", 0)
				if err != nil {
					b.Fatal(err)
				}
				readSplit(b, g, ptrs, 0, size)
				g.Close()
			}
		})
		for _, pause := range []time.Duration{0, 50 * time.Millisecond, 300 * time.Millisecond} {
			pname := ""
			if pause > 0 {
				pname = "-pause" + pause.String()
			}
			b.Run(fmt.Sprintf("fresh/gpus=%d/mem%s", ng, pname), func(b *testing.B) {
				b.SetBytes(int64(size))
				for b.Loop() {
					mem := make([]*cuda.DeviceBuffer, ng)
					dst := make([]cuda.DevicePtr, ng)
					for i := range ng {
						if err := cuda.WithContext(ctxs[i], func() (err error) { mem[i], err = cuda.MemAlloc(size - (ng-1)*(size/ng)); return err }); err != nil {
							b.Fatal(err)
						}
						dst[i] = mem[i].Ptr()
					}
					readSplit(b, f, dst, 0, size)
					b.StopTimer()
					for _, m := range mem {
						m.Close()
					}
					time.Sleep(pause)
					b.StartTimer()
				}
			})
		}
	}
}

// readSplit reads bytes [off, size) of f into the devices of dst, one
// contiguous share each (the last takes the remainder), started as
// Futures from one goroutine, as tensorload does, and checks every count.
func readSplit(b *testing.B, f *kvik.FileHandle, dst []cuda.DevicePtr, off int64, size int) {
	share := (size - int(off)) / len(dst)
	fus := make([]*kvik.Future, len(dst))
	want := make([]int, len(dst))
	for i, d := range dst {
		want[i] = share
		if i == len(dst)-1 {
			want[i] = size - int(off) - i*share
		}
		fus[i] = f.PReadDevice(context.Background(), d, want[i], off+int64(i*share), 0)
	}
	for i, fu := range fus {
		if got, err := fu.Get(); err != nil || got != want[i] {
			b.Fatalf("GPU %d: read %d of %d: %v", i, got, want[i], err)
		}
	}
}

// BenchmarkGPUsLoad times safetensors.Load of the checkpoint at
// KVIK_BENCH_SAFETENSORS onto GPU 0 and balanced over GPUs 0+1, for each
// staging variant in KVIK_BENCH_VARIANTS, each load's Close and a pause
// after it (KVIK_BENCH_PAUSE_MS, default 200, as kvik bench's --settle:
// the driver's work after a free slows the next allocation's copies)
// outside the clock.
func BenchmarkGPUsLoad(b *testing.B) {
	needGPU(b)
	path := os.Getenv("KVIK_BENCH_SAFETENSORS")
	if path == "" {
		b.Skip("KVIK_BENCH_SAFETENSORS not set")
	}
	st, err := os.Stat(path)
	if err != nil {
		b.Fatal(err)
	}
	pause := 200 * time.Millisecond
	if ms, err := strconv.Atoi(os.Getenv("KVIK_BENCH_PAUSE_MS")); err == nil {
		pause = time.Duration(ms) * time.Millisecond
	}
	count, err := cuda.DeviceGetCount()
	if err != nil {
		b.Fatal(err)
	}
	for _, v := range benchVariants() {
		restore, err := kvik.SetStagingVariant(v)
		if err != nil {
			b.Fatal(err)
		}
		for _, devs := range [][]int{{0}, {0, 1}} {
			if len(devs) > count {
				break
			}
			b.Run(fmt.Sprintf("gpus=%d/%s", len(devs), v), func(b *testing.B) {
				b.SetBytes(st.Size())
				for b.Loop() {
					m, err := safetensors.Load(context.Background(), path, &safetensors.Options{Devices: devs})
					if err != nil {
						b.Fatal(err)
					}
					b.StopTimer()
					m.Close()
					time.Sleep(pause)
					b.StartTimer()
				}
			})
		}
		restore()
	}
}

// benchVariants is KVIK_BENCH_VARIANTS (comma-separated names of
// SetStagingVariant), the staging variants a benchmark times in turn;
// "pipeline" (the built-in staging) by default.
func benchVariants() []string {
	if v := os.Getenv("KVIK_BENCH_VARIANTS"); v != "" {
		return strings.Split(v, ",")
	}
	return []string{"pipeline"}
}
