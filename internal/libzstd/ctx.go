package libzstd

import "github.com/kvikgo/kvik/internal/dl"

// Contexts (ZSTD_DCtx, ZSTD_CCtx) are reused through free lists: a
// context keeps its tables and buffers between calls.
var (
	dctxs = dl.NewObjectList(procCreateDCtx, procFreeDCtx, noMemory(procCreateDCtx))
	cctxs = dl.NewObjectList(procCreateCCtx, procFreeCCtx, noMemory(procCreateCCtx))
)

// noMemory is the error of create returning NULL.
func noMemory(create *dl.Func) func() error {
	return func() error {
		return &Error{Func: create.Name, Code: MemoryAllocation, Text: "Allocation error : not enough memory"}
	}
}

// Trim frees the idle contexts, as after a burst of work that will not
// come again soon; later calls make new ones.
func Trim() {
	dctxs.Trim()
	cctxs.Trim()
}
