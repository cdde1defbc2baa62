package main

import (
	"errors"
	"flag"
	"fmt"
	"io/fs"
	"math"
	"math/rand/v2"
	"os"
	"path/filepath"
	"runtime"
	"runtime/pprof"
	"runtime/trace"
	"strconv"
	"strings"
	"sync"
	"time"

	"github.com/kvikgo/kvik"
	"github.com/kvikgo/kvik/cuda"
	"github.com/kvikgo/kvik/internal/benchplot"
)

const benchDesc = `
Measure file read and write throughput on one file, comparing kvik's paths
(host memory; and with a GPU, device memory through POSIX I/O and pinned
bounce buffers, and through cuFile) against a naive baseline (one thread of
os.File I/O, plus one copy to or from the GPU) and two ceilings: storage
(16 threads of O_DIRECT pread/pwrite) and, with a GPU, PCIe (pinned host
memory to or from the device). Every configuration is verified once: the
bytes read or written must match.

With no flags it picks a temporary file whose size suits the machine
(256 MiB without a GPU), device memory when there is a GPU, and finishes
in well under a minute. Sizes take units: 4096, 64k, 256MiB, 1.5G, 2GB.
Writes are timed with the fsync that makes them durable.`

// ceilingThreads is the number of threads of the storage ceiling.
const ceilingThreads = 16

// benchOptions holds kvik bench's flags.
type benchOptions struct {
	size       sizeFlag
	dir        string
	file       string
	op         string
	memory     string
	threads    []int
	taskSize   sizeFlag
	bounce     sizeFlag
	compat     string
	direct     optBool
	dropCache  bool
	cache      cacheFlag
	noBase     bool
	paired     bool // --paired-ceiling
	repeats    int
	warmup     int
	warmupAuto bool          // --warmup auto: until steady (steadyWarmup)
	settle     time.Duration // --settle: pause after each timed load's Close
	startAt    time.Time     // --start-at: when the first timed load starts (with --slot)
	slot       time.Duration // --slot: timed load k starts at startAt + k*slot
	register   bool
	json       bool
	opSet      bool          // --op was given
	plot       string        // --plot: draw the results into this file
	plotFrom   []string      // --plot-from: draw these reports instead of running
	url        string        // --url: benchmark a remote object instead
	zarr       zarrReadFlags // a Zarr --url's store
	st         string        // --safetensors: benchmark loading this file
	gguf       string        // --gguf: benchmark loading this file
	save       bool          // --save: with --safetensors, benchmark saving the model
	gpus       gpusFlag      // --gpus: the GPUs of a model's curve
	share      shareFlag     // --share: load only this share of a model
	cpuprof    string        // --cpuprofile: write a CPU profile here
	trace      string        // --trace: write an execution trace here
}

// benchFlags returns kvik bench's flag set bound to a new benchOptions.
func benchFlags(e *env) (*flag.FlagSet, *benchOptions) {
	o := &benchOptions{}
	fs := newFlagSet(e, "bench", "[flags]", benchDesc)
	fs.Var(&o.size, "size", "file `size` (default: 256 MiB without a GPU, 1 GiB with one; capped by free disk and memory)")
	fs.StringVar(&o.dir, "dir", os.TempDir(), "`directory` for the temporary benchmark file")
	fs.StringVar(&o.file, "file", "", "benchmark this `file` instead of a temporary one: an existing file is only read, a missing one is created and kept")
	fs.Func("op", "which operations (`op`): read, write or both (default both; read for an existing --file)", func(s string) error {
		if s != "read" && s != "write" && s != "both" {
			return fmt.Errorf("want read, write or both")
		}
		o.op, o.opSet = s, true
		return nil
	})
	fs.StringVar(&o.memory, "memory", "auto", "`memory` to read into and write from: auto (device if there is a GPU), host or device")
	fs.Func("threads", "kvik worker counts to sweep, a comma-separated `list` (default 1 and kvik's default, KVIKIO_NTHREADS)", func(s string) (err error) {
		o.threads, err = parseIntList(s)
		return err
	})
	fs.Var(&o.taskSize, "task-size", "kvik task `size` (default KVIKIO_TASK_SIZE, 4 MiB)")
	fs.Var(&o.bounce, "bounce-size", "kvik bounce buffer `size` (default KVIKIO_BOUNCE_BUFFER_SIZE, 16 MiB)")
	fs.StringVar(&o.compat, "compat", "", "device path `mode`: on (POSIX+bounce), off (cuFile), auto; default both where cuFile works")
	fs.Var(&o.direct, "direct", "set kvik's opportunistic O_DIRECT for reads and writes (default KVIKIO_AUTO_DIRECT_IO_*)")
	fs.BoolVar(&o.dropCache, "drop-cache", false, "drop the file's page cache before every read")
	fs.Var(&o.cache, "cache", "page-cache `state` before every read: cold (as --drop-cache), warm (the whole file loaded) or half[:SIZE] (alternate stripes of SIZE, default 64MiB, loaded and dropped)")
	fs.BoolVar(&o.noBase, "no-baselines", false, "skip the storage and PCIe ceilings and the naive baseline (kvik rows only, for comparing settings)")
	fs.BoolVar(&o.paired, "paired-ceiling", false, "before every timed repetition of a row, also time one of the storage ceiling, and give the row's ratio against those (for storage whose speed drifts during a run, e.g. cold reads)")
	fs.IntVar(&o.repeats, "repeats", 3, "timed repetitions (`count`) of each configuration")
	fs.DurationVar(&o.settle, "settle", 200*time.Millisecond, "with --safetensors or --gguf: pause this long after each timed load's Close, untimed (the CUDA driver keeps working on freed device memory for tens of milliseconds, slowing the copies of the next load by up to a tenth); 0: none")
	fs.Func("start-at", "with --safetensors or --gguf and --slot: start the first timed load at this `time` (Unix seconds, as date +%s.%N prints), so that loads in several processes run at the same moments", func(v string) error {
		// In nanoseconds the time must fit an int64 (before 2262); NaN
		// fails the comparison too.
		sec, err := strconv.ParseFloat(v, 64)
		if err != nil || !(sec > 0 && sec < math.MaxInt64/1e9) {
			return fmt.Errorf("want Unix seconds such as 1764150000.25, before 2262")
		}
		s, frac := math.Modf(sec)
		o.startAt = time.Unix(int64(s), int64(frac*1e9))
		return nil
	})
	fs.DurationVar(&o.slot, "slot", 0, "with --start-at: start timed load k (counting every configuration's) at --start-at plus k times this `duration`, in place of --settle; a load that cannot start on time is an error")
	fs.Func("warmup", "untimed repetitions (a `count`, or auto: until three agree within 5%, at most 64 or 5 s; the file benchmark only) of each configuration before the timed ones (a fresh process reads small files slowly for its first few dozen operations)", func(v string) error {
		if v == "auto" {
			o.warmup, o.warmupAuto = 0, true
			return nil
		}
		n, err := strconv.Atoi(v)
		if err != nil {
			return fmt.Errorf("want a count or auto")
		}
		o.warmup, o.warmupAuto = n, false
		return nil
	})
	fs.BoolVar(&o.register, "register", false, "also run cuFile with the device buffer registered (cuFileBufRegister)")
	fs.BoolVar(&o.json, "json", false, "print JSON instead of a table")
	fs.StringVar(&o.st, "safetensors", "", "benchmark loading this safetensors `file` (or URL) balanced over 1, 2, ... every GPU (and replicated on all, and against one process per GPU) against reading it whole into GPU memory")
	fs.BoolVar(&o.save, "save", false, "with --safetensors: benchmark saving the loaded model from GPU memory (and host memory, sharded) as new files in --dir, against kvik.SaveFile of the same bytes from host memory")
	fs.StringVar(&o.gguf, "gguf", "", "benchmark loading this GGUF `file` (or URL) as --safetensors does")
	fs.Var(&o.gpus, "gpus", "with --safetensors or --gguf: the `GPUs` of the curve, a count (3: GPUs 0, 1 and 2) or a comma-separated list of ordinals (2,3; one GPU: 2,); default all")
	fs.Var(&o.share, "share", "with --safetensors or --gguf: time only loading share `K/N` onto GPU 0, the tensors that the load balanced over N GPUs puts on its K-th (what each process of the process-per-GPU reference loads)")
	fs.StringVar(&o.url, "url", "", "benchmark reads of this remote object (`URL`: s3://, http(s)://, WebHDFS) instead of a file; a .safetensors or .gguf URL is benchmarked as --safetensors or --gguf, a Zarr array (a URL or path with a .zarr component) by region reads")
	o.zarr.register(fs)
	fs.StringVar(&o.cpuprof, "cpuprofile", "", "write a CPU profile of the run to this `file` (go tool pprof)")
	fs.StringVar(&o.trace, "trace", "", "write an execution trace of the run to this `file` (go tool trace)")
	fs.StringVar(&o.plot, "plot", "", "also draw GB/s against workers for every path and ceiling into this `file` (.svg or .png)")
	fs.Func("plot-from", "with --plot, draw these kvik bench --json outputs (comma-separated `files`, e.g. one per file size) instead of running", func(s string) error {
		o.plotFrom = strings.Split(s, ",")
		return nil
	})
	return fs, o
}

// benchFlagSet is benchFlags for help.
func benchFlagSet(e *env) *flag.FlagSet {
	fs, _ := benchFlags(e)
	return fs
}

// validate checks flag values that the flag package cannot.
func (o *benchOptions) validate(nargs int) error {
	switch {
	case nargs > 0:
		return usagef("unexpected argument (bench takes only flags)")
	case o.repeats < 1:
		return usagef("--repeats %d: want at least 1", o.repeats)
	case o.settle < 0:
		return usagef("--settle %v: want 0 or more", o.settle)
	case o.slot < 0:
		return usagef("--slot %v: want 0 or more", o.slot)
	case (o.slot > 0) != !o.startAt.IsZero():
		return usagef("--start-at and --slot go together")
	case o.paired && o.noBase:
		return usagef("--paired-ceiling needs the ceilings: drop --no-baselines")
	case o.warmup < 0:
		return usagef("--warmup %d: want 0 or more", o.warmup)
	case o.warmupAuto && (o.st != "" || o.gguf != "" || o.url != ""):
		return usagef("--warmup auto applies to the file benchmark: give a count")
	case o.size.set && o.size.n <= 0:
		return usagef("--size must be positive")
	case o.taskSize.set && o.taskSize.n <= 0:
		return usagef("--task-size must be positive")
	case o.bounce.set && o.bounce.n <= 0:
		return usagef("--bounce-size must be positive")
	case o.dropCache && o.cache.mode != "" && o.cache.mode != "cold":
		return usagef("--drop-cache and --cache %s disagree", o.cache.String())
	case len(o.plotFrom) > 0 && o.plot == "":
		return usagef("--plot-from needs --plot")
	case (o.gpus.count > 0 || o.gpus.list != nil || o.share.n > 0) && o.st == "" && o.gguf == "" && o.url == "":
		return usagef("--gpus and --share apply to --safetensors and --gguf")
	case o.share.n > 0 && (o.gpus.count > 0 || o.gpus.list != nil):
		return usagef("--share loads onto GPU 0 alone: drop --gpus")
	case o.zarr.set() && !isZarr(o.url):
		return usagef("--requests, --whole-shards and --max-document apply to a Zarr --url")
	}
	if err := o.zarr.validate(); err != nil {
		return err
	}
	if o.plot != "" {
		if _, err := benchplot.FormatOf(o.plot); err != nil {
			return usagef("--plot %s: want a .svg or .png file", o.plot)
		}
	}
	return validateMemoryCompat(o.memory, o.compat)
}

// validateMemoryCompat checks the --memory and --compat flags that bench
// and cp share.
func validateMemoryCompat(memory, compat string) error {
	if memory != "auto" && memory != "host" && memory != "device" {
		return usagef("invalid --memory %q (want auto, host or device)", memory)
	}
	if compat != "" {
		if _, err := kvik.ParseCompatMode(compat); err != nil {
			return usagef("invalid --compat %q (want on, off or auto)", compat)
		}
	}
	return nil
}

// bench is one run of kvik bench.
type bench struct {
	e    *env
	o    *benchOptions
	mem  memoryChoice
	path string
	tmp  bool // path is a temporary file that bench removes
	size int64

	ref   []byte             // the file's contents, page-aligned
	dst   []byte             // destination of reads, page-aligned
	dev   *cuda.DeviceBuffer // device memory, when mem.device
	frees []func()           // release host memory

	report benchReport
	prog   *progress
}

// runBench implements kvik bench.
func runBench(e *env, args []string) error {
	fs, o := benchFlags(e)
	pos, err := parseFlags(fs, args)
	if err != nil {
		return err
	}
	if err := o.validate(len(pos)); err != nil {
		return err
	}
	if len(o.plotFrom) > 0 {
		reports, err := readReports(o.plotFrom)
		if err != nil {
			return err
		}
		return plotReports(o.plot, reports)
	}
	if _, err := kvik.GetDefaults(); err != nil {
		return err
	}
	stop, err := startProfiles(o.cpuprof, o.trace)
	if err != nil {
		return err
	}
	defer stop()
	if o.url != "" && isZarr(o.url) {
		return benchZarr(e, o)
	}
	switch tensorFormat(o.url) { // a model's load against the object's read
	case formatSafetensors:
		o.st = o.url
	case formatGGUF:
		o.gguf = o.url
	}
	if o.url != "" && o.st == "" && o.gguf == "" {
		return benchRemote(e, o)
	}
	if o.save && o.st == "" {
		return usagef("--save needs --safetensors FILE")
	}
	if o.st != "" && o.save {
		return benchSave(e, o, o.st)
	}
	if o.st != "" {
		return benchModel(e, o, o.st, safetensorsFormat(o.st))
	}
	if o.gguf != "" {
		return benchModel(e, o, o.gguf, ggufFormat(o.gguf))
	}
	b := &bench{e: e, o: o}
	if b.mem, err = chooseMemory(o.memory); err != nil {
		return err
	}
	if b.mem.gpu != nil {
		defer b.mem.gpu.close()
	}
	defer b.release()
	if err := b.prepare(); err != nil {
		return err
	}
	if err := b.runAll(); err != nil {
		return err
	}
	if err := b.print(); err != nil {
		return err
	}
	if o.plot != "" {
		return plotReports(o.plot, []benchReport{b.report})
	}
	return nil
}

// prepare picks the file and its size, allocates the buffers and writes
// (or reads) the file's reference contents.
func (b *bench) prepare() error {
	if err := b.pickFile(); err != nil {
		return err
	}
	var err error
	if b.ref, err = b.hostBuffer(b.size); err != nil {
		return err
	}
	if b.dst, err = b.hostBuffer(b.size); err != nil {
		return err
	}
	if b.mem.device {
		if b.dev, err = b.mem.gpu.alloc(int(b.size)); err != nil {
			return err
		}
	}
	if b.tmp || !fileExists(b.path) {
		return b.createFile()
	}
	return b.loadFile()
}

// hostBuffer allocates page-aligned host memory that release frees.
func (b *bench) hostBuffer(n int64) ([]byte, error) {
	buf, free, err := allocHost(n)
	if err == nil {
		b.frees = append(b.frees, free)
	}
	return buf, err
}

// release frees the buffers.
func (b *bench) release() {
	if b.dev != nil {
		b.dev.Close()
	}
	for _, free := range b.frees {
		free()
	}
}

// pickFile decides which file to use, its size and the operations.
func (b *bench) pickFile() error {
	o := b.o
	if !o.opSet {
		o.op = "both"
	}
	if o.file != "" {
		if fi, err := os.Stat(o.file); err == nil {
			return b.useExisting(fi)
		} else if !errors.Is(err, fs.ErrNotExist) {
			return err
		}
		b.path = o.file
	} else {
		f, err := os.CreateTemp(o.dir, "kvik-bench-*")
		if err != nil {
			return err
		}
		f.Close()
		b.path, b.tmp = f.Name(), true
		atExit(func() { os.Remove(f.Name()) })
	}
	return b.pickSize()
}

// useExisting benchmarks reads of an existing --file, which is never
// written.
func (b *bench) useExisting(fi os.FileInfo) error {
	o := b.o
	if !fi.Mode().IsRegular() {
		return fmt.Errorf("%s: not a regular file", o.file)
	}
	if o.opSet && o.op != "read" {
		return usagef("--op %s would overwrite the existing --file %s; use --op read or a new file", o.op, o.file)
	}
	o.op, b.path, b.size = "read", o.file, fi.Size()
	if o.size.set {
		if o.size.n > fi.Size() {
			return fmt.Errorf("%s: --size %s exceeds the file's %s", o.file, formatSize(o.size.n), formatSize(fi.Size()))
		}
		b.size = o.size.n
	}
	if b.size == 0 {
		return fmt.Errorf("%s: empty file", o.file)
	}
	return b.checkMemory()
}

// pickSize sets the size of a new file: --size, or a default that suits
// the machine, and checks disk space and memory.
func (b *bench) pickSize() error {
	dir := b.o.dir
	if b.o.file != "" {
		dir = filepath.Dir(b.o.file)
	}
	free, err := freeDisk(dir)
	if err != nil {
		return err
	}
	if b.o.size.set {
		b.size = b.o.size.n
		if b.size > free {
			return fmt.Errorf("%s: --size %s exceeds the %s free on its file system", b.path, formatSize(b.size), formatSize(free))
		}
		return b.checkMemory()
	}
	b.size = defaultBenchSize(b.mem, free)
	if b.size < minDefaultSize {
		return fmt.Errorf("%s: too little free disk space or memory for a benchmark (%s free on disk)", b.path, formatSize(free))
	}
	return nil
}

// minDefaultSize is the smallest size the default may shrink to.
const minDefaultSize = 16 * miB

// defaultBenchSize returns a file size that finishes in well under a
// minute: 256 MiB without a GPU, 1 GiB with one; at most half the free disk
// space, a quarter of the available memory (bench holds two copies) and
// half the GPU's free memory.
func defaultBenchSize(mem memoryChoice, freeDisk int64) int64 {
	size := int64(256 * miB)
	if mem.device {
		size = giB
		if f := mem.gpu.freeMem(); f > 0 {
			size = min(size, f/2)
		}
	}
	size = min(size, freeDisk/2)
	if _, avail := memInfo(); avail > 0 {
		size = min(size, avail/4)
	}
	return size / miB * miB
}

// checkMemory refuses sizes that cannot fit in host or device memory.
func (b *bench) checkMemory() error {
	if _, avail := memInfo(); avail > 0 && 2*b.size > avail {
		return fmt.Errorf("%s: size %s needs %s of host memory, %s available", b.path, formatSize(b.size), formatSize(2*b.size), formatSize(avail))
	}
	if b.mem.device {
		if f := b.mem.gpu.freeMem(); f > 0 && b.size > f {
			return fmt.Errorf("%s: size %s exceeds the GPU's %s free memory", b.path, formatSize(b.size), formatSize(f))
		}
	}
	return nil
}

// createFile fills ref with random data and writes it to the file.
func (b *bench) createFile() error {
	fillRandom(b.ref)
	if b.o.op == "write" {
		return os.WriteFile(b.path, nil, 0o644) // every write truncates it
	}
	f, err := os.OpenFile(b.path, os.O_RDWR|os.O_CREATE|os.O_TRUNC, 0o644)
	if err != nil {
		return err
	}
	if _, err := f.Write(b.ref); err != nil {
		f.Close()
		return err
	}
	if err := f.Sync(); err != nil {
		f.Close()
		return err
	}
	return f.Close()
}

// loadFile reads an existing file's first size bytes into ref.
func (b *bench) loadFile() error {
	f, err := os.Open(b.path)
	if err != nil {
		return err
	}
	defer f.Close()
	if _, err := f.ReadAt(b.ref, 0); err != nil {
		return fmt.Errorf("reading %s: %w", b.path, err)
	}
	return nil
}

// fillRandom fills p with pseudo-random bytes, in parallel.
func fillRandom(p []byte) {
	const chunk = 16 * miB
	var wg sync.WaitGroup
	sem := make(chan struct{}, runtime.NumCPU())
	seed := uint64(time.Now().UnixNano())
	for off := 0; off < len(p); off += chunk {
		sem <- struct{}{}
		wg.Go(func() {
			defer func() { <-sem }()
			var key [32]byte
			for i := range 8 {
				key[i] = byte((seed + uint64(off)) >> (8 * i))
			}
			rand.NewChaCha8(key).Read(p[off:min(off+chunk, len(p))])
		})
	}
	wg.Wait()
}

func fileExists(p string) bool {
	_, err := os.Stat(p)
	return err == nil
}

// startProfiles starts a CPU profile and an execution trace into the files
// named (either may be empty) and returns the function that stops them.
func startProfiles(cpu, tr string) (stop func(), err error) {
	var files []*os.File
	stop = func() {
		if cpu != "" {
			pprof.StopCPUProfile()
		}
		if tr != "" {
			trace.Stop()
		}
		for _, f := range files {
			f.Close()
		}
	}
	create := func(name string) (*os.File, error) {
		f, err := os.Create(name)
		if err == nil {
			files = append(files, f)
		}
		return f, err
	}
	if cpu != "" {
		f, err := create(cpu)
		if err == nil {
			err = pprof.StartCPUProfile(f)
		}
		if err != nil {
			cpu = ""
			stop()
			return nil, fmt.Errorf("--cpuprofile: %w", err)
		}
	}
	if tr != "" {
		f, err := create(tr)
		if err == nil {
			err = trace.Start(f)
		}
		if err != nil {
			tr = ""
			stop()
			return nil, fmt.Errorf("--trace: %w", err)
		}
	}
	return stop, nil
}
