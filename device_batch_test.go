package kvik_test

import (
	"bytes"
	"fmt"
	"math/rand/v2"
	"os"
	"path/filepath"
	"testing"

	"github.com/kvikgo/kvik"
	"github.com/kvikgo/kvik/cuda"
)

// TestDeviceReadBatches checks when a device read hands its workers
// batches of tasks: only for a cached range with at least four batches
// per worker, on two workers or more; the batches cover the read's tasks
// in order, up to four at a time, the last two tasks per worker alone.
// (No GPU needed: this is the plan.)
func TestDeviceReadBatches(t *testing.T) {
	rng := rand.New(rand.NewPCG(51, 52))
	path := filepath.Join(t.TempDir(), "f")
	const size = 8 << 20
	if err := os.WriteFile(path, randomBytes(rng, size), 0o644); err != nil {
		t.Fatal(err)
	}
	f, err := kvik.Open(path, "r", 0)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	d := kvik.BuiltinDefaults()
	d.TaskSize = 64 << 10
	off, n := int64(12345), size-20000 // 128 tasks, the first short
	const tasks = 128
	for _, c := range []struct{ workers, wantK int }{{1, 1}, {2, 4}, {4, 4}, {8, 4}, {16, 2}, {32, 1}, {64, 1}} {
		got := kvik.DeviceReadBatches(f, d, off, n, c.workers)
		want := tasks
		if c.wantK > 1 {
			want = (tasks-2*c.workers+c.wantK-1)/c.wantK + 2*c.workers
		}
		if len(got) != want {
			t.Fatalf("%d workers: %d tasks, want %d (batches of %d)", c.workers, len(got), want, c.wantK)
		}
		at := off
		for _, b := range got {
			if b[0] != at || b[1] > int64(c.wantK)*int64(d.TaskSize)+4096 {
				t.Fatalf("%d workers: task [%d, +%d) at %d", c.workers, b[0], b[1], at)
			}
			at += b[1]
		}
		if at != off+int64(n) {
			t.Fatalf("%d workers: tasks end at %d, want %d", c.workers, at, off+int64(n))
		}
	}
	// Not cached as far as a read can tell: the policy reads it direct,
	// or the range runs past the end of the file.
	direct := d
	direct.DirectIOReadPolicy = kvik.ReadPolicyDirect
	if got := kvik.DeviceReadBatches(f, direct, off, n, 4); len(got) != tasks {
		t.Fatalf("direct reads batched: %d tasks", len(got))
	}
	past := n + 20000 // ends past the end of the file
	if got, one := kvik.DeviceReadBatches(f, d, off, past, 4), kvik.DeviceReadBatches(f, d, off, past, 1); len(got) != len(one) || len(one) < tasks {
		t.Fatalf("read past the end batched: %d tasks, %d unbatched", len(got), len(one))
	}
}

// TestDeviceBatchedReads reads random cached ranges to the device with
// settings that batch their tasks (small tasks, two to eight workers,
// small and odd bounce buffers), through ReadDevice and a Future, and
// compares every byte with os.File.ReadAt.
func TestDeviceBatchedReads(t *testing.T) {
	ctx := needGPU(t)
	rng := rand.New(rand.NewPCG(53, 54))
	dir := t.TempDir()
	path := filepath.Join(dir, "f")
	data := randomBytes(rng, 24<<20+rng.IntN(1<<20))
	if err := os.WriteFile(path, data, 0o644); err != nil {
		t.Fatal(err)
	}
	for i := range 12 {
		threads := 2 << rng.IntN(3)
		task := (rng.IntN(16) + 1) * 16 << 10
		bounce := []int{4096, 12288, task / 2, task, 16 << 20}[rng.IntN(5)]
		size := 8*threads*task + rng.IntN(4<<20)
		off := int64(rng.IntN(len(data) - size))
		t.Run(fmt.Sprintf("%d/threads=%d/task=%d/bounce=%d/size=%d/off=%d", i, threads, task, bounce, size, off), func(t *testing.T) {
			setDefaults(t, func(d *kvik.Defaults) {
				d.NumThreads, d.TaskSize, d.BounceBufferSize = threads, task, bounce
			})
			f, err := kvik.Open(path, "r", 0, kvik.WithCompatMode(kvik.CompatOn))
			if err != nil {
				t.Fatal(err)
			}
			defer f.Close()
			d, err := kvik.GetDefaults()
			if err != nil {
				t.Fatal(err)
			}
			if tasks := kvik.DeviceReadBatches(f, d, off, size, threads); len(tasks) >= (size+task-1)/task {
				t.Fatalf("settings that should batch did not: %d tasks", len(tasks))
			}
			devOff := int64(rng.IntN(4096))
			buf := devAlloc(t, ctx, size+int(devOff))
			var n int
			if i%2 == 0 {
				n, err = f.ReadDevice(buf.Ptr(), size, off, devOff)
			} else {
				n, err = f.PReadDevice(t.Context(), buf.Ptr(), size, off, devOff).Get()
			}
			if n != size || err != nil {
				t.Fatalf("read %d of %d bytes: %v", n, size, err)
			}
			if got := fromDevice(t, ctx, buf.Ptr()+cuda.DevicePtr(devOff), size); !bytes.Equal(got, data[off:off+int64(size)]) {
				t.Fatal("bytes on the device differ from the file")
			}
		})
	}
}
