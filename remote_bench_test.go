package kvik_test

import (
	"bytes"
	"context"
	"math/rand/v2"
	"os"
	"strconv"
	"testing"

	"github.com/kvikgo/kvik"
	"github.com/kvikgo/kvik/internal/s3test"
)

// benchRemoteSize is the object size of the remote benchmarks:
// KVIK_BENCH_REMOTE_SIZE bytes, 1 GiB by default.
func benchRemoteSize(b *testing.B) int {
	if n, err := strconv.Atoi(os.Getenv("KVIK_BENCH_REMOTE_SIZE")); err == nil && n > 0 {
		return n
	}
	return 1 << 30
}

// BenchmarkRemoteS3 reads one object from versitygw on loopback: kvik's
// parallel ranged GETs into host memory and into device memory, and one
// GET stream (the whole object as one task), in the same run.
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
