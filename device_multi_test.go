package kvik_test

import (
	"bytes"
	"context"
	"fmt"
	"io"
	"math/rand/v2"
	"os"
	"path/filepath"
	"strconv"
	"sync"
	"testing"

	"github.com/kvikgo/kvik"
	"github.com/kvikgo/kvik/cuda"
	"github.com/kvikgo/kvik/internal/testkit/gputest"
)

// TestDeviceSeveralGPUs reads one file into memory on every GPU at once,
// through one handle, and checks each copy.
func TestDeviceSeveralGPUs(t *testing.T) {
	needGPU(t)
	n, _ := cuda.DeviceGetCount()
	if n < 2 {
		t.Skipf("needs two GPUs, found %d", n)
	}
	rng := rand.New(rand.NewPCG(81, 82))
	dir := testDir(t)
	path, data := writeRandomFile(t, rng, dir, 48<<20+77)
	for _, mode := range gpuCompatModes(t, dir) {
		t.Run(mode.String(), func(t *testing.T) {
			setDefaults(t, func(d *kvik.Defaults) { d.NumThreads, d.TaskSize = 8, 1<<20 })
			f, err := kvik.Open(path, "r", 0, kvik.WithCompatMode(mode))
			if err != nil {
				t.Fatal(err)
			}
			defer f.Close()
			bufs := make([]*cuda.DeviceBuffer, n)
			ctxs := make([]cuda.Context, n)
			for i := range n {
				ctx := gputest.Primary(t, i)
				ctxs[i], bufs[i] = ctx, devAlloc(t, ctx, len(data))
			}
			var wg sync.WaitGroup
			futs := make([]*kvik.Future, n)
			for i := range n {
				wg.Add(1)
				go func() {
					defer wg.Done()
					futs[i] = f.PReadDevice(context.Background(), bufs[i].Ptr(), len(data), 0, 0)
				}()
			}
			wg.Wait()
			for i, fut := range futs {
				if got, err := fut.Get(); got != len(data) || err != nil {
					t.Fatalf("GPU %d: %d, %v", i, got, err)
				}
				if !bytes.Equal(fromDevice(t, ctxs[i], bufs[i].Ptr(), len(data)), data) {
					t.Fatalf("GPU %d: bytes differ", i)
				}
			}
		})
	}
}

// TestDevicePropertyRandom runs random device reads and writes (size, file
// and device offsets, workers, task and bounce sizes, GDS threshold, direct
// I/O, compat mode) and compares each with os.File on the same file.
// KVIK_DEVICE_CASES sets the count (default 200; 20 with -short).
func TestDevicePropertyRandom(t *testing.T) {
	ctx := needGPU(t)
	cases := 200
	if testing.Short() {
		cases = 20
	}
	if s := os.Getenv("KVIK_DEVICE_CASES"); s != "" {
		cases, _ = strconv.Atoi(s)
	}
	dir := testDir(t)
	modes := gpuCompatModes(t, dir)
	seed := rand.Uint64()
	t.Logf("seed %d, modes %v", seed, modes)
	rng := rand.New(rand.NewPCG(seed, 5))
	const max = 8 << 20
	path := filepath.Join(dir, "prop")
	ref, err := os.OpenFile(path, os.O_RDWR|os.O_CREATE|os.O_TRUNC, 0o644)
	if err != nil {
		t.Fatal(err)
	}
	defer ref.Close()
	if _, err := ref.Write(randomBytes(rng, max)); err != nil {
		t.Fatal(err)
	}
	dev := devAlloc(t, ctx, max+8192)
	base, err := kvik.GetDefaults()
	if err != nil {
		t.Fatal(err)
	}
	for i := range cases {
		mode := modes[rng.IntN(len(modes))]
		d := base // settings this test does not vary keep their defaults
		d.CompatMode, d.NumThreads = mode, []int{1, 3, 4, 16}[rng.IntN(4)]
		d.TaskSize, d.GDSThreshold = []int{199, 4096, 1 << 20, 4 << 20}[rng.IntN(4)], []int{0, 16 << 10, 1 << 20}[rng.IntN(3)]
		d.BounceBufferSize = []int{1, 4096, 3 * 4096, 1 << 20, 16 << 20}[rng.IntN(5)]
		d.AutoDirectIORead, d.AutoDirectIOWrite = rng.IntN(2) == 0, rng.IntN(2) == 0
		size := rng.IntN(max/4) + 1
		if d.TaskSize < 4096 {
			size = rng.IntN(64<<10) + 1
		}
		off, devOff := rng.Int64N(max), int64(rng.IntN(8192))
		desc := fmt.Sprintf("case %d: %+v size %d off %d devOff %d", i, d, size, off, devOff)
		restore, err := kvik.SetDefaults(d)
		if err != nil {
			t.Fatal(err)
		}
		f, err := kvik.Open(path, "r+", 0)
		if err != nil {
			restore()
			t.Fatalf("%s: %v", desc, err)
		}
		if rng.IntN(2) == 0 { // write from the device, check the file
			data := randomBytes(rng, size)
			toDevice(t, ctx, dev.Ptr()+cuda.DevicePtr(devOff), data)
			if n, err := f.WriteDevice(dev.Ptr(), size, off, devOff); n != size || err != nil {
				t.Fatalf("%s: write %d, %v", desc, n, err)
			}
			got := make([]byte, size)
			if _, err := ref.ReadAt(got, off); err != nil || !bytes.Equal(got, data) {
				t.Fatalf("%s: file differs after the write (%v)", desc, err)
			}
		} else { // read to the device, compare with os.File (EOF included)
			want := make([]byte, size)
			wn, werr := ref.ReadAt(want, off)
			n, err := f.ReadDevice(dev.Ptr(), size, off, devOff)
			if n != wn || (werr == io.EOF) != (err == io.EOF) || (werr == nil) != (err == nil) {
				t.Fatalf("%s: read (%d, %v), os.File (%d, %v)", desc, n, err, wn, werr)
			}
			if !bytes.Equal(fromDevice(t, ctx, dev.Ptr()+cuda.DevicePtr(devOff), n), want[:wn]) {
				t.Fatalf("%s: bytes differ", desc)
			}
		}
		f.Close()
		restore()
	}
}
