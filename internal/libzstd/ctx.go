package libzstd

import (
	"runtime"
	"sync/atomic"

	"github.com/kvikgo/kvik/internal/dl"
)

// ctxList keeps idle contexts of one kind (ZSTD_CCtx or ZSTD_DCtx) for
// reuse: a context keeps its tables and buffers between calls, and making
// one per call would cost more than a small frame's coding. Contexts are
// C memory, which a sync.Pool would drop without freeing; the list holds
// at most GOMAXPROCS idle ones and frees any returned past that.
type ctxList struct {
	idle         chan uintptr
	create, free *dl.Func
	live         atomic.Int64 // contexts made and not yet freed
}

func newCtxList(create, free *dl.Func) *ctxList {
	return &ctxList{idle: make(chan uintptr, runtime.GOMAXPROCS(0)), create: create, free: free}
}

var (
	dctxs = newCtxList(procCreateDCtx, procFreeDCtx)
	cctxs = newCtxList(procCreateCCtx, procFreeCCtx)
)

// get returns an idle context or a new one.
func (l *ctxList) get() (uintptr, error) {
	select {
	case c := <-l.idle:
		return c, nil
	default:
	}
	c, err := l.create.Call()
	if err != nil {
		return 0, err
	}
	if c == 0 { // NULL: out of memory
		return 0, &Error{Func: l.create.Name, Code: MemoryAllocation, Text: "Allocation error : not enough memory"}
	}
	l.live.Add(1)
	return c, nil
}

// put keeps c for the next get, or frees it when enough are idle.
func (l *ctxList) put(c uintptr) {
	select {
	case l.idle <- c:
	default:
		l.release(c)
	}
}

func (l *ctxList) release(c uintptr) {
	l.free.Call(c)
	l.live.Add(-1)
}

// trim frees every idle context.
func (l *ctxList) trim() {
	for {
		select {
		case c := <-l.idle:
			l.release(c)
		default:
			return
		}
	}
}

// Trim frees the idle contexts, as after a burst of work that will not
// come again soon; later calls make new ones.
func Trim() {
	dctxs.trim()
	cctxs.trim()
}
