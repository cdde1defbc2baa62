package cuda

import "unsafe"

var (
	procEventCreate      = fn("cuEventCreate")
	procEventRecord      = fn("cuEventRecord")
	procEventSynchronize = fn("cuEventSynchronize")
	procEventQuery       = fn("cuEventQuery")
	procEventDestroy     = fn("cuEventDestroy_v2")
)

// Event is a CUDA event handle (CUevent).
type Event uintptr

// Event flags for EventCreate (CUevent_flags).
const (
	EventDefault       uint32 = 0x0 // CU_EVENT_DEFAULT
	EventBlockingSync  uint32 = 0x1 // CU_EVENT_BLOCKING_SYNC: EventSynchronize sleeps instead of spinning
	EventDisableTiming uint32 = 0x2 // CU_EVENT_DISABLE_TIMING: no timestamps, cheaper to record and wait on
)

// EventCreate creates an event in the current context (cuEventCreate).
// Destroy it with EventDestroy.
func EventCreate(flags uint32) (Event, error) {
	var e Event
	if err := check(procEventCreate.Call(uintptr(unsafe.Pointer(&e)), uintptr(flags))); err != nil {
		return 0, err
	}
	return e, nil
}

// EventRecord captures in e the work queued on s so far (cuEventRecord).
func EventRecord(e Event, s Stream) error {
	return check(procEventRecord.Call(uintptr(e), uintptr(s)))
}

// EventSynchronize waits until the work e captured has finished
// (cuEventSynchronize). An event created with EventBlockingSync puts the
// thread to sleep while it waits; otherwise the driver spins.
func EventSynchronize(e Event) error {
	return check(procEventSynchronize.Call(uintptr(e)))
}

// EventQuery returns nil if the work e captured has finished and
// ErrorNotReady if not (cuEventQuery).
func EventQuery(e Event) error {
	return check(procEventQuery.Call(uintptr(e)))
}

// EventDestroy destroys e (cuEventDestroy_v2). An event still pending is
// released when its work completes.
func EventDestroy(e Event) error {
	return check(procEventDestroy.Call(uintptr(e)))
}
