package kvik

import (
	"fmt"
	"os"
	"strconv"
	"strings"
	"sync/atomic"

	"github.com/kvikgo/kvik/internal/staging"
)

// KVIK_BENCH_CHUNK lets benchmarks try other staging chunk sizes;
// KVIK_BENCH_SPREAD=1 turns on spreading small device reads over the
// workers and KVIK_BENCH_SPREAD_MIN sets its smallest task;
// KVIK_BENCH_PARTS sets the staging tuning's PipelineParts; KVIK_BENCH_SPINSYNC=1 waits
// for device copies in cuStreamSynchronize instead of polling;
// KVIK_BENCH_RESERVE=0 turns off allocating an operation's bounce buffers
// as one slab; KVIK_BENCH_QDEPTH and KVIK_BENCH_MINPIECE set
// directQueueDepth and minDirectPiece; KVIK_BENCH_ALIGN=0 splits
// operations at unaligned task boundaries (alignTasks off); so benchmarks
// can compare.
func init() {
	if n, err := strconv.Atoi(os.Getenv("KVIK_BENCH_CHUNK")); err == nil && n > 0 {
		tune.staging.MinChunk = n
	}
	if n, err := strconv.Atoi(os.Getenv("KVIK_BENCH_SPREAD_MIN")); err == nil && n > 0 {
		tune.minSpreadTask = n
	}
	if n, err := strconv.Atoi(os.Getenv("KVIK_BENCH_PARTS")); err == nil && n > 0 {
		tune.staging.PipelineParts = n
	}
	tune.spreadDeviceReads = os.Getenv("KVIK_BENCH_SPREAD") == "1"
	tune.reserveBounce = os.Getenv("KVIK_BENCH_RESERVE") != "0"
	tune.alignTasks = os.Getenv("KVIK_BENCH_ALIGN") != "0"
	if os.Getenv("KVIK_BENCH_SPINSYNC") == "1" {
		tune.staging.Wait = staging.WaitSpin
	}
	if n, err := strconv.Atoi(os.Getenv("KVIK_BENCH_QDEPTH")); err == nil && n > 0 {
		tune.directQueueDepth = n
	}
	if n, err := strconv.Atoi(os.Getenv("KVIK_BENCH_MINPIECE")); err == nil && n > 0 {
		tune.minDirectPiece = n
	}
}

// SetAlignTasks turns the page alignment of task boundaries on or off and
// returns a function that restores it (for benchmarks that compare).
func SetAlignTasks(on bool) (restore func()) {
	old := tune.alignTasks
	tune.alignTasks = on
	return func() { tune.alignTasks = old }
}

// SetStagingVariant switches how device reads are staged and returns a
// function that restores the previous choice, so that a benchmark can
// alternate variants in one process. A variant is one or more of these,
// joined by "+": "pipeline" (the built-in choice), "serial" (KvikIO's:
// each task read whole into one buffer, copied, waited for), "spread"
// (reads of fewer tasks than workers spread over all of them), "partsN"
// (PipelineParts = N), "batchN" (device reads hand workers up to N tasks
// at once; batch1: none), "rampS" (a pipelined task's first chunk of S
// bytes), "spinsync" (waits for copies in cuStreamSynchronize, which
// spins), "blocksync" (waits sleep on a blocking-sync event), "nozc" (no
// zero-copy lane), "zcS" (lane pieces of S bytes; S takes an optional k
// or m suffix), "zcminS" (lanes for reads of S bytes or more), "zcall"
// (lanes whatever the worker count).
// (Task sizes are compared across processes, KVIKIO_TASK_SIZE: changing
// it re-pins the bounce buffers.)
func SetStagingVariant(v string) (restore func(), err error) {
	old := tune
	restore = func() { tune = old }
	for _, part := range strings.Split(v, "+") {
		if err := setVariant(part); err != nil {
			return restore, err
		}
	}
	return restore, nil
}

func setVariant(v string) error {
	switch {
	case v == "pipeline":
	case v == "serial":
		tune.serialStaging = true
	case v == "spread":
		tune.spreadDeviceReads = true
	case v == "nozc":
		tune.zc.on = false
	case v == "blocksync":
		tune.staging.Wait = staging.WaitBlock
	case v == "spinsync":
		tune.staging.Wait = staging.WaitSpin
	case v == "zcall":
		tune.zc.all = true
	case strings.HasPrefix(v, "zcmin"):
		n, err := parseSize(v[5:])
		if err != nil || n <= 0 {
			return fmt.Errorf("variant %q: bad size", v)
		}
		tune.zc.minBytes = n
	case strings.HasPrefix(v, "zc"):
		n, err := parseSize(v[2:])
		if err != nil || n <= 0 {
			return fmt.Errorf("variant %q: bad piece size", v)
		}
		tune.zc.piece = n
	case strings.HasPrefix(v, "ramp"):
		n, err := parseSize(v[4:])
		if err != nil || n <= 0 || n%pageSize != 0 {
			return fmt.Errorf("variant %q: bad first chunk", v)
		}
		tune.staging.Ramp = n
	case strings.HasPrefix(v, "batch"):
		n, err := strconv.Atoi(v[5:])
		if err != nil || n <= 0 {
			return fmt.Errorf("variant %q: bad batch", v)
		}
		tune.deviceBatch = n
	case strings.HasPrefix(v, "parts"):
		n, err := strconv.Atoi(v[5:])
		if err != nil || n <= 0 {
			return fmt.Errorf("variant %q: bad part count", v)
		}
		tune.staging.PipelineParts = n
	default:
		return fmt.Errorf("unknown staging variant %q", v)
	}
	return nil
}

func parseSize(s string) (int, error) {
	mult := 1
	switch {
	case strings.HasSuffix(s, "k"):
		mult, s = 1<<10, s[:len(s)-1]
	case strings.HasSuffix(s, "m"):
		mult, s = 1<<20, s[:len(s)-1]
	}
	n, err := strconv.Atoi(s)
	return n * mult, err
}

// ZeroCopyLane reports the bytes zero-copy lanes have moved (mapped, so
// whole pages) and whether the driver refused them.
func ZeroCopyLane() (moved int64, refused bool) { return zc.moved.Load(), zc.broken.Load() }

// SetStagedSave turns SaveFile's staged engine on or off (each piece its
// own write) and returns a function that restores it.
func SetStagedSave(on bool) (restore func()) {
	old := tune.stagedSave
	tune.stagedSave = on
	return func() { tune.stagedSave = old }
}

// DeviceReadBatches returns the tasks, as [offset, length] pairs, that a
// device read of size bytes at off under d runs on a pool of workers:
// deviceTasks, batched where batchTasks batches them.
func DeviceReadBatches(f *FileHandle, d Defaults, off int64, size, workers int) [][2]int64 {
	var out [][2]int64
	for _, t := range f.batchTasks(d, deviceTasks(off, size, d), workers) {
		out = append(out, [2]int64{t.Off, int64(t.Len)})
	}
	return out
}

// CountSyncs makes every fsync(2) of the package add one to n, until
// the returned function restores them.
func CountSyncs(n *atomic.Int64) (restore func()) {
	old := fsync
	fsync = func(fd int) error { n.Add(1); return old(fd) }
	return func() { fsync = old }
}

// DirInMemory reports whether dir lies in a file system held in memory
// (tmpfs, ramfs), where saves skip their syncs.
func DirInMemory(dir string) bool {
	f, err := os.Open(dir)
	if err != nil {
		return false
	}
	defer f.Close()
	return inMemory(int(f.Fd()))
}
