// Command zarrremotebench measures Zarr region reads from S3
// (bench/zarr_remote_gpu.sh and bench/zarr_local_gpu.sh run it against
// versitygw on loopback): a v3 float32 array of -size bytes in chunks of
// -chunk bytes, uncompressed, read whole into device memory (or, with
// -host, into host memory), against (a) a loop that fetches one chunk at
// a time and copies it to its place, and (b) kvik's read of the same
// bytes as one object (RemoteHandle); then the compressed (zstd, Blosc
// LZ4 and zstd with byte shuffle, gzip; data a smooth field plus noise)
// and the sharded (uncompressed and zstd) variants.
//
// Each compressed variant has a decode-only ceiling: its stored chunks
// (inner chunks of a sharded array), fetched once from the server into
// memory, decoded by GOMAXPROCS goroutines, each into its place in a
// host buffer of the array's size: what the read's decode stage could
// reach on the cores the process runs on, without any I/O. Pin the
// process (taskset, GOMAXPROCS) and the ceiling is measured on the same
// cores as the reads. The configurations and the ceilings take turns, in
// an order shuffled anew in each of -reps rounds; medians (-best: the
// best round), their ratios and "RESULT key GB/s" lines (for the
// scripts' summaries) are printed. On a machine without a GPU, or to see the pipeline's cost
// apart: -host, -cpu (CPU time, run-queue wait and idle time per read,
// which stay readable on a machine shared with other work), -cpuprofile.
package main

import (
	"cmp"
	"context"
	"encoding/binary"
	"flag"
	"fmt"
	"hash/crc32"
	"log"
	"math/rand/v2"
	"net/http"
	"net/http/httptest"
	"net/http/httputil"
	"net/url"
	"os"
	"path/filepath"
	"runtime"
	"runtime/pprof"
	"runtime/trace"
	"slices"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"syscall"
	"time"

	"github.com/kvikgo/kvik"
	"github.com/kvikgo/kvik/cuda"
	"github.com/kvikgo/kvik/internal/formatkit/zarrtune"
	"github.com/kvikgo/kvik/internal/testkit/fielddata"
	"github.com/kvikgo/kvik/zarr"
)

var bg = context.Background()

const cols = 1024 // float32: 4 KiB rows

// shardChunks is the inner chunks per shard of the sharded variants.
const shardChunks = 32

// variant is one stored form of the array.
type variant struct {
	name  string
	inner []zarr.Codec // a sharded variant's inner codecs, else nil
	m     zarr.Metadata
}

func main() {
	dir := flag.String("dir", "", "versitygw's directory of bucket bkt (arrays are written there directly)")
	size := flag.Int("size", 1<<30, "array size in bytes")
	chunk := flag.Int("chunk", 1<<20, "chunk size in bytes (a multiple of 4 KiB)")
	reps := flag.Int("reps", 3, "rounds; each configuration runs once per round")
	requests := flag.Int("requests", 0, "requests in flight per store (0: zarr.DefaultMaxRequests)")
	workers := flag.Int("workers", 0, "decode workers per array (0: zarr's default, kvik's NumThreads)")
	altWorkers := flag.Int("alt-workers", 0, "also read each compressed array with this many decode workers (runs named \"... wN\"), in the same rounds")
	altRequests := flag.Int("alt-requests", 0, "also read each compressed array through a store of this many requests in flight (runs named \"... rN\"), in the same rounds")
	altInline := flag.Bool("alt-inline", false, "the alternative reads fetch on their workers, no fetch stage (zarrtune.InlineFetch)")
	altNoYield := flag.Bool("alt-noyield", false, "the alternative reads' workers do not yield before they decode (zarrtune.NoYield)")
	altWholeSpans := flag.Bool("alt-wholespans", false, "the alternative reads' workers decode each fetched span of a shard whole, not in parts (zarrtune.WholeSpans)")
	altEagerPlan := flag.Bool("alt-eagerplan", false, "the alternative reads of sharded arrays read every shard index before any chunk (zarrtune.EagerShardPlan)")
	altCPUUnshuffle := flag.Bool("alt-cpuunshuffle", false, "the alternative reads of device memory undo Blosc's byte shuffle on the CPU, not the GPU (zarrtune.CPUUnshuffle)")
	altBand := flag.Int("alt-band", 0, "also read each compressed array into device memory in bands of at most this many bytes (zarrtune.BandLimit; runs named \"... bN\", N in KiB), in the same rounds")
	gpuShare := flag.Int64("gpushare", 0, "the share of a device read's rows of chunks the GPU decodes (zstd, gzip, zlib), in thousandths (zarrtune.GPUDecodeShare; 0: zarr's default)")
	altGPU := flag.String("alt-gpu", "", "also read each array of zstd (plain or sharded) or gzip chunks into device memory with each of these settings of the GPU's share, frames per batch and batches in flight, SHARE/BATCH/SLOTS comma-separated, 0 for zarr's default (zarrtune.GPUDecode): runs named \"zarr NAME gpu SHARE/BATCH/SLOTS region\"")
	altCPUDecode := flag.Bool("alt-cpuzstd", false, "the alternative reads of device memory decode the chunks the GPU would (zstd, gzip) on the CPU (zarrtune.CPUDecode)")
	altWhole := flag.Bool("alt-whole", false, "also read each sharded array through a store opened with zarr.WithWholeShards (runs named \"... whole\"), in the same rounds")
	host := flag.Bool("host", false, "read into host memory (no GPU needed)")
	codecs := flag.String("codecs", "zstd,blosc-lz4,blosc-zstd,gzip,sharded,sharded-zstd", "variants besides raw, comma-separated")
	only := flag.Bool("only", false, "the variants' reads and ceilings only (no raw array, chunk loop, raw object)")
	cpuProfile := flag.String("cpuprofile", "", "write a CPU profile of the timed rounds to this file")
	traceFile := flag.String("trace", "", "write an execution trace of one more round, after the timed ones, to this file")
	best := flag.Bool("best", false, "report the best round, not the median (on a machine shared with other work)")
	cpu := flag.Bool("cpu", false, "also print each configuration's CPU time, time waiting for a core and idle time per read (Linux)")
	latency := flag.Duration("latency", 0, "hold every request this long before it goes to the server (a proxy in this process), as a distant S3's time to first byte; the proxy's copies count in -cpu")
	flag.Parse()
	zarrtune.GPUDecodeShare.Store(*gpuShare)
	gpuAlts, err := zarrtune.ParseGPUDecode(*altGPU)
	check(err)
	if *dir == "" || os.Getenv("AWS_ENDPOINT_URL") == "" {
		log.Fatal("need -dir and the AWS_* variables of the S3 server")
	}
	if *latency > 0 {
		defer delayRequests(*latency)()
	}
	rowsPerChunk := *chunk / (4 * cols)
	rows := *size / (4 * cols)
	shape, chunks := []int{rows, cols}, []int{rowsPerChunk, cols}
	variants := append([]variant{{name: "raw", m: zarr.Metadata{Shape: shape, ChunkShape: chunks}}}, variantsOf(strings.Split(*codecs, ","), shape, chunks)...)
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
		if *workers > 0 {
			arrays[v.name].SetWorkers(*workers)
		}
	}
	obj, err := kvik.OpenRemote(bg, "s3://bkt/raw.bin")
	check(err)
	defer obj.Close()

	var t target
	if *host {
		t = newHostTarget(len(data))
	} else {
		t = newDeviceTarget(len(data))
	}
	defer t.close()
	raw := arrays["raw"]
	var runs []run
	if !*only {
		runs = append(runs,
			run{"zarr raw region", "s3_raw", func() error { return t.region(raw, shape) }},
			run{"chunk loop", "s3_chunk_loop", func() error { return t.chunkLoop(raw, rows, rowsPerChunk) }},
			run{"raw object", "s3_raw_object", func() error { return t.object(obj) }})
	}
	// The ceilings' stored chunks and their own destination.
	ceilDst := make([]byte, len(data))
	for _, v := range variants[1:] {
		a := arrays[v.name]
		runs = append(runs, run{"zarr " + v.name + " region", "s3_" + v.name, func() error { return t.region(a, shape) }})
		if suffix := altSuffix(*altWorkers, *altRequests, *altBand, *altCPUDecode); suffix != "" && compressed(v) {
			store := a.Store()
			if *altRequests > 0 {
				s, err := zarr.OpenURL(bg, "s3://bkt/"+v.name+".zarr", zarr.WithMaxRequests(*altRequests))
				check(err)
				defer s.Close()
				store = s
			}
			alt, err := zarr.Open(bg, store, "")
			check(err)
			if *altWorkers > 0 {
				alt.SetWorkers(*altWorkers)
			}
			name := v.name + suffix
			knobs := map[*atomic.Bool]bool{ // the alternative reads' settings, off again after each
				&zarrtune.InlineFetch: *altInline, &zarrtune.NoYield: *altNoYield, &zarrtune.WholeSpans: *altWholeSpans,
				&zarrtune.EagerShardPlan: *altEagerPlan, &zarrtune.CPUUnshuffle: *altCPUUnshuffle,
				&zarrtune.CPUDecode: *altCPUDecode,
			}
			runs = append(runs, run{"zarr " + name + " region", "s3_" + strings.ReplaceAll(name, " ", "_"), func() error {
				for k, on := range knobs {
					k.Store(on)
					defer k.Store(false)
				}
				zarrtune.BandLimit.Store(int64(*altBand))
				defer zarrtune.BandLimit.Store(0)
				return t.region(alt, shape)
			}})
		}
		for _, alt := range gpuAlts {
			if v.name != "zstd" && v.name != "sharded-zstd" && v.name != "gzip" {
				break
			}
			runs = append(runs, run{"zarr " + v.name + " gpu " + alt.String() + " region", "s3_" + v.name + "_gpu_" + strings.ReplaceAll(alt.String(), "/", "_"), func() error {
				defer alt.Set()()
				return t.region(a, shape)
			}})
		}
		if *altWhole && v.inner != nil {
			s, err := zarr.OpenURL(bg, "s3://bkt/"+v.name+".zarr", append(opts, zarr.WithWholeShards())...)
			check(err)
			defer s.Close()
			whole, err := zarr.Open(bg, s, "")
			check(err)
			if *workers > 0 {
				whole.SetWorkers(*workers)
			}
			runs = append(runs, run{"zarr " + v.name + " whole region", "s3_" + v.name + "_whole", func() error { return t.region(whole, shape) }})
		}
		if compressed(v) {
			cells := storedCells(a, v, rows, rowsPerChunk)
			check(decodeAll(cells, ceilDst)) // untimed check of the ceiling's bytes
			if crc32.ChecksumIEEE(ceilDst) != want {
				log.Fatalf("decode %s: the decoded chunks differ from the array", v.name)
			}
			runs = append(runs, run{"decode " + v.name, "s3_" + v.name + "_decode", func() error { return decodeAll(cells, ceilDst) }})
		}
	}
	d, _ := kvik.GetDefaults()
	fmt.Printf("array %d MiB, %d chunks of %d KiB, float32 %v; into %s; GOMAXPROCS %d, %d workers, %d requests in flight per store; %d rounds\n",
		len(data)>>20, rows/rowsPerChunk, *chunk>>10, shape, t.name(), runtime.GOMAXPROCS(0), cmp.Or(*workers, d.NumThreads), raw.Store().(*zarr.RemoteStore).MaxRequests(), *reps)
	if *cpuProfile != "" {
		f, err := os.Create(*cpuProfile)
		check(err)
		check(pprof.StartCPUProfile(f))
	}
	times, use := measure(runs, *reps, t, want)
	pprof.StopCPUProfile()
	if *traceFile != "" {
		f, err := os.Create(*traceFile)
		check(err)
		check(trace.Start(f))
		measure(runs, 1, t, want)
		trace.Stop()
		check(f.Close())
	}
	gbs := pick(runs, times, len(data), *best)
	if *cpu {
		printUsage(runs, times, use, len(data))
	}
	printRatios(variants, gbs, times, altSuffix(*altWorkers, *altRequests, *altBand, *altCPUDecode))
	for _, v := range variants[1:] {
		for _, alt := range gpuAlts {
			if r := "zarr " + v.name + " gpu " + alt.String() + " region"; gbs[r] > 0 {
				fmt.Printf("RATIO %s / its decode ceiling %.2fx (paired %.2fx), / the default %.2fx (paired %.2fx)\n", r, gbs[r]/gbs["decode "+v.name],
					paired(times["decode "+v.name], times[r]), gbs[r]/gbs["zarr "+v.name+" region"], paired(times["zarr "+v.name+" region"], times[r]))
			}
		}
	}
	for _, run := range runs {
		fmt.Printf("RESULT %s %.3f\n", run.key, gbs[run.name])
	}
	fmt.Println("ZARRREMOTEBENCH OK")
}

// measure runs each of runs once per round, reps rounds, t cleared
// before each, in an order shuffled anew each round, and returns the
// times and resource usage of each; in the first round, what each read
// left in t is checked against want. In a fixed order the first read of
// a variant, which always followed another's decode ceiling, ran 3-5%
// slower than the same read repeated just after it (three pairs of
// identical zstd reads, H200): shuffled, no run keeps one place.
func measure(runs []run, reps int, t target, want uint32) (map[string][]time.Duration, map[string]usage) {
	times := map[string][]time.Duration{}
	use := map[string]usage{}
	rng := rand.New(rand.NewPCG(uint64(len(runs)), uint64(reps)))
	for r := 0; r < reps; r++ {
		for _, k := range rng.Perm(len(runs)) {
			run := runs[k]
			check(t.clear())
			u0 := usageNow()
			start := time.Now()
			check(run.f())
			times[run.name] = append(times[run.name], time.Since(start))
			use[run.name] = use[run.name].add(usageNow().sub(u0))
			if r == 0 && !strings.HasPrefix(run.name, "decode ") && t.sum() != want {
				log.Fatalf("%s: the bytes read differ from the array", run.name)
			}
		}
	}
	return times, use
}

// pick prints each run's times and returns its GB/s of n bytes: in the
// median round, or the best with best set.
func pick(runs []run, times map[string][]time.Duration, n int, best bool) map[string]float64 {
	stat := "median"
	if best {
		stat = "best"
	}
	gbs := map[string]float64{}
	for _, run := range runs {
		ts := slices.Clone(times[run.name])
		slices.Sort(ts)
		d := ts[len(ts)/2]
		if best {
			d = ts[0]
		}
		gbs[run.name] = float64(n) / d.Seconds() / 1e9
		fmt.Printf("%-24s %s %6.2f GB/s  (%v)\n", run.name, stat, gbs[run.name], ts)
	}
	return gbs
}

// printUsage prints where each run's time went, per read of n bytes.
func printUsage(runs []run, times map[string][]time.Duration, use map[string]usage, n int) {
	fmt.Println("per read, mean of the rounds: wall, CPU time of the process (in the kernel), time its threads waited for a core (summed: threads wait at once), the rest (idle; below 0 when they did)")
	for _, run := range runs {
		var wall time.Duration
		for _, d := range times[run.name] {
			wall += d
		}
		k := time.Duration(len(times[run.name]))
		u := use[run.name]
		fmt.Printf("%-24s wall %8v cpu %8v (sys %8v) waiting %8v idle %8v; CPU %.2f ns/byte\n", run.name, (wall / k).Round(time.Millisecond),
			(u.cpu / k).Round(time.Millisecond), (u.sys / k).Round(time.Millisecond), (u.wait / k).Round(time.Millisecond),
			((wall - u.cpu - u.wait) / k).Round(time.Millisecond), float64(u.cpu)/float64(k)/float64(n))
	}
}

// printRatios prints the targets' ratios of the rates gbs and, for each
// compressed variant, the median over rounds of its decode ceiling's
// time over its read's in that round (paired: steadier than either's
// median where other work comes and goes).
func printRatios(variants []variant, gbs map[string]float64, times map[string][]time.Duration, suffix string) {
	ratio := func(a, b string) string {
		x, okA := gbs[a]
		y, okB := gbs[b]
		if !okA || !okB || y == 0 {
			return "-"
		}
		return fmt.Sprintf("%.2fx", x/y)
	}
	fmt.Printf("RATIO zarr raw / chunk loop    %s (target >= 8)\n", ratio("zarr raw region", "chunk loop"))
	fmt.Printf("RATIO zarr raw / raw object    %s (target >= 0.7)\n", ratio("zarr raw region", "raw object"))
	fmt.Printf("RATIO zarr sharded / raw object %s (target >= 0.8)\n", ratio("zarr sharded region", "raw object"))
	for _, v := range variants[1:] {
		line := fmt.Sprintf("RATIO zarr %s / zarr raw %s", v.name, ratio("zarr "+v.name+" region", "zarr raw region"))
		if compressed(v) {
			line += fmt.Sprintf(", / its decode ceiling %s (decode %.2f GB/s; paired %.2fx)", ratio("zarr "+v.name+" region", "decode "+v.name), gbs["decode "+v.name],
				paired(times["decode "+v.name], times["zarr "+v.name+" region"]))
		}
		fmt.Println(line + " (issue 40: >= 0.8 raw, or >= 0.9 decode where lower; gzip >= 0.9 decode)")
		if w := "zarr " + v.name + " whole region"; gbs[w] > 0 {
			fmt.Printf("RATIO zarr %s whole (WithWholeShards) / zarr raw %s, / the default %s\n", v.name, ratio(w, "zarr raw region"), ratio(w, "zarr "+v.name+" region"))
		}
		if alt := "zarr " + v.name + suffix + " region"; suffix != "" && gbs[alt] > 0 {
			fmt.Printf("RATIO %s / its decode ceiling %s (paired %.2fx; the default: %s)\n", alt, ratio(alt, "decode "+v.name),
				paired(times["decode "+v.name], times[alt]), ratio("zarr "+v.name+" region", "decode "+v.name))
		}
	}
}

// altSuffix names the alternative reads of -alt-workers, -alt-requests,
// -alt-band and -alt-cpuzstd (" w11", " r8", " w11 r8", " b4096",
// " cpuzstd"), or is empty where there are none.
func altSuffix(workers, requests, band int, cpuZstd bool) string {
	s := ""
	if workers > 0 {
		s += fmt.Sprintf(" w%d", workers)
	}
	if requests > 0 {
		s += fmt.Sprintf(" r%d", requests)
	}
	if band > 0 {
		s += fmt.Sprintf(" b%d", band>>10)
	}
	if cpuZstd {
		s += " cpuzstd"
	}
	return s
}

// paired returns the median over rounds of a[i]/b[i].
func paired(a, b []time.Duration) float64 {
	r := make([]float64, min(len(a), len(b)))
	for i := range r {
		r[i] = a[i].Seconds() / b[i].Seconds()
	}
	slices.Sort(r)
	return r[len(r)/2]
}

// run is one timed configuration; key names its RESULT line.
type run struct {
	name, key string
	f         func() error
}

// variantsOf returns the array variants of the names.
func variantsOf(names []string, shape, chunks []int) []variant {
	bytesLE := zarr.Codec{Name: "bytes", Configuration: map[string]any{"endian": "little"}}
	zstd := zarr.Codec{Name: "zstd", Configuration: map[string]any{"level": 3}}
	blosc := func(cname string, clevel int) zarr.Codec {
		return zarr.Codec{Name: "blosc", Configuration: map[string]any{"cname": cname, "clevel": clevel, "shuffle": "shuffle", "typesize": 4, "blocksize": 0}}
	}
	plain := func(name string, c ...zarr.Codec) variant {
		return variant{name: name, m: zarr.Metadata{Shape: shape, ChunkShape: chunks, Codecs: append([]zarr.Codec{bytesLE}, c...)}}
	}
	sharded := func(name string, inner ...zarr.Codec) variant {
		return variant{name: name, inner: inner, m: zarr.Metadata{Shape: shape, ChunkShape: []int{shardChunks * chunks[0], chunks[1]}, Codecs: []zarr.Codec{{Name: "sharding_indexed", Configuration: map[string]any{
			"chunk_shape": chunks, "codecs": inner, "index_location": "end",
			"index_codecs": []zarr.Codec{bytesLE, {Name: "crc32c"}},
		}}}}}
	}
	var out []variant
	for _, n := range names {
		switch n {
		case "zstd":
			out = append(out, plain(n, zstd))
		case "blosc-lz4":
			out = append(out, plain(n, blosc("lz4", 5)))
		case "blosc-zstd":
			out = append(out, plain(n, blosc("zstd", 3)))
		case "gzip":
			out = append(out, plain(n, zarr.Codec{Name: "gzip", Configuration: map[string]any{"level": 5}}))
		case "sharded":
			out = append(out, sharded(n, bytesLE))
		case "sharded-zstd":
			out = append(out, sharded(n, bytesLE, zstd))
		case "", "raw":
		default:
			log.Fatalf("unknown variant %q", n)
		}
	}
	return out
}

// compressed reports whether v's chunks (or inner chunks) are decoded.
func compressed(v variant) bool {
	if v.inner != nil {
		return len(v.inner) > 1
	}
	return len(v.m.Codecs) > 1
}

// cell is one stored chunk (or inner chunk), its decoder and its place.
type cell struct {
	stored []byte
	dec    *zarr.Array // DecodeChunk of a chunk of the cell's shape
	off, n int         // where it goes in the array's bytes
}

// storedCells fetches the stored chunks of a, one GET each, and returns
// its cells: the chunks, or for a sharded variant the inner chunks (the
// index at the shard's end: an offset and a length per inner chunk, then
// a CRC-32C), each decoded by an array of one inner chunk.
func storedCells(a *zarr.Array, v variant, rows, rowsPerChunk int) []cell {
	s := a.Store().(*zarr.RemoteStore)
	chunkBytes := rowsPerChunk * cols * 4
	per := 1
	dec := a
	if v.inner != nil {
		per = shardChunks
		tmp, err := os.MkdirTemp("", "zarrremotebench")
		check(err)
		defer os.RemoveAll(tmp)
		ds, err := zarr.NewDirStore(tmp)
		check(err)
		dec, err = zarr.Create(bg, ds, "", zarr.Metadata{Shape: []int{rowsPerChunk, cols}, ChunkShape: []int{rowsPerChunk, cols},
			DataType: zarr.DataType{Kind: zarr.Float, Size: 4}, Codecs: v.inner})
		check(err)
	}
	var cells []cell
	for i := 0; i*per*rowsPerChunk < rows; i++ {
		b, err := s.GetMax(bg, a.ChunkKey([]int{i, 0}), nil, int64(2*per*chunkBytes+(1<<20)))
		check(err)
		if v.inner == nil {
			cells = append(cells, cell{stored: b, dec: dec, off: i * chunkBytes, n: chunkBytes})
			continue
		}
		index := b[len(b)-16*per-4:]
		for j := 0; j < per && (i*per+j)*rowsPerChunk < rows; j++ { // the last shard may hang past the array
			o, n := binary.LittleEndian.Uint64(index[16*j:]), binary.LittleEndian.Uint64(index[16*j+8:])
			if o > uint64(len(b)) || n > uint64(len(b))-o {
				log.Fatalf("%s: shard %d: inner chunk %d at %d+%d of %d bytes", v.name, i, j, o, n, len(b))
			}
			cells = append(cells, cell{stored: b[o : o+n], dec: dec, off: (i*per + j) * chunkBytes, n: chunkBytes})
		}
	}
	return cells
}

// decodeAll decodes every cell into its place in dst on GOMAXPROCS
// goroutines.
func decodeAll(cells []cell, dst []byte) error {
	var next atomic.Int64
	var wg sync.WaitGroup
	errs := make([]error, runtime.GOMAXPROCS(0))
	for w := range errs {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for i := int(next.Add(1) - 1); i < len(cells); i = int(next.Add(1) - 1) {
				c := cells[i]
				if err := c.dec.DecodeChunk(c.stored, dst[c.off:c.off+c.n]); err != nil {
					errs[w] = err
					return
				}
			}
		}()
	}
	wg.Wait()
	for _, err := range errs {
		if err != nil {
			return err
		}
	}
	return nil
}

// target is where the reads go: host or device memory.
type target interface {
	name() string
	region(a *zarr.Array, shape []int) error
	chunkLoop(a *zarr.Array, rows, rowsPerChunk int) error
	object(obj *kvik.RemoteHandle) error
	clear() error
	sum() uint32
	close()
}

// hostTarget reads into a host buffer.
type hostTarget struct{ buf []byte }

func newHostTarget(n int) *hostTarget { return &hostTarget{buf: make([]byte, n)} }

func (h *hostTarget) name() string { return "host memory" }
func (h *hostTarget) region(a *zarr.Array, shape []int) error {
	return a.ReadRegion(bg, []int{0, 0}, shape, h.buf)
}

// chunkLoop fetches each chunk of a, one at a time, into its place.
func (h *hostTarget) chunkLoop(a *zarr.Array, rows, rowsPerChunk int) error {
	n := rowsPerChunk * cols * 4
	for r := 0; r < rows; r += rowsPerChunk {
		dst := h.buf[r*cols*4 : r*cols*4+n : r*cols*4+n]
		b, err := a.Store().Get(bg, a.ChunkKey([]int{r / rowsPerChunk, 0}), dst)
		if err != nil {
			return err
		}
		if len(b) != n || &b[0] != &dst[0] {
			return fmt.Errorf("chunk %d: %d bytes, not in place", r/rowsPerChunk, len(b))
		}
	}
	return nil
}

func (h *hostTarget) object(obj *kvik.RemoteHandle) error {
	_, err := obj.ReadAt(h.buf, 0)
	return err
}
func (h *hostTarget) clear() error { clear(h.buf); return nil }
func (h *hostTarget) sum() uint32  { return crc32.ChecksumIEEE(h.buf) }
func (h *hostTarget) close()       {}

// deviceTarget reads into a buffer of device 0.
type deviceTarget struct {
	cctx cuda.Context
	dev  cuda.Device
	buf  *cuda.DeviceBuffer
	n    int
}

func newDeviceTarget(n int) *deviceTarget {
	check(cuda.Init())
	dev, err := cuda.DeviceGet(0)
	check(err)
	t := &deviceTarget{dev: dev, n: n}
	t.cctx, err = dev.PrimaryCtxRetain()
	check(err)
	check(cuda.WithContext(t.cctx, func() (err error) { t.buf, err = cuda.MemAlloc(n); return err }))
	return t
}

func (t *deviceTarget) name() string { return "device memory" }
func (t *deviceTarget) region(a *zarr.Array, shape []int) error {
	return a.ReadRegionDevice(bg, []int{0, 0}, shape, t.buf.Ptr())
}

// chunkLoop fetches each chunk of a, one at a time, into pinned host
// memory and copies it to its place in the buffer: the loop a user
// writes without a concurrent reader.
func (t *deviceTarget) chunkLoop(a *zarr.Array, rows, rowsPerChunk int) error {
	n := rowsPerChunk * cols * 4
	var pb *kvik.PinnedBuffer
	// A buffer of the size zarr's device reads stage through, so that
	// kvik's staging pool keeps its buffers from one run to the next.
	d, _ := kvik.GetDefaults()
	if err := cuda.WithContext(t.cctx, func() (err error) { pb, err = kvik.GetPinnedBuffer(max(n, d.TaskSize)); return err }); err != nil {
		return err
	}
	defer cuda.WithContext(t.cctx, func() error { pb.Release(); return nil })
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
		if err := cuda.WithContext(t.cctx, func() error { return cuda.MemcpyHtoD(t.buf.Ptr()+off, b) }); err != nil {
			return err
		}
	}
	return nil
}

func (t *deviceTarget) object(obj *kvik.RemoteHandle) error {
	_, err := obj.ReadDevice(t.buf.Ptr(), t.n, 0, 0)
	return err
}

func (t *deviceTarget) clear() error {
	return cuda.WithContext(t.cctx, func() error { return cuda.MemsetD8(t.buf.Ptr(), 0, t.n) })
}

func (t *deviceTarget) sum() uint32 {
	got := make([]byte, t.n)
	check(cuda.WithContext(t.cctx, func() error { return cuda.MemcpyDtoH(got, t.buf.Ptr()) }))
	return crc32.ChecksumIEEE(got)
}

func (t *deviceTarget) close() {
	t.buf.Close()
	t.dev.PrimaryCtxRelease()
}

// usage is CPU time (of it in the kernel: sys) and run-queue wait,
// summed over the process's threads.
type usage struct{ cpu, sys, wait time.Duration }

func (u usage) add(v usage) usage { return usage{u.cpu + v.cpu, u.sys + v.sys, u.wait + v.wait} }
func (u usage) sub(v usage) usage { return usage{u.cpu - v.cpu, u.sys - v.sys, u.wait - v.wait} }

// usageNow returns the process's CPU time (getrusage) and the time its
// threads have waited on a run queue (the second field of each thread's
// /proc schedstat); zero where those are not available.
func usageNow() usage {
	var u usage
	var ru syscall.Rusage
	if syscall.Getrusage(syscall.RUSAGE_SELF, &ru) == nil {
		u.cpu = time.Duration(ru.Utime.Nano() + ru.Stime.Nano())
		u.sys = time.Duration(ru.Stime.Nano())
	}
	tasks, _ := os.ReadDir("/proc/self/task")
	for _, t := range tasks {
		b, err := os.ReadFile("/proc/self/task/" + t.Name() + "/schedstat")
		if f := strings.Fields(string(b)); err == nil && len(f) >= 2 {
			w, _ := strconv.ParseInt(f[1], 10, 64)
			u.wait += time.Duration(w)
		}
	}
	return u
}

func check(err error) {
	if err != nil {
		log.Fatal(err)
	}
}

// delayRequests puts a proxy in front of the server of AWS_ENDPOINT_URL
// that holds each request for d, points AWS_ENDPOINT_URL at it, and
// returns its stop. The requests keep the Host they were signed for.
func delayRequests(d time.Duration) (stop func()) {
	target, err := url.Parse(os.Getenv("AWS_ENDPOINT_URL"))
	check(err)
	p := httputil.NewSingleHostReverseProxy(target)
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		time.Sleep(d)
		p.ServeHTTP(w, r)
	}))
	check(os.Setenv("AWS_ENDPOINT_URL", srv.URL))
	fmt.Printf("requests held %v each by a proxy at %s\n", d, srv.URL)
	return srv.Close
}
