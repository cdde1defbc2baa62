// Command zarrbench measures zarr region reads into device memory on a
// GPU machine: an uncompressed v3 float32 array in page cache against
// kvik.ReadFileToDevice of the same bytes, and zstd-compressed reads
// against the number of decode workers.
package main

import (
	"context"
	"encoding/binary"
	"flag"
	"fmt"
	"io"
	"io/fs"
	"log"
	"math"
	"os"
	"path/filepath"
	"sort"
	"syscall"
	"time"

	"github.com/kvikgo/kvik"
	"github.com/kvikgo/kvik/cuda"
	"github.com/kvikgo/kvik/zarr"
)

func main() {
	dir := flag.String("dir", "/dev/shm/zarrbench", "directory for the arrays")
	rawMiB := flag.Int("raw-mib", 4096, "uncompressed array size (MiB, a multiple of 64)")
	zstdMiB := flag.Int("zstd-mib", 1024, "zstd array size (MiB)")
	reps := flag.Int("reps", 3, "repetitions (best is reported)")
	flag.Parse()
	os.RemoveAll(*dir)
	defer os.RemoveAll(*dir)

	cols := 1 << 16 // 256 KiB rows
	rows := *rawMiB << 20 / (cols * 4)
	s, err := zarr.NewDirStore(filepath.Join(*dir, "raw"))
	check(err)
	raw, err := zarr.Create(bg, s, "", zarr.Metadata{Shape: []int{rows, cols}, ChunkShape: []int{256, cols}, DataType: zarr.DataType{Kind: zarr.Float, Size: 4}})
	check(err)
	fill(raw, rows, cols, 256, false)
	// The same bytes in one file, for kvik.ReadFileToDevice.
	flat, err := os.Create(filepath.Join(*dir, "flat.bin"))
	check(err)
	band := make([]byte, 256*cols*4)
	for r := 0; r < rows; r += 256 {
		check(raw.ReadRegion(bg, []int{r, 0}, []int{r + 256, cols}, band))
		_, err := flat.Write(band)
		check(err)
	}
	flat.Close()
	syscall.Sync() // no writeback during the timed reads
	// kvik writes chunks with O_DIRECT and, under the default read policy,
	// reads uncached ranges with O_DIRECT too, so nothing above left the
	// chunks in the page cache: load them, as the comparison is warm.
	warm(filepath.Join(*dir, "raw"))
	size := rows * cols * 4

	check(cuda.Init())
	dev, _ := cuda.DeviceGet(0)
	ctx, err := dev.PrimaryCtxRetain()
	check(err)
	var buf *cuda.DeviceBuffer
	check(cuda.WithContext(ctx, func() (err error) { buf, err = cuda.MemAlloc(size); return err }))
	name, _ := dev.Name()
	fmt.Printf("device %s, %d MiB float32 array, chunks 256x%d (64 MiB), page cache\n", name, *rawMiB, cols)

	zarrT := best(*reps, func() { check(raw.ReadRegionDevice(bg, []int{0, 0}, []int{rows, cols}, buf.Ptr())) })
	flatT := best(*reps, func() {
		b, err := kvik.ReadFileToDevice(filepath.Join(*dir, "flat.bin"))
		check(err)
		b.Close()
	})
	verify(ctx, raw, buf, rows, cols)
	fmt.Printf("uncompressed region read to device: %.2f GB/s; kvik.ReadFileToDevice: %.2f GB/s; ratio %.2fx\n",
		gbs(size, zarrT), gbs(size, flatT), flatT.Seconds()/zarrT.Seconds())
	os.RemoveAll(filepath.Join(*dir, "raw"))
	os.Remove(filepath.Join(*dir, "flat.bin"))

	// zstd: 4 MiB chunks of smooth data with noise.
	zcols := 1 << 14
	zrows := *zstdMiB << 20 / (zcols * 4)
	zs, err := zarr.NewDirStore(filepath.Join(*dir, "zstd"))
	check(err)
	za, err := zarr.Create(bg, zs, "", zarr.Metadata{Shape: []int{zrows, zcols}, ChunkShape: []int{64, zcols}, DataType: zarr.DataType{Kind: zarr.Float, Size: 4},
		Codecs: []zarr.Codec{{Name: "bytes"}, {Name: "zstd", Configuration: map[string]any{"level": 1}}}})
	check(err)
	fill(za, zrows, zcols, 64, true)
	syscall.Sync()
	warm(filepath.Join(*dir, "zstd"))
	zsize := zrows * zcols * 4
	var stored int64
	keys, _ := zs.List(bg, "c/")
	for _, k := range keys {
		b, _ := zs.Get(bg, k, nil)
		stored += int64(len(b))
	}
	fmt.Printf("zstd array: %d MiB decoded, %d MiB stored (ratio %.2f), 4 MiB chunks\n", zsize>>20, stored>>20, float64(zsize)/float64(stored))
	var one time.Duration
	for _, w := range []int{1, 2, 4, 8, 16} {
		za.SetWorkers(w)
		d := best(*reps, func() { check(za.ReadRegionDevice(bg, []int{0, 0}, []int{zrows, zcols}, buf.Ptr())) })
		h := best(*reps, func() { check(za.ReadRegion(bg, []int{0, 0}, []int{zrows, zcols}, make([]byte, zsize))) })
		if w == 1 {
			one = d
		}
		fmt.Printf("zstd workers %2d: device %.2f GB/s (%.2fx of 1 worker), host %.2f GB/s\n", w, gbs(zsize, d), one.Seconds()/d.Seconds(), gbs(zsize, h))
	}
	verify(ctx, za, buf, zrows, zcols)
	fmt.Println("ZARRBENCH OK")
}

// fill writes value(r, c) = sin(r)*1000 + c/7 + small noise, band by band;
// quantized values keep fewer significant bits.
func fill(a *zarr.Array, rows, cols, band int, quantized bool) {
	b := make([]byte, band*cols*4)
	x := uint32(1)
	var base float32
	for r0 := 0; r0 < rows; r0 += band {
		for i := 0; i < band*cols; i++ {
			x = x*1664525 + 1013904223
			r, c := r0+i/cols, i%cols
			if c == 0 {
				base = float32(math.Sin(float64(r)) * 1000)
			}
			v := base + float32(c)/7 + float32(x>>28)/64
			if quantized { // fewer significant bits: compressible, as measured data often is
				v = float32(math.Round(float64(base))) + float32(c/16)/4 + float32(x>>30)
			}
			binary.LittleEndian.PutUint32(b[4*i:], math.Float32bits(v))
		}
		check(a.WriteRegion(bg, []int{r0, 0}, []int{r0 + band, cols}, b))
	}
}

// verify compares a few device rows with host reads.
func verify(ctx cuda.Context, a *zarr.Array, buf *cuda.DeviceBuffer, rows, cols int) {
	for _, r := range []int{0, rows / 3, rows - 1} {
		want := make([]byte, cols*4)
		check(a.ReadRegion(bg, []int{r, 0}, []int{r + 1, cols}, want))
		got := make([]byte, cols*4)
		check(cuda.WithContext(ctx, func() error { return cuda.MemcpyDtoH(got, buf.Ptr()+cuda.DevicePtr(r*cols*4)) }))
		if string(got) != string(want) {
			log.Fatalf("row %d differs between device and host reads", r)
		}
	}
}

func best(n int, f func()) time.Duration {
	var ts []time.Duration
	for i := 0; i < n; i++ {
		t := time.Now()
		f()
		ts = append(ts, time.Since(t))
	}
	sort.Slice(ts, func(i, j int) bool { return ts[i] < ts[j] })
	return ts[0]
}

func gbs(n int, d time.Duration) float64 { return float64(n) / d.Seconds() / 1e9 }

func check(err error) {
	if err != nil {
		log.Fatal(err)
	}
}

// warm reads every file under dir through the page cache.
func warm(dir string) {
	check(filepath.WalkDir(dir, func(path string, d fs.DirEntry, err error) error {
		if err != nil || d.IsDir() {
			return err
		}
		f, err := os.Open(path)
		if err != nil {
			return err
		}
		defer f.Close()
		_, err = io.Copy(io.Discard, f)
		return err
	}))
}

// bg is the context of every call: the benchmark is never cancelled.
var bg = context.Background()
