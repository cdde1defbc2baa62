// Command zarrbench measures Zarr region reads and writes of local
// arrays (issue 40), on a GPU machine or, without one, the host rows
// only: a float32 array of -side x -side (a smooth field plus noise,
// 2.4-3.7x compressible) in chunks of -chunk x -chunk, stored by kvik in
// each codec of -codecs under -dir (tmpfs), v3, each at DIR/NAME.zarr.
// For each codec it prints the stored ratio, the decode-only and
// encode-only ceilings (every chunk decoded, into memory of its own, or
// encoded, into one reused buffer per goroutine, as a write's pooled
// buffers are, in memory on all cores, decoded GB/s; "decode_hot" decodes
// into one cache-resident buffer per core, an upper bound no read
// reaches), the write of the whole array (WriteRegion into a new
// array, and with a GPU WriteRegionDevice into another), whole-array
// region reads into host and device memory (device reads with zarr's
// default layout of the pinned band buffers, then each layout forced:
// "gpu-reg", "gpu-cel"), in -reps rounds, each of which runs every
// ceiling beside the reads and writes read against it, the best round of
// each reported (the first write, which also makes the process's
// encoders, is reported apart), and kvik.ReadFileToDevice of a file of
// the same bytes as the raw ceiling. Lines "RESULT key value" are for
// bench/zarr_local_gpu.sh's summary; -keep leaves the arrays for
// bench/zarr_tensorstore.py.
package main

import (
	"context"
	"flag"
	"fmt"
	"hash/crc32"
	"log"
	"os"
	"path/filepath"
	"runtime"
	"runtime/pprof"
	"runtime/trace"
	"slices"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/kvikgo/kvik"
	"github.com/kvikgo/kvik/cuda"
	"github.com/kvikgo/kvik/internal/formatkit/zarrtune"
	"github.com/kvikgo/kvik/internal/testkit/fielddata"
	"github.com/kvikgo/kvik/zarr"
)

var bg = context.Background()

func main() {
	dir := flag.String("dir", "/dev/shm/kvik-zarrbench", "directory for the arrays (removed first)")
	side := flag.Int("side", 16384, "array side (float32 side x side: 1 GiB at 16384)")
	chunk := flag.Int("chunk", 512, "chunk side (512: 1 MiB chunks)")
	shard := flag.Int("shard", 4096, "shard side of sharded-zstd and sharded-lz4 (inner chunks of -chunk; sharded-lz4, Blosc LZ4 inner chunks, is not in the default list)")
	reps := flag.Int("reps", 3, "repetitions of each read (the best is reported)")
	codecs := flag.String("codecs", "raw,zstd,blosc-lz4,blosc-zstd,gzip,sharded-zstd", "codecs, comma-separated")
	keep := flag.Bool("keep", false, "leave the arrays in -dir")
	workers := flag.Int("workers", 0, "decode workers (0: GOMAXPROCS)")
	altRows := flag.Bool("alt-rowwrites", false, "in each round, also write each array with its chunks taken in C order, a row (one directory) at once (zarrtune.RowMajorWrites), from host and device memory: RESULT NAME_write_rows, NAME_devwrite_rows")
	altNoSync := flag.Bool("alt-nosync", false, "in each round, also write each array from host memory through a DirStore opened with zarr.WithoutSync (no fsync of each chunk's file and directory: what a disk's flushes cost): RESULT NAME_write_nosync")
	altUnshuffle := flag.Bool("alt-unshuffle", false, "in each round, also read each array into device memory with Blosc's byte shuffle undone on the CPU (zarrtune.CPUUnshuffle) instead of on the GPU: RESULT NAME_gpu_cpuunshuffle")
	gpuShare := flag.Int64("gpushare", 0, "the share of a device read's rows of chunks the GPU decodes (zstd, gzip, zlib), in thousandths (zarrtune.GPUDecodeShare; 0: zarr's default)")
	altGPU := flag.String("alt-gpu", "", "in each round, also read each array of zstd or gzip chunks into device memory with each of these settings of the GPU's share, frames per batch and batches in flight, SHARE/BATCH/SLOTS comma-separated, 0 for zarr's default (zarrtune.GPUDecode): RESULT NAME_gpu_SHARE_BATCH_SLOTS")
	altCPUEncode := flag.Bool("alt-cpuencode", false, "in each round, also write each array whose chunks the GPU encodes (Blosc LZ4) from device memory with the chunks encoded on the CPU (zarrtune.CPUEncode) instead: RESULT NAME_devwrite_cpuencode")
	encodeBytes := flag.Int64("gpuencode-bytes", 0, "bytes of chunks a device write encodes on the GPU at once (zarrtune.GPUEncodeBytes; 0: zarr's default)")
	encodeBlock := flag.Int64("gpuencode-block", 0, "the Blosc block size of chunks a device write encodes on the GPU where the codec leaves it to the encoder (zarrtune.GPUEncodeBlock; 0: zarr's default)")
	altCPUDecode := flag.Bool("alt-cpuzstd", false, "in each round, also read each array of chunks the GPU decodes (zstd, gzip) into device memory with the chunks decoded on the CPU (zarrtune.CPUDecode) instead: the key keeps its old name: RESULT NAME_gpu_cpuzstd")
	flag.BoolVar(&writeEmpty, "write-empty", false, "store chunks all of the fill value (Array.SetWriteEmptyChunks(true)): the writes without the fill-value check, for an A/B in two processes")
	profile := flag.String("profile", "", "a directory for a CPU profile of 5 more writes of each codec (each into a new array) and a trace of one more (NAME-write.prof, .trace), of as many encode ceilings (NAME-encode.prof, .trace), of 5 host reads and a trace of one (NAME-host.prof, .trace) and, with a GPU, a CPU profile (5 reads) and an execution trace (1 read) of its device reads in the default layout and of host writes encoding on the GPU (NAME-write-gpu)")
	flag.Parse()
	zarrtune.GPUEncodeBytes.Store(*encodeBytes)
	zarrtune.GPUEncodeBlock.Store(*encodeBlock)
	zarrtune.GPUDecodeShare.Store(*gpuShare)
	gpuAlts, err := zarrtune.ParseGPUDecode(*altGPU)
	check(err)
	check(os.RemoveAll(*dir))
	check(os.MkdirAll(*dir, 0o755))
	if !*keep {
		defer os.RemoveAll(*dir)
	}
	shape := []int{*side, *side}
	t0 := time.Now()
	data := fielddata.Float32(*side, *side, 1)
	size := len(data)
	sum := crc32.ChecksumIEEE(data)
	fmt.Printf("CRC32 %08x\n", sum)
	fmt.Printf("float32 %v in chunks of %d x %d (%d KiB), %d MiB, %d cores; data made in %.1f s\n",
		shape, *chunk, *chunk, *chunk**chunk*4>>10, size>>20, runtime.GOMAXPROCS(0), time.Since(t0).Seconds())
	zstdImpl, err := zarr.ZstdImplementation()
	check(err)
	fmt.Printf("zstd: %s\n", zstdImpl)
	lz4Impl, err := zarr.LZ4Implementation()
	check(err)
	fmt.Printf("lz4: %s\n", lz4Impl)
	deflateImpl, err := zarr.DeflateImplementation()
	check(err)
	fmt.Printf("deflate: %s\n", deflateImpl)

	g := openGPU(size)
	if g != nil {
		defer g.close()
		fmt.Printf("device: %s\n", g.name)
		flat := filepath.Join(*dir, "flat.bin")
		check(os.WriteFile(flat, data, 0o644))
		d := best(*reps, func() {
			b, err := kvik.ReadFileToDevice(flat)
			check(err)
			b.Close()
		})
		result("file_gpu", gbs(size, d))
		check(os.Remove(flat))
		check(g.put(data)) // the source of the device writes
	} else {
		fmt.Println("no GPU: host rows only")
	}
	host := make([]byte, size)
	fmt.Printf("%-13s %6s %8s %8s %8s %8s %8s %8s %8s %8s\n", "codec", "ratio", "decode", "encode", "write", "devwrite", "host", "gpu", "gpu-reg", "gpu-cel")
	for _, name := range strings.Split(*codecs, ",") {
		m := zarr.Metadata{Shape: shape, ChunkShape: []int{*chunk, *chunk}, DataType: zarr.DataType{Kind: zarr.Float, Size: 4}, Codecs: codecsOf(name, *chunk)}
		if strings.HasPrefix(name, "sharded") {
			m.ChunkShape = []int{*shard, *shard}
		}
		// Rounds: in each, every write and read runs once, next to the
		// ceiling it is read against, so that a machine whose speed
		// drifts (clocks, neighbours) moves both; each figure is the best
		// of its -reps rounds. Each write is into a new array, as the
		// first is (which also makes the process's encoders and grows its
		// heap: RESULT NAME_write_first).
		row := map[string]float64{}
		rounds := map[string][]float64{} // each round's GB/s, for the paired ratios
		keep := func(k string, d time.Duration) {
			row[k] = max(row[k], gbs(size, d))
			rounds[k] = append(rounds[k], gbs(size, d))
		}
		s, a := create(filepath.Join(*dir, name+".zarr"), m, *workers)
		keep("write", timed(func() { check(a.WriteRegion(bg, []int{0, 0}, shape, data)) }))
		row["write_first"] = row["write"]
		c := newCeilings(a, storedChunks(s))
		row["ratio"] = float64(size) / float64(c.storedBytes)
		for i := range max(*reps, 1) {
			if i > 0 {
				_, a = create(filepath.Join(*dir, name+".zarr"), m, *workers)
				keep("write", timed(func() { check(a.WriteRegion(bg, []int{0, 0}, shape, data)) }))
			}
			if *altNoSync {
				_, a = create(filepath.Join(*dir, name+".zarr"), m, *workers, zarr.WithoutSync())
				keep("write_nosync", timed(func() { check(a.WriteRegion(bg, []int{0, 0}, shape, data)) }))
			}
			if *altRows {
				_, a = create(filepath.Join(*dir, name+".zarr"), m, *workers)
				zarrtune.RowMajorWrites.Store(true)
				keep("write_rows", timed(func() { check(a.WriteRegion(bg, []int{0, 0}, shape, data)) }))
				zarrtune.RowMajorWrites.Store(false)
			}
			keep("encode", timed(c.encode))
			keep("decode", timed(c.decode))
			keep("decode_hot", timed(c.decodeHot))
			keep("host", timed(func() { check(a.ReadRegion(bg, []int{0, 0}, shape, host)) }))
			if crc32.ChecksumIEEE(host) != sum {
				log.Fatalf("%s: the host read differs from the data", name)
			}
			if g == nil {
				continue
			}
			// The device reads, each with its zarrtune settings, in an
			// order turned by one each round: the first device read of a
			// round ran up to 1.3x slower than the same read later in it
			// (sharded-zstd, H200), which no one setting should always pay.
			type devRead struct {
				key string
				set func() (restore func())
			}
			var reads []devRead
			for _, l := range layouts {
				reads = append(reads, devRead{l.key, func() func() {
					zarrtune.DeviceLayout.Store(l.layout)
					return func() { zarrtune.DeviceLayout.Store(zarrtune.Auto) }
				}})
			}
			// The alternatives: a switch of zarrtune set for one more read.
			for _, alt := range []struct {
				on  bool
				sw  *atomic.Bool
				key string
			}{{*altUnshuffle, &zarrtune.CPUUnshuffle, "gpu_cpuunshuffle"}, {*altCPUDecode, &zarrtune.CPUDecode, "gpu_cpuzstd"}} {
				if alt.on {
					reads = append(reads, devRead{alt.key, func() func() { alt.sw.Store(true); return func() { alt.sw.Store(false) } }})
				}
			}
			for _, alt := range gpuAlts {
				if name == "zstd" || name == "sharded-zstd" || name == "gzip" {
					reads = append(reads, devRead{gpuAltKey(alt), alt.Set})
				}
			}
			for k := range reads {
				r := reads[(k+i)%len(reads)]
				restore := r.set()
				keep(r.key, timed(func() { check(a.ReadRegionDevice(bg, []int{0, 0}, shape, g.buf.Ptr())) }))
				restore()
				if g.sum() != sum {
					log.Fatalf("%s: the device read (%s) differs from the data", name, r.key)
				}
			}
			// Device writes go into a new array too, as the host writes
			// do: over the old one each chunk's rename also frees the
			// replaced file's pages (a host write over an array took
			// 1.03-1.13x the CPU of one into a new array, on 2 cores).
			if *altRows {
				_, a = create(filepath.Join(*dir, name+".zarr"), m, *workers)
				zarrtune.RowMajorWrites.Store(true)
				keep("devwrite_rows", timed(func() { check(a.WriteRegionDevice(bg, []int{0, 0}, shape, g.src.Ptr())) }))
				zarrtune.RowMajorWrites.Store(false)
			}
			// Host writes with the GPU encoding (SetEncodeDevice): only
			// Blosc LZ4 chunks are ones it encodes.
			if strings.Contains(name, "lz4") {
				_, a = create(filepath.Join(*dir, name+".zarr"), m, *workers)
				a.SetEncodeDevice(0)
				keep("write_gpu", timed(func() { check(a.WriteRegion(bg, []int{0, 0}, shape, data)) }))
				check(a.ReadRegion(bg, []int{0, 0}, shape, host))
				if crc32.ChecksumIEEE(host) != sum {
					log.Fatalf("%s: the array differs from the data after a host write encoded on the GPU", name)
				}
			}
			if *altCPUEncode {
				_, a = create(filepath.Join(*dir, name+".zarr"), m, *workers)
				zarrtune.CPUEncode.Store(true)
				keep("devwrite_cpuencode", timed(func() { check(a.WriteRegionDevice(bg, []int{0, 0}, shape, g.src.Ptr())) }))
				zarrtune.CPUEncode.Store(false)
			}
			_, a = create(filepath.Join(*dir, name+".zarr"), m, *workers)
			keep("devwrite", timed(func() { check(a.WriteRegionDevice(bg, []int{0, 0}, shape, g.src.Ptr())) }))
			check(a.ReadRegion(bg, []int{0, 0}, shape, host))
			if crc32.ChecksumIEEE(host) != sum {
				log.Fatalf("%s: the array differs from the data after WriteRegionDevice", name)
			}
		}
		if *profile != "" {
			check(os.MkdirAll(*profile, 0o755))
			profileReads(filepath.Join(*profile, name+"-host"), func() { check(a.ReadRegion(bg, []int{0, 0}, shape, host)) })
			if g != nil {
				profileReads(filepath.Join(*profile, name), func() { check(a.ReadRegionDevice(bg, []int{0, 0}, shape, g.buf.Ptr())) })
			}
			// Writes as the reads are profiled, each into a new array
			// made beforehand.
			var news []*zarr.Array
			for i := range 6 {
				_, w := create(filepath.Join(*dir, fmt.Sprintf("%s-%d.zarr", name, i)), m, *workers)
				news = append(news, w)
			}
			profileReads(filepath.Join(*profile, name+"-encode"), c.encode)
			profileReads(filepath.Join(*profile, name+"-write"), func() {
				check(news[0].WriteRegion(bg, []int{0, 0}, shape, data))
				news = news[1:]
			})
			if g != nil && strings.Contains(name, "lz4") {
				for i := range 6 {
					_, w := create(filepath.Join(*dir, fmt.Sprintf("%s-%d.zarr", name, i)), m, *workers)
					w.SetEncodeDevice(0)
					news = append(news, w)
				}
				profileReads(filepath.Join(*profile, name+"-write-gpu"), func() {
					check(news[0].WriteRegion(bg, []int{0, 0}, shape, data))
					news = news[1:]
				})
			}
			for i := range 6 {
				check(os.RemoveAll(filepath.Join(*dir, fmt.Sprintf("%s-%d.zarr", name, i))))
			}
		}
		dec, enc, write := row["decode"], row["encode"], row["write"]
		fmt.Printf("%-13s %6.2f %8.2f %8.2f %8.2f %8.2f %8.2f %8.2f %8.2f %8.2f\n", name, row["ratio"], dec, enc, write, row["devwrite"], row["host"], row["gpu"], row["gpu_region"], row["gpu_cells"])
		for _, k := range []string{"ratio", "decode", "decode_hot", "encode", "write", "write_first", "write_nosync", "write_rows", "write_gpu", "devwrite", "devwrite_rows", "devwrite_cpuencode", "host", "gpu", "gpu_region", "gpu_cells", "gpu_cpuunshuffle", "gpu_cpuzstd"} {
			if v, ok := row[k]; ok {
				result(name+"_"+k, v)
			}
		}
		pairs := [][2]string{{"gpu", "decode"}, {"gpu_cpuunshuffle", "decode"}, {"gpu", "gpu_cpuunshuffle"}, {"gpu", "gpu_cpuzstd"}, {"host", "decode"}, {"write", "encode"}, {"write_gpu", "encode"}, {"write_gpu", "write"}, {"write_nosync", "encode"}, {"devwrite", "encode"}, {"devwrite_cpuencode", "encode"}, {"devwrite", "devwrite_cpuencode"}}
		for _, alt := range gpuAlts {
			if v, ok := row[gpuAltKey(alt)]; ok {
				result(name+"_"+gpuAltKey(alt), v)
				pairs = append(pairs, [2]string{gpuAltKey(alt), "decode"}, [2]string{gpuAltKey(alt), "gpu"})
			}
		}
		// The median over rounds of each round's ratio: drift over the
		// rounds (clocks, neighbours) moves both sides of a round alike,
		// where the best of each can come from different rounds.
		for _, p := range pairs {
			if v, ok := pairedMedian(rounds[p[0]], rounds[p[1]]); ok {
				result(name+"_"+p[0]+"_"+p[1]+"_paired", v)
			}
		}
	}
	fmt.Println("ZARRBENCH OK")
}

// gpuAltKey names the read of an -alt-gpu setting: gpu_SHARE_BATCH_SLOTS.
func gpuAltKey(g zarrtune.GPUDecode) string {
	return fmt.Sprintf("gpu_%d_%d_%d", g.Share, g.Batch, g.Slots)
}

// layouts are the device reads of each array: zarr's default (Auto), and
// each layout of the bands' pinned buffers forced (internal/formatkit/zarrtune).
var layouts = []struct {
	key    string
	layout int32
}{{"gpu", zarrtune.Auto}, {"gpu_region", zarrtune.Region}, {"gpu_cells", zarrtune.Cells}}

// codecsOf returns the v3 codec chain of a benchmark codec name, the
// chains TensorStore writes and reads too.
func codecsOf(name string, chunk int) []zarr.Codec {
	bytesLE := zarr.Codec{Name: "bytes", Configuration: map[string]any{"endian": "little"}}
	blosc := func(cname string, clevel int) zarr.Codec {
		return zarr.Codec{Name: "blosc", Configuration: map[string]any{"cname": cname, "clevel": clevel, "shuffle": "shuffle", "typesize": 4, "blocksize": 0}}
	}
	zstd := zarr.Codec{Name: "zstd", Configuration: map[string]any{"level": 3, "checksum": false}}
	switch name {
	case "raw":
		return []zarr.Codec{bytesLE}
	case "zstd":
		return []zarr.Codec{bytesLE, zstd}
	case "blosc-lz4":
		return []zarr.Codec{bytesLE, blosc("lz4", 5)}
	case "blosc-zstd":
		return []zarr.Codec{bytesLE, blosc("zstd", 3)}
	case "gzip":
		return []zarr.Codec{bytesLE, {Name: "gzip", Configuration: map[string]any{"level": 5}}}
	case "sharded-zstd", "sharded-lz4":
		inner := []zarr.Codec{bytesLE, zstd}
		if name == "sharded-lz4" {
			inner = []zarr.Codec{bytesLE, blosc("lz4", 5)}
		}
		return []zarr.Codec{{Name: "sharding_indexed", Configuration: map[string]any{
			"chunk_shape": []int{chunk, chunk}, "codecs": inner, "index_location": "end",
			"index_codecs": []zarr.Codec{bytesLE, {Name: "crc32c"}},
		}}}
	}
	log.Fatalf("unknown codec %q", name)
	return nil
}

// writeEmpty is -write-empty.
var writeEmpty bool

// create makes an empty array of m in a new DirStore at dir (anything
// there removed first).
func create(dir string, m zarr.Metadata, workers int, opts ...zarr.StoreOption) (*zarr.DirStore, *zarr.Array) {
	check(os.RemoveAll(dir))
	s, err := zarr.NewDirStore(dir, opts...)
	check(err)
	a, err := zarr.Create(bg, s, "", m)
	check(err)
	if workers > 0 {
		a.SetWorkers(workers)
	}
	a.SetWriteEmptyChunks(writeEmpty)
	return s, a
}

// storedChunks returns the stored bytes of every chunk (shard) in s.
func storedChunks(s *zarr.DirStore) [][]byte {
	keys, err := s.List(bg, "c/")
	check(err)
	out := make([][]byte, len(keys))
	for i, k := range keys {
		out[i], err = s.Get(bg, k, nil)
		check(err)
	}
	return out
}

// ceilings measures the decode-only and encode-only rates of an array's
// stored chunks: every stored chunk decoded (decode: into memory of its
// own, as a read's chunks are; decodeHot: into one cache-resident buffer
// per goroutine, which no read writes that little, an upper bound kept
// as RESULT NAME_decode_hot), then every decoded chunk encoded, in
// memory (each goroutine's output buffer reused), by GOMAXPROCS
// goroutines. The reads and the write count them
// in the array's size bytes, as the ceilings do (chunks at the array's
// edge are coded whole by both, padding included).
type ceilings struct {
	a           *zarr.Array
	stored      [][]byte
	decoded     [][]byte
	storedBytes int
}

func newCeilings(a *zarr.Array, stored [][]byte) *ceilings {
	n := 4
	for _, c := range a.Metadata().ChunkShape {
		n *= c
	}
	c := &ceilings{a: a, stored: stored, decoded: make([][]byte, len(stored))}
	for i, b := range stored {
		c.storedBytes += len(b)
		c.decoded[i] = make([]byte, n)
		check(a.DecodeChunk(b, c.decoded[i]))
	}
	return c
}

func (c *ceilings) decode() {
	onAllCores(len(c.stored), func(i int, _ *[]byte) { check(c.a.DecodeChunk(c.stored[i], c.decoded[i])) })
}

func (c *ceilings) decodeHot() {
	n := len(c.decoded[0])
	onAllCores(len(c.stored), func(i int, scratch *[]byte) {
		if len(*scratch) != n {
			*scratch = make([]byte, n)
		}
		check(c.a.DecodeChunk(c.stored[i], *scratch))
	})
}

// encode encodes each chunk into one buffer per goroutine, used again
// and again as a write's pooled buffers are (a new buffer per chunk, as
// before 2026-11-29, paid for fresh pages: 2-6% slower on the H200).
func (c *ceilings) encode() {
	onAllCores(len(c.decoded), func(i int, scratch *[]byte) {
		var err error
		*scratch, err = c.a.AppendEncodedChunk((*scratch)[:0], c.decoded[i])
		check(err)
	})
}

// onAllCores calls f(i) for i in [0, n) on GOMAXPROCS goroutines, each
// with a scratch buffer of its own.
func onAllCores(n int, f func(i int, scratch *[]byte)) {
	var next atomic.Int64
	var wg sync.WaitGroup
	for range runtime.GOMAXPROCS(0) {
		wg.Add(1)
		go func() {
			defer wg.Done()
			var scratch []byte
			for i := int(next.Add(1) - 1); i < n; i = int(next.Add(1) - 1) {
				f(i, &scratch)
			}
		}()
	}
	wg.Wait()
}

// gpu is device 0 with a buffer for reads and one holding the data.
type gpu struct {
	ctx      cuda.Context
	name     string
	buf, src *cuda.DeviceBuffer
	size     int
}

func openGPU(size int) *gpu {
	if cuda.Init() != nil {
		return nil
	}
	if n, err := cuda.DeviceGetCount(); err != nil || n == 0 {
		return nil
	}
	dev, err := cuda.DeviceGet(0)
	check(err)
	g := &gpu{size: size}
	g.name, _ = dev.Name()
	g.ctx, err = dev.PrimaryCtxRetain()
	check(err)
	check(cuda.WithContext(g.ctx, func() (err error) {
		if g.buf, err = cuda.MemAlloc(size); err != nil {
			return err
		}
		g.src, err = cuda.MemAlloc(size)
		return err
	}))
	return g
}

func (g *gpu) put(b []byte) error {
	return cuda.WithContext(g.ctx, func() error { return cuda.MemcpyHtoD(g.src.Ptr(), b) })
}

// sum returns the CRC-32 of the read buffer's bytes.
func (g *gpu) sum() uint32 {
	b := make([]byte, g.size)
	check(cuda.WithContext(g.ctx, func() error { return cuda.MemcpyDtoH(b, g.buf.Ptr()) }))
	return crc32.ChecksumIEEE(b)
}

func (g *gpu) close() {
	g.buf.Close()
	g.src.Close()
}

// profileReads writes a CPU profile of five calls of read to prefix.prof
// and an execution trace of one more to prefix.trace.
func profileReads(prefix string, read func()) {
	check(os.MkdirAll(filepath.Dir(prefix), 0o755))
	f, err := os.Create(prefix + ".prof")
	check(err)
	check(pprof.StartCPUProfile(f))
	for range 5 {
		read()
	}
	pprof.StopCPUProfile()
	check(f.Close())
	f, err = os.Create(prefix + ".trace")
	check(err)
	check(trace.Start(f))
	read()
	trace.Stop()
	check(f.Close())
}

func timed(f func()) time.Duration {
	t := time.Now()
	f()
	return time.Since(t)
}

func best(n int, f func()) time.Duration {
	var b time.Duration
	for i := 0; i < max(n, 1); i++ {
		t := time.Now()
		f()
		if d := time.Since(t); i == 0 || d < b {
			b = d
		}
	}
	return b
}

func gbs(n int, d time.Duration) float64 { return float64(n) / d.Seconds() / 1e9 }

func result(key string, v float64) { fmt.Printf("RESULT %s %.3f\n", key, v) }

// pairedMedian returns the median of a[i]/b[i] over the rounds both have
// (round 0's write is the first, which also makes the encoders: one slow
// round does not move the median).
func pairedMedian(a, b []float64) (float64, bool) {
	n := min(len(a), len(b))
	if n == 0 {
		return 0, false
	}
	r := make([]float64, n)
	for i := range r {
		r[i] = a[i] / b[i]
	}
	slices.Sort(r)
	if n%2 == 1 {
		return r[n/2], true
	}
	return (r[n/2-1] + r[n/2]) / 2, true
}

func check(err error) {
	if err != nil {
		log.Fatal(err)
	}
}
