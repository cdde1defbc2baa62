package dl

import (
	"runtime"
	"sync/atomic"
)

// ObjectList keeps idle C objects of one kind (a zstd context, a
// libdeflate decompressor) for reuse: an object keeps its tables and
// buffers between calls, and making one per call would cost more than a
// small input's coding. The objects are C memory, which a sync.Pool
// would drop without freeing; the list holds at most GOMAXPROCS idle
// ones and frees any returned past that.
type ObjectList struct {
	idle         chan uintptr
	create, free *Func
	onNull       func() error
	live         atomic.Int64 // objects made and not yet freed
}

// NewObjectList returns a list whose objects create makes (taking no
// arguments) and free frees; onNull is the error of a create that
// returns NULL (out of memory).
func NewObjectList(create, free *Func, onNull func() error) *ObjectList {
	return &ObjectList{idle: make(chan uintptr, runtime.GOMAXPROCS(0)), create: create, free: free, onNull: onNull}
}

// Get returns an idle object or a new one.
func (l *ObjectList) Get() (uintptr, error) {
	select {
	case c := <-l.idle:
		return c, nil
	default:
	}
	c, err := l.create.Call()
	if err != nil {
		return 0, err
	}
	if c == 0 {
		return 0, l.onNull()
	}
	l.live.Add(1)
	return c, nil
}

// Put keeps c for the next Get, or frees it when enough are idle.
func (l *ObjectList) Put(c uintptr) {
	select {
	case l.idle <- c:
	default:
		l.release(c)
	}
}

func (l *ObjectList) release(c uintptr) {
	l.free.Call(c)
	l.live.Add(-1)
}

// Trim frees every idle object.
func (l *ObjectList) Trim() {
	for {
		select {
		case c := <-l.idle:
			l.release(c)
		default:
			return
		}
	}
}

// Live returns how many objects the list made and has not freed.
func (l *ObjectList) Live() int64 { return l.live.Load() }

// Idle returns how many objects the list holds for reuse.
func (l *ObjectList) Idle() int { return len(l.idle) }

// MaxIdle returns how many idle objects the list keeps at most.
func (l *ObjectList) MaxIdle() int { return cap(l.idle) }
