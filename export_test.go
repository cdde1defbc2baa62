package kvik

import (
	"os"
	"strconv"
	"unsafe"

	"github.com/kvikgo/kvik/internal/staging"
)

// KVIK_BENCH_CHUNK lets benchmarks try other staging chunk sizes.
func init() {
	if n, err := strconv.Atoi(os.Getenv("KVIK_BENCH_CHUNK")); err == nil && n > 0 {
		staging.MinChunk = n
	}
}

func unsafePointer(b []byte) unsafe.Pointer { return unsafe.Pointer(unsafe.SliceData(b)) }
