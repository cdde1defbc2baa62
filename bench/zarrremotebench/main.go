// Command zarrremotebench measures Zarr region reads from S3 into GPU
// memory (bench/zarr_remote_gpu.sh runs it against versitygw on
// loopback): a v3 float32 array of -size bytes in chunks of -chunk bytes,
// uncompressed, read whole into device memory, against (a) a loop that
// fetches one chunk at a time into pinned memory and copies it to the
// device, and (b) kvik's read of the same bytes as one object
// (RemoteHandle.ReadDevice); then the compressed (zstd, Blosc LZ4 and
// zstd with byte shuffle, gzip; data a smooth field plus noise) and the
// sharded (uncompressed and zstd) variants. The configurations take turns within each of -reps rounds;
// medians and their ratios are printed.
package main

import (
	"context"
	"flag"
	"fmt"
	"hash/crc32"
	"log"
	"os"
	"path/filepath"
	"sort"
	"strings"
	"time"

	"github.com/kvikgo/kvik"
	"github.com/kvikgo/kvik/cuda"
	"github.com/kvikgo/kvik/internal/testkit/fielddata"
	"github.com/kvikgo/kvik/zarr"
)

var bg = context.Background()

func main() {
	dir := flag.String("dir", "", "versitygw's directory of bucket bkt (arrays are written there directly)")
	size := flag.Int("size", 1<<30, "array size in bytes")
	chunk := flag.Int("chunk", 1<<20, "chunk size in bytes (a multiple of 4 KiB)")
	reps := flag.Int("reps", 3, "rounds; each configuration runs once per round")
	requests := flag.Int("requests", 0, "requests in flight per store (0: zarr.DefaultMaxRequests)")
	flag.Parse()
	if *dir == "" || os.Getenv("AWS_ENDPOINT_URL") == "" {
		log.Fatal("need -dir and the AWS_* variables of the S3 server")
	}
	const cols = 1024 // float32: 4 KiB rows
	rowsPerChunk := *chunk / (4 * cols)
	rows := *size / (4 * cols)
	shape, chunks := []int{rows, cols}, []int{rowsPerChunk, cols}
	bytesLE := zarr.Codec{Name: "bytes", Configuration: map[string]any{"endian": "little"}}
	zstd := zarr.Codec{Name: "zstd", Configuration: map[string]any{"level": 3}}
	blosc := func(cname string, clevel int) zarr.Codec {
		return zarr.Codec{Name: "blosc", Configuration: map[string]any{"cname": cname, "clevel": clevel, "shuffle": "shuffle", "typesize": 4, "blocksize": 0}}
	}
	sharded := func(inner ...zarr.Codec) zarr.Metadata {
		return zarr.Metadata{Shape: shape, ChunkShape: []int{32 * rowsPerChunk, cols}, Codecs: []zarr.Codec{{Name: "sharding_indexed", Configuration: map[string]any{
			"chunk_shape": chunks, "codecs": inner, "index_location": "end",
			"index_codecs": []zarr.Codec{bytesLE, {Name: "crc32c"}},
		}}}}
	}
	variants := []struct {
		name string
		m    zarr.Metadata
	}{
		{"raw", zarr.Metadata{Shape: shape, ChunkShape: chunks}},
		{"zstd", zarr.Metadata{Shape: shape, ChunkShape: chunks, Codecs: []zarr.Codec{bytesLE, zstd}}},
		{"blosc-lz4", zarr.Metadata{Shape: shape, ChunkShape: chunks, Codecs: []zarr.Codec{bytesLE, blosc("lz4", 5)}}},
		{"blosc-zstd", zarr.Metadata{Shape: shape, ChunkShape: chunks, Codecs: []zarr.Codec{bytesLE, blosc("zstd", 3)}}},
		{"gzip", zarr.Metadata{Shape: shape, ChunkShape: chunks, Codecs: []zarr.Codec{bytesLE, {Name: "gzip", Configuration: map[string]any{"level": 5}}}}},
		{"sharded", sharded(bytesLE)},
		{"sharded-zstd", sharded(bytesLE, zstd)},
	}
	data := fielddata.Float32(rows, cols, 1)
	want := crc32.ChecksumIEEE(data)
	check(os.WriteFile(filepath.Join(*dir, "raw.bin"), data, 0o644))
	var opts []zarr.StoreOption
	if *requests > 0 {
		opts = append(opts, zarr.WithMaxRequests(*requests))
	}
	arrays := map[string]*zarr.Array{}
	for _, v := range variants {
		local, err := zarr.NewDirStore(filepath.Join(*dir, v.name+".zarr"))
		check(err)
		v.m.DataType = zarr.DataType{Kind: zarr.Float, Size: 4}
		a, err := zarr.Create(bg, local, "", v.m)
		check(err)
		check(a.WriteRegion(bg, []int{0, 0}, shape, data))
		s, err := zarr.OpenURL(bg, "s3://bkt/"+v.name+".zarr", opts...)
		check(err)
		defer s.Close()
		arrays[v.name], err = zarr.Open(bg, s, "")
		check(err)
	}
	check(cuda.Init())
	dev, err := cuda.DeviceGet(0)
	check(err)
	cctx, err := dev.PrimaryCtxRetain()
	check(err)
	defer dev.PrimaryCtxRelease()
	var buf *cuda.DeviceBuffer
	check(cuda.WithContext(cctx, func() (err error) { buf, err = cuda.MemAlloc(len(data)); return err }))
	defer buf.Close()
	obj, err := kvik.OpenRemote(bg, "s3://bkt/raw.bin")
	check(err)
	defer obj.Close()
	raw := arrays["raw"]
	runs := []struct {
		name string
		f    func() error
	}{
		{"zarr raw region", func() error { return raw.ReadRegionDevice(bg, []int{0, 0}, shape, buf.Ptr()) }},
		{"chunk loop", func() error { return chunkLoop(cctx, raw, rows, rowsPerChunk, cols, buf) }},
		{"raw object", func() error { _, err := obj.ReadDevice(buf.Ptr(), len(data), 0, 0); return err }},
	}
	for _, v := range variants[1:] {
		a := arrays[v.name]
		runs = append(runs, struct {
			name string
			f    func() error
		}{"zarr " + v.name + " region", func() error { return a.ReadRegionDevice(bg, []int{0, 0}, shape, buf.Ptr()) }})
	}
	d, _ := kvik.GetDefaults()
	fmt.Printf("array %d MiB, %d chunks of %d KiB, float32 %v; %d workers, %d requests in flight per store; %d rounds\n",
		len(data)>>20, rows/rowsPerChunk, *chunk>>10, shape, d.NumThreads, func() int {
			if *requests > 0 {
				return *requests
			}
			return zarr.DefaultMaxRequests()
		}(), *reps)
	times := map[string][]time.Duration{}
	for r := 0; r < *reps; r++ {
		for _, run := range runs {
			check(cuda.WithContext(cctx, func() error { return cuda.MemsetD8(buf.Ptr(), 0, len(data)) }))
			t := time.Now()
			check(run.f())
			times[run.name] = append(times[run.name], time.Since(t))
			if r == 0 { // untimed check of what arrived
				got := make([]byte, len(data))
				check(cuda.WithContext(cctx, func() error { return cuda.MemcpyDtoH(got, buf.Ptr()) }))
				if crc32.ChecksumIEEE(got) != want {
					log.Fatalf("%s: device bytes differ from the array", run.name)
				}
			}
		}
	}
	med := map[string]float64{}
	for _, run := range runs {
		ts := times[run.name]
		sort.Slice(ts, func(i, j int) bool { return ts[i] < ts[j] })
		med[run.name] = float64(len(data)) / ts[len(ts)/2].Seconds() / 1e9
		fmt.Printf("%-20s median %6.2f GB/s  (%v)\n", run.name, med[run.name], ts)
	}
	ratio := func(a, b string) float64 { return med[a] / med[b] }
	fmt.Printf("RATIO zarr raw / chunk loop    %.2fx (target >= 8)\n", ratio("zarr raw region", "chunk loop"))
	fmt.Printf("RATIO zarr raw / raw object    %.2fx (target >= 0.7)\n", ratio("zarr raw region", "raw object"))
	fmt.Printf("RATIO zarr sharded / raw object %.2fx (target >= 0.8)\n", ratio("zarr sharded region", "raw object"))
	for _, v := range variants[1:] {
		fmt.Printf("RATIO zarr %s / zarr raw %.2fx (issue 40: >= 0.8 for zstd, blosc, sharded-zstd)\n", v.name, ratio("zarr "+v.name+" region", "zarr raw region"))
	}
	for _, run := range runs {
		fmt.Printf("RESULT s3_%s %.3f\n", strings.ReplaceAll(strings.TrimSuffix(strings.TrimPrefix(run.name, "zarr "), " region"), " ", "_"), med[run.name])
	}
	fmt.Println("ZARRREMOTEBENCH OK")
}

// chunkLoop fetches each chunk of a, one at a time, into pinned host
// memory and copies it to its place in buf: the loop a user writes
// without a concurrent reader.
func chunkLoop(cctx cuda.Context, a *zarr.Array, rows, rowsPerChunk, cols int, buf *cuda.DeviceBuffer) error {
	n := rowsPerChunk * cols * 4
	var pb *kvik.PinnedBuffer
	// A buffer of the size zarr's device reads stage through, so that
	// kvik's staging pool keeps its buffers from one run to the next.
	d, _ := kvik.GetDefaults()
	if err := cuda.WithContext(cctx, func() (err error) { pb, err = kvik.GetPinnedBuffer(max(n, d.TaskSize)); return err }); err != nil {
		return err
	}
	defer cuda.WithContext(cctx, func() error { pb.Release(); return nil })
	host := pb.Bytes()[:n:n]
	for r := 0; r < rows; r += rowsPerChunk {
		b, err := a.Store().Get(bg, a.ChunkKey([]int{r / rowsPerChunk, 0}), host)
		if err != nil {
			return err
		}
		if len(b) != n {
			return fmt.Errorf("chunk %d: %d bytes", r/rowsPerChunk, len(b))
		}
		off := cuda.DevicePtr(r * cols * 4)
		if err := cuda.WithContext(cctx, func() error { return cuda.MemcpyHtoD(buf.Ptr()+off, b) }); err != nil {
			return err
		}
	}
	return nil
}

func check(err error) {
	if err != nil {
		log.Fatal(err)
	}
}
