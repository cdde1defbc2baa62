package remote

import (
	"bytes"
	"context"
	"fmt"
	"testing"

	"github.com/aws/aws-sdk-go-v2/aws"
	tm "github.com/aws/aws-sdk-go-v2/feature/s3/transfermanager"

	"github.com/kvikgo/kvik/cuda"
)

// BenchmarkS3ReadDevice compares, in one run on one server, reads of one
// object (KVIK_BENCH_REMOTE_SIZE, default 1 GiB, random) into GPU 0's
// memory: kvik's RemoteHandle.ReadDevice (ranged GETs, each part copied
// to the GPU as it arrives) against what a Go program does with the AWS
// SDK, the transfer manager's concurrent download (kvik's concurrency and
// part size) into pinned host memory and then one copy to the GPU. The
// pinned buffer is allocated once, outside the timing: the SDK's best
// case. Each path's bytes are checked against the object once; then the
// paths take turns round after round, as in BenchmarkS3Read, which
// reports the same metrics (kvik/sdk-transfermanager+copy: the SDK's
// time over kvik's within a round, median over rounds):
//
//	KVIK_BENCH_REMOTE_SIZE=1073741824 go test -run '^$' -bench S3ReadDevice -benchtime 9x
func BenchmarkS3ReadDevice(b *testing.B) {
	size := objectSize()
	g := gpu0(b)
	url, data := server(b, size)
	conc, part := workers(b)
	mgr := downloader(sdkClient(url, conc), conc, part)
	ctx := context.Background()
	h := openObject(b, url)
	dev := g.alloc(b, size)
	var pinned *cuda.HostBuffer
	if err := g.with(func() (err error) { pinned, err = cuda.MemHostAlloc(size, 0); return err }); err != nil {
		b.Fatal(err)
	}
	defer pinned.Close()
	paths := []readPath{
		{"kvik", func() error {
			n, err := h.ReadDevice(dev.Ptr(), size, 0, 0)
			if err == nil && n != size {
				err = fmt.Errorf("read %d of %d bytes", n, size)
			}
			return err
		}},
		{"sdk-transfermanager+copy", func() error {
			in := &tm.DownloadObjectInput{Bucket: aws.String(bucket), Key: aws.String("obj.bin"), WriterAt: &writerAt{buf: pinned.Bytes()}}
			if _, err := mgr.DownloadObject(ctx, in); err != nil {
				return err
			}
			return g.with(func() error { return cuda.MemcpyHtoD(dev.Ptr(), pinned.Bytes()) })
		}},
	}
	got, zeros := make([]byte, size), make([]byte, size)
	for _, p := range paths {
		clear(pinned.Bytes())
		if err := g.with(func() error { return cuda.MemcpyHtoD(dev.Ptr(), zeros) }); err != nil {
			b.Fatal(err)
		}
		if err := p.read(); err != nil {
			b.Fatalf("%s: %v", p.name, err)
		}
		if err := g.with(func() error { return cuda.MemcpyDtoH(got, dev.Ptr()) }); err != nil {
			b.Fatal(err)
		}
		if !bytes.Equal(got, data) {
			b.Fatalf("%s: the bytes on the GPU differ from the object", p.name)
		}
	}
	reportTurns(b, paths, takeTurns(b, paths, size), size)
}

// gpu is GPU 0's primary context, retained for a benchmark.
type gpu struct{ ctx cuda.Context }

// gpu0 retains GPU 0's primary context until the benchmark ends, or
// skips it, saying why, where there is no usable GPU.
func gpu0(b *testing.B) gpu {
	if err := cuda.Init(); err != nil {
		b.Skipf("no CUDA driver: %v", err)
	}
	if n, err := cuda.DeviceGetCount(); err != nil || n == 0 {
		b.Skipf("no CUDA device (count %d, %v)", n, err)
	}
	dev, err := cuda.DeviceGet(0)
	if err != nil {
		b.Skip(err)
	}
	ctx, err := dev.PrimaryCtxRetain()
	if err != nil {
		b.Skip(err)
	}
	b.Cleanup(func() { dev.PrimaryCtxRelease() })
	return gpu{ctx}
}

// with runs f with the context current.
func (g gpu) with(f func() error) error { return cuda.WithContext(g.ctx, f) }

// alloc allocates size bytes on the GPU until the benchmark ends.
func (g gpu) alloc(b *testing.B, size int) *cuda.DeviceBuffer {
	var buf *cuda.DeviceBuffer
	if err := g.with(func() (err error) { buf, err = cuda.MemAlloc(size); return err }); err != nil {
		b.Fatal(err)
	}
	b.Cleanup(func() { buf.Close() })
	return buf
}
