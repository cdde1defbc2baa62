package kvik_test

import (
	"bytes"
	"io"
	"math/rand/v2"
	"os"
	"path/filepath"
	"testing"

	"github.com/kvikgo/kvik"
	"github.com/kvikgo/kvik/cuda"
)

// TestDeviceReadVWriteV compares ReadDeviceV with ReadAt of os.File and
// WriteDeviceV with the buffers laid end to end, in every compat mode the
// machine has (cuFile batches with CompatOff), with random buffer sizes
// (some empty) at unaligned offsets, ending mid-vector past the file.
func TestDeviceReadVWriteV(t *testing.T) {
	ctx := needGPU(t)
	dir := testDir(t)
	rng := rand.New(rand.NewPCG(27, 5))
	smallTasks(t, 256<<10)
	const size = 3<<20 + 4097
	data := randomBytes(rng, size)
	path := filepath.Join(dir, "dv")
	if err := os.WriteFile(path, data, 0o644); err != nil {
		t.Fatal(err)
	}
	dev := devAlloc(t, ctx, 2*size)
	for _, mode := range gpuCompatModes(t, dir) {
		f, err := kvik.Open(path, "r+", 0, kvik.WithCompatMode(mode))
		if err != nil {
			t.Fatal(err)
		}
		for i := range 20 {
			off := int64(rng.IntN(size))
			total := rng.IntN(size)
			if i%3 == 0 {
				total = size - int(off) + rng.IntN(9000) // ends past the file
			}
			sizes := vecSizes(rng, total)
			junk := randomBytes(rng, total)
			toDevice(t, ctx, dev.Ptr(), junk)
			// The buffers lie in the allocation in reverse order, with
			// gaps, so that a buffer filled at the wrong place shows.
			var bufs []kvik.DeviceVec
			at := make([]int, len(sizes))
			pos := 2*size - 1
			for j, s := range sizes {
				pos -= s + rng.IntN(64)
				at[j] = pos
				bufs = append(bufs, kvik.DeviceVec{Ptr: dev.Ptr() + cuda.DevicePtr(pos), Size: s})
			}
			before := fromDevice(t, ctx, dev.Ptr(), 2*size)
			n, err := f.ReadDeviceV(bufs, off)
			wantN := min(total, size-int(off))
			if n != wantN || (wantN < total) != (err == io.EOF) || (wantN == total && err != nil) {
				t.Fatalf("%v: ReadDeviceV of %d bytes at %d = %d, %v; want %d", mode, total, off, n, err, wantN)
			}
			got := fromDevice(t, ctx, dev.Ptr(), 2*size)
			want := before
			done := 0
			for j, s := range sizes {
				if k := min(s, wantN-done); k > 0 {
					copy(want[at[j]:], data[int(off)+done:int(off)+done+k])
				}
				done += s
			}
			if !bytes.Equal(got, want) {
				t.Fatalf("%v: ReadDeviceV of %d buffers at %d: device memory differs", mode, len(sizes), off)
			}

			// Write the same buffers back at another offset.
			woff := int64(rng.IntN(size))
			n, err = f.WriteDeviceV(bufs, woff)
			if n != total || err != nil {
				t.Fatalf("%v: WriteDeviceV of %d bytes at %d = %d, %v", mode, total, woff, n, err)
			}
			var laid []byte
			for j, s := range sizes {
				laid = append(laid, got[at[j]:at[j]+s]...)
			}
			data = append(data[:0:0], data...)
			if end := int(woff) + total; end > len(data) {
				data = append(data, make([]byte, end-len(data))...)
			}
			copy(data[woff:], laid)
			onDisk, _ := os.ReadFile(path)
			if !bytes.Equal(onDisk, data) {
				t.Fatalf("%v: WriteDeviceV of %d buffers at %d: file differs", mode, len(sizes), woff)
			}
			data = data[:size]
			if err := os.Truncate(path, size); err != nil {
				t.Fatal(err)
			}
		}
		if n, err := f.ReadDeviceV(nil, 0); n != 0 || err != nil {
			t.Fatalf("%v: ReadDeviceV(nil) = %d, %v", mode, n, err)
		}
		f.Close()
	}
	// The read-only handles read device vectors too.
	m, err := kvik.OpenMmap(path, "r")
	if err != nil {
		t.Fatal(err)
	}
	defer m.Close()
	bufs := []kvik.DeviceVec{{Ptr: dev.Ptr() + 100, Size: 5000}, {Ptr: dev.Ptr(), Size: 0}, {Ptr: dev.Ptr() + 9000, Size: 70000}}
	if n, err := m.ReadDeviceV(bufs, size-50000); n != 50000 || err != io.EOF {
		t.Fatalf("MmapHandle.ReadDeviceV past the end = %d, %v", n, err)
	}
	got := fromDevice(t, ctx, dev.Ptr(), 9000+45000)
	if !bytes.Equal(got[100:5100], data[size-50000:size-45000]) || !bytes.Equal(got[9000:], data[size-45000:]) {
		t.Fatal("MmapHandle.ReadDeviceV: device memory differs")
	}
}

// vecSizes cuts total into random sizes, some empty.
func vecSizes(rng *rand.Rand, total int) []int {
	var s []int
	for total > 0 {
		n := min(total, rng.IntN(700<<10)+1)
		if rng.IntN(6) == 0 {
			n = 0
		}
		s = append(s, n)
		total -= n
	}
	return s
}
