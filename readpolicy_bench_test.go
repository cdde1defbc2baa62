package kvik_test

import (
	"fmt"
	"os"
	"runtime"
	"slices"
	"sync"
	"testing"
	"time"

	"github.com/kvikgo/kvik"
)

// BenchmarkReadPolicyWarm compares the auto read policy with today's
// buffered reads (KVIKIO_AUTO_DIRECT_IO_READ=0) on a file in the page
// cache. The two alternate, round by round, in one process and into the
// same buffers, so that neither gets better memory or a quieter machine:
// separate runs of identical code differ by more than the 2% looked for.
// It reports the median GB/s of each policy and their ratio; ns/op is
// meaningless. The file is KVIK_BENCH_SIZE bytes in KVIK_BENCH_DIR (see
// benchFile); KVIK_BENCH_THREADS lists the worker counts (default 1,16).
// With a GPU it also reads into device memory through the POSIX path.
//
//	KVIK_BENCH_DIR=/dev/shm KVIK_BENCH_SIZE=1073741824 go test -run '^$' -bench ReadPolicyWarm -benchtime 10x
func BenchmarkReadPolicyWarm(b *testing.B) {
	path, size := benchFile(b)
	loadPageCache(b, path)
	threads := threadList(b, []int{1, 16})
	f, err := kvik.Open(path, "r", 0, kvik.WithCompatMode(kvik.CompatOn))
	if err != nil {
		b.Fatal(err)
	}
	b.Cleanup(func() { f.Close() })
	reads := hostAndDeviceReads(b, f, 0, size)
	policies := []kvik.ReadPolicy{kvik.ReadPolicyAuto, kvik.ReadPolicyBuffered}
	for _, mem := range []string{"host", "device"} {
		read := reads[mem]
		if read == nil {
			continue
		}
		for _, n := range threads {
			b.Run(fmt.Sprintf("%s/threads=%d", mem, n), func(b *testing.B) {
				setDefaults(b, func(*kvik.Defaults) {}) // restores the settings after
				reads := make([]func() error, len(policies))
				for j, p := range policies {
					reads[j] = func() error {
						if got, err := read(); got != size || err != nil {
							return fmt.Errorf("%v: read %d of %d bytes: %v", p, got, size, err)
						}
						return nil
					}
				}
				secs := alternate(b, reads, func(_, j int) { setPolicy(b, n, policies[j]) })
				auto, buffered := gbps(size, secs[0]), gbps(size, secs[1])
				b.ReportMetric(auto, "auto-GB/s")
				b.ReportMetric(buffered, "buffered-GB/s")
				b.ReportMetric(auto/buffered, "auto/buffered")
			})
		}
	}
}

// loadPageCache reads the file at path through the page cache in small
// pieces (one allocation of the file's size would leave the garbage
// collector work to do during the timed reads).
func loadPageCache(b *testing.B, path string) {
	f, err := os.Open(path)
	if err != nil {
		b.Fatal(err)
	}
	defer f.Close()
	buf := make([]byte, 16<<20)
	for off := int64(0); ; off += int64(len(buf)) {
		n, err := f.ReadAt(buf, off)
		if n < len(buf) || err != nil {
			break
		}
	}
	runtime.GC()
}

// setPolicy sets the worker count and read policy for the next read.
func setPolicy(b *testing.B, threads int, p kvik.ReadPolicy) {
	if _, err := kvik.UpdateDefaults(func(d *kvik.Defaults) {
		d.NumThreads, d.AutoDirectIORead, d.DirectIOReadPolicy = threads, false, p
	}); err != nil {
		b.Fatal(err)
	}
}

// gbps returns the median throughput of reads of size bytes taking secs.
func gbps(size int, secs []float64) float64 {
	if len(secs) == 0 {
		return 0
	}
	s := slices.Sorted(slices.Values(secs))
	return float64(size) / s[len(s)/2] / 1e9
}

// alternate times the reads in turn, round after round while b.Loop runs,
// starting each round with the next read so that none always goes first,
// and returns the seconds each took, by read. before, when not nil, runs
// untimed before each read with the round and the read's index.
func alternate(b *testing.B, reads []func() error, before func(round, j int)) [][]float64 {
	secs := make([][]float64, len(reads))
	for i := 0; b.Loop(); i++ {
		for k := range reads {
			j := (k + i) % len(reads)
			if before != nil {
				before(i, j)
			}
			start := time.Now()
			if err := reads[j](); err != nil {
				b.Fatal(err)
			}
			secs[j] = append(secs[j], time.Since(start).Seconds())
		}
	}
	return secs
}

// runWorkers runs work(w) on n goroutines, w from 0 to n-1, and returns
// the error of the lowest-numbered worker that failed.
func runWorkers(n int, work func(w int) error) error {
	errs := make([]error, n)
	var wg sync.WaitGroup
	for w := range n {
		wg.Go(func() { errs[w] = work(w) })
	}
	wg.Wait()
	for _, err := range errs {
		if err != nil {
			return err
		}
	}
	return nil
}
