package kvik_test

import (
	"context"
	"fmt"
	"os"
	"os/exec"
	"slices"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/kvikgo/kvik"
	"github.com/kvikgo/kvik/cuda"
)

// Small-read benchmarks. BenchmarkSmallRead reads files of 64 KiB to 64
// MiB into host and device memory with the same workers, so each device
// figure has its host peer from the same run (the smallest show the fixed
// cost of an operation); BenchmarkFirstDeviceRead
// times the first device read of a fresh process against its later reads:
//
//	KVIK_BENCH_DIR=/dev/shm KVIK_BENCH_THREADS=16 go test -run '^$' -bench 'SmallRead|FirstDeviceRead' -benchtime 20x

func BenchmarkSmallRead(b *testing.B) {
	for _, size := range []int{64 << 10, 1 << 20, 16 << 20, 64 << 20} {
		b.Run(fmt.Sprintf("size=%dKiB", size>>10), func(b *testing.B) {
			b.Setenv("KVIK_BENCH_SIZE", strconv.Itoa(size))
			path, _ := benchFile(b)
			host := hostBuffer(b, size)
			b.Run("host", func(b *testing.B) {
				benchThreads(b, func(b *testing.B) {
					f := openBench(b, path, "r")
					b.SetBytes(int64(size))
					for b.Loop() {
						if n, err := f.ReadAt(host, 0); n != size || err != nil {
							b.Fatal(n, err)
						}
					}
				})
			})
			b.Run("device", func(b *testing.B) {
				ctx := needGPU(b)
				dev := devAlloc(b, ctx, size)
				benchThreads(b, func(b *testing.B) {
					f := openBench(b, path, "r")
					b.SetBytes(int64(size))
					for b.Loop() {
						if n, err := f.ReadDevice(dev.Ptr(), size, 0, 0); n != size || err != nil {
							b.Fatal(n, err)
						}
					}
				})
			})
		})
	}
}

const firstReadEnv = "KVIK_FIRST_READ_CHILD"

// BenchmarkFirstDeviceRead starts a fresh process per iteration that
// times its first ReadDevice of a KVIK_BENCH_SIZE file (default 16 MiB)
// and the median of the ten after it ("cold"), and the same after
// kvik.Warmup ("warmup", which also reports Warmup's own time).
func BenchmarkFirstDeviceRead(b *testing.B) {
	needGPU(b)
	if os.Getenv("KVIK_BENCH_SIZE") == "" {
		b.Setenv("KVIK_BENCH_SIZE", strconv.Itoa(16<<20))
	}
	path, size := benchFile(b)
	threads := "16"
	if s := os.Getenv("KVIK_BENCH_THREADS"); s != "" {
		threads = strings.Split(s, ",")[0]
	}
	for _, mode := range []string{"cold", "warmup"} {
		b.Run(mode, func(b *testing.B) {
			var first, steady, warm []float64
			for b.Loop() {
				r := runFirstReadChild(b, path, threads, mode)
				first, steady, warm = append(first, r[0]), append(steady, r[1]), append(warm, r[2])
			}
			f, s := median(first), median(steady)
			b.ReportMetric(float64(size)/f/1e9, "first-GB/s")
			b.ReportMetric(float64(size)/s/1e9, "steady-GB/s")
			b.ReportMetric(f/s, "first/steady")
			b.ReportMetric(median(warm)*1e3, "warmup-ms")
		})
	}
}

// runFirstReadChild runs TestFirstReadChild in a new process and returns
// its first-read, steady-read and Warmup times in seconds.
func runFirstReadChild(b *testing.B, path, threads, mode string) [3]float64 {
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	cmd := exec.CommandContext(ctx, os.Args[0], "-test.run=^TestFirstReadChild$", "-test.v")
	cmd.Env = append(os.Environ(), firstReadEnv+"="+mode, "KVIK_FIRST_READ_FILE="+path, "KVIKIO_NTHREADS="+threads)
	cmd.SysProcAttr = &syscall.SysProcAttr{Pdeathsig: syscall.SIGKILL}
	out, err := cmd.CombinedOutput()
	if err != nil {
		b.Fatalf("child: %v\n%s", err, out)
	}
	var r [3]float64
	i := strings.Index(string(out), "first-read-times ")
	if i < 0 {
		b.Fatalf("child printed no times:\n%s", out)
	}
	if _, err := fmt.Sscan(string(out[i+len("first-read-times "):]), &r[0], &r[1], &r[2]); err != nil {
		b.Fatalf("child output: %v\n%s", err, out)
	}
	return r
}

// TestFirstReadChild runs only in the processes BenchmarkFirstDeviceRead
// starts: the context and the device buffer exist before the first read,
// as in a program that has been using the GPU.
func TestFirstReadChild(t *testing.T) {
	mode := os.Getenv(firstReadEnv)
	if mode == "" {
		t.Skip("run by BenchmarkFirstDeviceRead")
	}
	ctx := needGPU(t)
	path := os.Getenv("KVIK_FIRST_READ_FILE")
	fi, err := os.Stat(path)
	if err != nil {
		t.Fatal(err)
	}
	size := int(fi.Size())
	dev := devAlloc(t, ctx, size)
	f, err := kvik.Open(path, "r", 0, kvik.WithCompatMode(kvik.CompatOn))
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	var warm time.Duration
	if mode == "warmup" {
		start := time.Now()
		if err := kvik.Warmup(cuda.Device(0)); err != nil {
			t.Fatal(err)
		}
		warm = time.Since(start)
	}
	var secs []float64
	for range 11 {
		start := time.Now()
		if n, err := f.ReadDevice(dev.Ptr(), size, 0, 0); n != size || err != nil {
			t.Fatal(n, err)
		}
		secs = append(secs, time.Since(start).Seconds())
	}
	fmt.Printf("first-read-times %g %g %g\n", secs[0], median(secs[1:]), warm.Seconds())
}

func median(v []float64) float64 {
	s := slices.Sorted(slices.Values(v))
	if len(s) == 0 {
		return 0
	}
	if len(s)%2 == 0 {
		return (s[len(s)/2-1] + s[len(s)/2]) / 2
	}
	return s[len(s)/2]
}
