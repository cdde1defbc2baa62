package kvik_test

import (
	"bytes"
	"context"
	"fmt"
	"io"
	"math/rand/v2"
	"testing"

	"github.com/kvikgo/kvik"
	"github.com/kvikgo/kvik/cuda"
	"github.com/kvikgo/kvik/internal/testkit/s3test"
)

// TestRemoteDevice reads S3 objects into device memory at random,
// unaligned offsets and compares the device bytes with the object, with
// bodies received straight into the bounce buffers and through staging
// buffers.
func TestRemoteDevice(t *testing.T) {
	cctx := needGPU(t)
	v := s3test.Start(t)
	smallTasks(t, 1<<20)
	rng := rand.New(rand.NewPCG(30, 3))
	eachBodyVariant(t, func(t *testing.T) {
		for _, size := range []int{5000, 3<<20 + 4321, 17<<20 + rng.IntN(1<<20)} {
			want := randomBytes(rng, size)
			u := v.Put(t, fmt.Sprintf("dev/%d.bin", size), want)
			h, err := kvik.OpenRemote(context.Background(), u, v.Opts()...)
			if err != nil {
				t.Fatal(err)
			}
			d := devAlloc(t, cctx, size+4096)
			for i := range 6 {
				off := rng.Int64N(int64(size))
				n := rng.IntN(size) + 1
				devOff := rng.Int64N(4096)
				var got int
				if i%2 == 0 {
					got, err = h.ReadDevice(d.Ptr(), n, off, devOff)
				} else {
					got, err = h.PReadDevice(context.Background(), d.Ptr(), n, off, devOff).Get()
				}
				wantN := min(n, size-int(off))
				if got != wantN || (wantN < n) != (err == io.EOF) || (err != nil && err != io.EOF) {
					t.Fatalf("ReadDevice(%d at %d) = %d, %v; want %d", n, off, got, err, wantN)
				}
				if !bytes.Equal(fromDevice(t, cctx, d.Ptr()+cuda.DevicePtr(devOff), wantN), want[off:off+int64(wantN)]) {
					t.Fatalf("ReadDevice(%d at %d, device offset %d): bytes differ", n, off, devOff)
				}
			}
			h.Close()
		}
	})
}

// TestRemoteDeviceUpload uploads device memory and checks the stored
// object.
func TestRemoteDeviceUpload(t *testing.T) {
	cctx := needGPU(t)
	v := s3test.Start(t)
	smallTasks(t, 5<<20)
	rng := rand.New(rand.NewPCG(31, 3))
	for _, size := range []int{777, 12<<20 + 99} {
		want := randomBytes(rng, size)
		d := devAlloc(t, cctx, size+100)
		toDevice(t, cctx, d.Ptr()+100, want)
		key := fmt.Sprintf("devup/%d.bin", size)
		if err := kvik.UploadS3Device(context.Background(), "s3://"+s3test.Bucket+"/"+key, d.Ptr(), size, 100, v.Opts()...); err != nil {
			t.Fatal(err)
		}
		if got, ok := v.Object(key); !ok || !bytes.Equal(got, want) {
			t.Fatalf("uploaded %d device bytes: stored %d", size, len(got))
		}
	}
}
