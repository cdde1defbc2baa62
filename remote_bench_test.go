package kvik_test

import (
	"bytes"
	"context"
	"fmt"
	"math/rand/v2"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/kvikgo/kvik"
	"github.com/kvikgo/kvik/internal/testkit/gputest"
	"github.com/kvikgo/kvik/internal/testkit/s3test"
	"golang.org/x/sys/unix"
)

// benchRemoteSize is the object size of the remote benchmarks:
// KVIK_BENCH_REMOTE_SIZE bytes, else 1 GiB (64 MiB under CI=true).
func benchRemoteSize(b *testing.B) int {
	if n, err := strconv.Atoi(os.Getenv("KVIK_BENCH_REMOTE_SIZE")); err == nil && n > 0 {
		return n
	}
	if os.Getenv("CI") == "true" {
		return 64 << 20
	}
	return 1 << 30
}

// BenchmarkRemoteS3 reads one object from versitygw on loopback: kvik's
// parallel ranged GETs into host memory and into device memory, and one
// GET stream (the whole object as one task), in the same run, each after
// an untimed read.
//
//	go test -run '^$' -bench RemoteS3 -benchtime 3x .
func BenchmarkRemoteS3(b *testing.B) {
	v := s3test.Start(b)
	size := benchRemoteSize(b)
	want := randomBytes(rand.New(rand.NewPCG(42, 42)), size)
	u := v.Put(b, "bench.bin", want)
	want = nil // the file is the reference from here on
	ref, _ := v.Object("bench.bin")
	ctx := context.Background()
	h, err := kvik.OpenRemote(ctx, u, v.Opts()...)
	if err != nil {
		b.Fatal(err)
	}
	defer h.Close()
	buf := make([]byte, size)
	read := func(b *testing.B) {
		// An untimed read first: the first read into buf also pays its
		// page faults (b.Loop starts the timer at its first call).
		if n, err := h.ReadAt(buf, 0); n != size || err != nil {
			b.Fatal(n, err)
		}
		b.SetBytes(int64(size))
		for b.Loop() {
			clear(buf[:1<<20])
			if n, err := h.ReadAt(buf, 0); n != size || err != nil {
				b.Fatal(n, err)
			}
		}
		if !bytes.Equal(buf, ref) {
			b.Fatal("read bytes differ from the object")
		}
	}
	b.Run("host", read)
	b.Run("one-stream", func(b *testing.B) {
		restore, err := kvik.UpdateDefaults(func(d *kvik.Defaults) { d.TaskSize = size })
		if err != nil {
			b.Fatal(err)
		}
		defer restore()
		read(b)
	})
	b.Run("device", func(b *testing.B) {
		cctx := needGPU(b)
		d := devAlloc(b, cctx, size)
		if n, err := h.ReadDevice(d.Ptr(), size, 0, 0); n != size || err != nil {
			b.Fatal(n, err)
		}
		b.SetBytes(int64(size))
		for b.Loop() {
			if n, err := h.ReadDevice(d.Ptr(), size, 0, 0); n != size || err != nil {
				b.Fatal(n, err)
			}
		}
		if !bytes.Equal(fromDevice(b, cctx, d.Ptr(), size), ref) {
			b.Fatal("device bytes differ from the object")
		}
	})
}

// BenchmarkRemoteVariants reads one object from versitygw on loopback
// into host memory through each variant of KVIK_BENCH_REMOTE_VARIANTS
// (see SetRemoteVariant; default default,direct,stage1m,task16m), into
// fresh memory ("cold", unless KVIK_BENCH_REMOTE_COLD=0), and into device
// memory where there is a GPU, the reads alternating round after round
// into one buffer, each variant with its own handle opened under it. Per variant it reports the median and best GB/s, the CPU
// seconds per GB of this process and of the server (median; loopback
// throughput is bound by both, and CPU time is less swayed than wall
// time by others sharing the machine), and the median over rounds of its
// speed against the first variant's and the device read's in the same
// round, so that every ratio comes from one process and one server:
//
//	KVIK_BENCH_REMOTE_SIZE=1073741824 go test -run '^$' -bench RemoteVariants -benchtime 9x .
func BenchmarkRemoteVariants(b *testing.B) {
	v := s3test.Start(b)
	size := benchRemoteSize(b)
	ref := randomBytes(rand.New(rand.NewPCG(42, 43)), size)
	u := v.Put(b, "variants.bin", ref)
	variants := strings.Split("default,direct,stage1m,task16m", ",")
	if s := os.Getenv("KVIK_BENCH_REMOTE_VARIANTS"); s != "" {
		variants = strings.Split(s, ",")
	}
	buf := make([]byte, size)
	var runs []*remoteRun
	for _, name := range variants {
		h := openVariant(b, name, u, v.Opts())
		runs = append(runs, &remoteRun{name: name, read: func() error {
			restore, err := kvik.SetRemoteVariant(name)
			defer restore()
			if err != nil {
				return err
			}
			if n, err := h.ReadAt(buf, 0); n != size || err != nil {
				return fmt.Errorf("%s: read %d of %d bytes: %v", name, n, size, err)
			}
			return nil
		}, check: func() bool { return bytes.Equal(buf, ref) }})
	}
	if os.Getenv("KVIK_BENCH_REMOTE_COLD") != "0" {
		runs = append(runs, coldRun(b, u, v.Opts(), ref))
	}
	if gputest.Count() > 0 {
		cctx := needGPU(b)
		dev := devAlloc(b, cctx, size)
		h := openVariant(b, "default", u, v.Opts())
		runs = append(runs, &remoteRun{name: "device", read: func() error {
			if n, err := h.ReadDevice(dev.Ptr(), size, 0, 0); n != size || err != nil {
				return fmt.Errorf("device: read %d of %d bytes: %v", n, size, err)
			}
			return nil
		}, check: func() bool { return bytes.Equal(fromDevice(b, cctx, dev.Ptr(), size), ref) }})
	}
	// One untimed, checked round faults the buffer in and opens the
	// connections.
	reads := make([]func() error, len(runs))
	for i, r := range runs {
		clear(buf)
		if r.before != nil {
			r.before()
		}
		if err := r.read(); err != nil {
			b.Fatal(err)
		}
		if !r.check() {
			b.Fatalf("%s: read bytes differ from the object", r.name)
		}
		reads[i] = r.timed
	}
	b.SetBytes(int64(size) * int64(len(runs)))
	secs := alternate(b, reads, func(_, j int) {
		if runs[j].before != nil {
			runs[j].before()
		}
	})
	gb := float64(size) / 1e9
	for i, r := range runs {
		b.Logf("%s: GB/s by round %.2f", r.name, perRound(size, secs[i]))
		b.ReportMetric(gbps(size, secs[i]), r.name+"-GB/s")
		b.ReportMetric(gb/slices.Min(secs[i]), r.name+"-best-GB/s")
		b.ReportMetric(median(r.cpu)/gb, r.name+"-cpu-s/GB")
		b.ReportMetric(median(r.server)/gb, r.name+"-server-cpu-s/GB")
		if i > 0 {
			b.ReportMetric(pairedRatio(secs[0], secs[i]), r.name+"/"+runs[0].name)
		}
	}
	if dev := slices.IndexFunc(runs, func(r *remoteRun) bool { return r.name == "device" }); dev >= 0 {
		for i, r := range runs[:dev] {
			b.ReportMetric(pairedRatio(secs[dev], secs[i]), r.name+"/device")
		}
	}
}

// coldRun returns the row "cold": the built-in read into memory never
// touched before (a fresh anonymous mapping each time, made and unmapped
// outside the timing), as a program's first read into a new buffer
// meets it: the page faults of the destination count.
func coldRun(b *testing.B, u string, opts []kvik.RemoteOption, ref []byte) *remoteRun {
	h := openVariant(b, "default", u, opts)
	var mem []byte
	r := &remoteRun{name: "cold"}
	r.before = func() {
		if mem != nil {
			unix.Munmap(mem)
		}
		var err error
		if mem, err = unix.Mmap(-1, 0, len(ref), unix.PROT_READ|unix.PROT_WRITE, unix.MAP_PRIVATE|unix.MAP_ANON); err != nil {
			b.Fatal(err)
		}
	}
	r.read = func() error {
		if n, err := h.ReadAt(mem, 0); n != len(ref) || err != nil {
			return fmt.Errorf("cold: read %d of %d bytes: %v", n, len(ref), err)
		}
		return nil
	}
	r.check = func() bool { return bytes.Equal(mem, ref) }
	b.Cleanup(func() { unix.Munmap(mem) })
	return r
}

// remoteRun is one row of BenchmarkRemoteVariants: a read, its check,
// and the CPU seconds each timed read took in this process and in its
// children (the server).
type remoteRun struct {
	name        string
	before      func() // untimed, before each read; may be nil
	read        func() error
	check       func() bool
	cpu, server []float64
}

// timed runs the read and records its CPU time.
func (r *remoteRun) timed() error {
	c0, s0 := selfCPU(), childrenCPU()
	err := r.read()
	r.cpu, r.server = append(r.cpu, selfCPU()-c0), append(r.server, childrenCPU()-s0)
	return err
}

// selfCPU returns the user and system CPU seconds this process has used.
func selfCPU() float64 {
	var ru syscall.Rusage
	syscall.Getrusage(syscall.RUSAGE_SELF, &ru)
	return time.Duration(ru.Utime.Nano() + ru.Stime.Nano()).Seconds()
}

// childrenCPU returns the user and system CPU seconds the running
// children of this process have used (from /proc, in clock ticks of
// 10 ms), or 0 where /proc cannot tell.
func childrenCPU() float64 {
	tasks, _ := filepath.Glob("/proc/self/task/*/children")
	var ticks int64
	for _, t := range tasks {
		kids, _ := os.ReadFile(t)
		for _, pid := range strings.Fields(string(kids)) {
			stat, err := os.ReadFile("/proc/" + pid + "/stat")
			if err != nil {
				continue
			}
			// Fields after the command's closing parenthesis: state is
			// the first, utime the 12th, stime the 13th.
			f := strings.Fields(string(stat[bytes.LastIndexByte(stat, ')')+1:]))
			if len(f) > 12 {
				u, _ := strconv.ParseInt(f[11], 10, 64)
				s, _ := strconv.ParseInt(f[12], 10, 64)
				ticks += u + s
			}
		}
	}
	return float64(ticks) / 100
}

// openVariant opens the object at u under variant name (which may shape
// the handle's transport) and closes it when the benchmark ends.
func openVariant(b *testing.B, name, u string, opts []kvik.RemoteOption) *kvik.RemoteHandle {
	restore, err := kvik.SetRemoteVariant(name)
	defer restore()
	if err != nil {
		b.Fatal(err)
	}
	h, err := kvik.OpenRemote(context.Background(), u, opts...)
	if err != nil {
		b.Fatal(err)
	}
	b.Cleanup(func() { h.Close() })
	return h
}

// pairedRatio returns the median, over rounds, of how many times faster
// the read that took secs ran than the one that took base in the same
// round: drifts of a shared machine then cancel out.
func pairedRatio(base, secs []float64) float64 {
	r := make([]float64, min(len(base), len(secs)))
	for i := range r {
		r[i] = base[i] / secs[i]
	}
	return median(r)
}

// perRound returns the throughput of each read of size bytes.
func perRound(size int, secs []float64) []float64 {
	g := make([]float64, len(secs))
	for i, s := range secs {
		g[i] = float64(size) / s / 1e9
	}
	return g
}
