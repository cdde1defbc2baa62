package cufile

import (
	"math"
	"time"
	"unsafe"

	"github.com/kvikgo/kvik/cuda"
)

// BatchIOSetUp creates a batch I/O context for up to n entries in flight
// (cuFileBatchIOSetUp); n may not exceed DriverProperties.MaxBatchIOSize.
// Release it with BatchIODestroy.
func BatchIOSetUp(n int) (BatchHandle, error) {
	if n <= 0 || n > math.MaxUint32 {
		return 0, invalid("BatchIOSetUp", "entry count %d out of range", n)
	}
	var b BatchHandle
	if err := callStatus(fnBatchIOSetUp, uintptr(unsafe.Pointer(&b)), uintptr(n)); err != nil {
		return 0, err
	}
	return b, nil
}

// IOParams describes one batch entry (CUfileIOParams_t in CUFILE_BATCH
// mode): Size bytes between the file of Handle at FileOffset and the memory
// at Buf+BufOffset, in the direction of Opcode.
type IOParams struct {
	Handle     Handle
	Buf        cuda.DevicePtr
	FileOffset int64
	BufOffset  int64
	Size       int
	Opcode     Opcode
	// Cookie comes back in the entry's IOEvent. cuFile keeps it as a plain
	// value: it must not be a Go pointer (use an index, for example).
	Cookie uintptr
}

// BatchIOSubmit submits entries to the batch (cuFileBatchIOSubmit); they
// run asynchronously and in any order. flags is reserved and must be 0.
// The entries are copied into C layout for the call only.
func BatchIOSubmit(b BatchHandle, params []IOParams, flags uint32) error {
	if b == 0 {
		return invalid("BatchIOSubmit", "nil batch handle")
	}
	if len(params) == 0 || len(params) > math.MaxUint32 {
		return invalid("BatchIOSubmit", "entry count %d out of range", len(params))
	}
	c := make([]cIOParams, len(params))
	for i, p := range params {
		if err := checkIO("BatchIOSubmit", p.Handle, p.Buf, p.Size, p.FileOffset, p.BufOffset); err != nil {
			return err
		}
		if p.Opcode != BatchRead && p.Opcode != BatchWrite {
			return invalid("BatchIOSubmit", "entry %d: bad opcode %d", i, p.Opcode)
		}
		c[i] = cIOParams{
			mode:         batchModeBatch,
			devPtrBase:   uintptr(p.Buf),
			fileOffset:   p.FileOffset,
			devPtrOffset: p.BufOffset,
			size:         uint64(p.Size),
			fh:           uintptr(p.Handle),
			opcode:       uint32(p.Opcode),
			cookie:       p.Cookie,
		}
	}
	return callStatus(fnBatchIOSubmit, uintptr(b), uintptr(len(c)), uintptr(unsafe.Pointer(unsafe.SliceData(c))), uintptr(flags))
}

// IOEvent is the state of one batch entry (CUfileIOEvents_t), as
// BatchIOGetStatus reports it.
type IOEvent struct {
	Cookie uintptr // the entry's IOParams.Cookie
	Status Status
	// Ret is the number of bytes transferred when Status is Complete, or a
	// negative error: the C field (size_t) read as signed.
	Ret int
}

// BatchIOGetStatus fills events with the states of entries of the batch
// that have completed (cuFileBatchIOGetStatus), waiting until at least
// minNr have or the timeout passes, and returns how many it filled. At most
// len(events) are returned. A negative timeout passes no timeout (a NULL
// struct timespec *) and leaves the wait to cuFile; zero or more passes
// that duration. Match events to entries by Cookie.
func BatchIOGetStatus(b BatchHandle, minNr int, events []IOEvent, timeout time.Duration) (int, error) {
	if b == 0 {
		return 0, invalid("BatchIOGetStatus", "nil batch handle")
	}
	if len(events) == 0 || len(events) > math.MaxUint32 {
		return 0, invalid("BatchIOGetStatus", "event count %d out of range", len(events))
	}
	if minNr < 0 || minNr > len(events) {
		return 0, invalid("BatchIOGetStatus", "minNr %d out of range [0, %d]", minNr, len(events))
	}
	c := make([]cIOEvents, len(events))
	nr := uint32(len(events))
	var err error
	if timeout < 0 {
		err = callStatus(fnBatchIOGetStatus, uintptr(b), uintptr(minNr), uintptr(unsafe.Pointer(&nr)),
			uintptr(unsafe.Pointer(unsafe.SliceData(c))), 0)
	} else {
		ts := cTimespec{sec: int64(timeout / time.Second), nsec: int64(timeout % time.Second)}
		err = callStatus(fnBatchIOGetStatus, uintptr(b), uintptr(minNr), uintptr(unsafe.Pointer(&nr)),
			uintptr(unsafe.Pointer(unsafe.SliceData(c))), uintptr(unsafe.Pointer(&ts)))
	}
	if err != nil {
		return 0, err
	}
	n := min(int(nr), len(events))
	for i := range n {
		events[i] = IOEvent{Cookie: c[i].cookie, Status: Status(c[i].status), Ret: int(int64(c[i].ret))}
	}
	return n, nil
}

// BatchIOCancel asks cuFile to cancel the batch's entries still in flight
// (cuFileBatchIOCancel); it promises nothing for entries already running.
func BatchIOCancel(b BatchHandle) error {
	if b == 0 {
		return invalid("BatchIOCancel", "nil batch handle")
	}
	return callStatus(fnBatchIOCancel, uintptr(b))
}

// BatchIODestroy releases a batch context (cuFileBatchIODestroy, which
// reports nothing). A zero handle is ignored.
func BatchIODestroy(b BatchHandle) {
	if b == 0 {
		return
	}
	_ = callVoid(fnBatchIODestroy, uintptr(b))
}
