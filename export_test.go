package kvik

import (
	"os"
	"strconv"
	"unsafe"

	"github.com/kvikgo/kvik/internal/staging"
)

// KVIK_BENCH_CHUNK lets benchmarks try other staging chunk sizes;
// KVIK_BENCH_SPREAD=1 turns on spreading small device reads over the
// workers and KVIK_BENCH_SPREAD_MIN sets its smallest task;
// KVIK_BENCH_PARTS sets staging.PipelineParts; KVIK_BENCH_POLLSYNC=1 polls
// streams instead of cuStreamSynchronize;
// KVIK_BENCH_RESERVE=0 turns off allocating an operation's bounce buffers
// as one slab; KVIK_BENCH_QDEPTH and KVIK_BENCH_MINPIECE set
// directQueueDepth and minDirectPiece; KVIK_BENCH_ALIGN=0 splits
// operations at unaligned task boundaries (alignTasks off); so benchmarks
// can compare.
func init() {
	if n, err := strconv.Atoi(os.Getenv("KVIK_BENCH_CHUNK")); err == nil && n > 0 {
		staging.MinChunk = n
	}
	if n, err := strconv.Atoi(os.Getenv("KVIK_BENCH_SPREAD_MIN")); err == nil && n > 0 {
		minSpreadTask = n
	}
	if n, err := strconv.Atoi(os.Getenv("KVIK_BENCH_PARTS")); err == nil && n > 0 {
		staging.PipelineParts = n
	}
	spreadDeviceReads = os.Getenv("KVIK_BENCH_SPREAD") == "1"
	pollSync = os.Getenv("KVIK_BENCH_POLLSYNC") == "1"
	reserveBounce = os.Getenv("KVIK_BENCH_RESERVE") != "0"
	alignTasks = os.Getenv("KVIK_BENCH_ALIGN") != "0"
	if n, err := strconv.Atoi(os.Getenv("KVIK_BENCH_QDEPTH")); err == nil && n > 0 {
		directQueueDepth = n
	}
	if n, err := strconv.Atoi(os.Getenv("KVIK_BENCH_MINPIECE")); err == nil && n > 0 {
		minDirectPiece = n
	}
}

func unsafePointer(b []byte) unsafe.Pointer { return unsafe.Pointer(unsafe.SliceData(b)) }

// SetAlignTasks turns the page alignment of task boundaries on or off and
// returns a function that restores it (for benchmarks that compare).
func SetAlignTasks(on bool) (restore func()) {
	old := alignTasks
	alignTasks = on
	return func() { alignTasks = old }
}
