package cuda

import "unsafe"

var (
	procStreamCreate      = fn("cuStreamCreate")
	procStreamSynchronize = fn("cuStreamSynchronize")
	procStreamDestroy     = fn("cuStreamDestroy_v2")
	procStreamQuery       = fn("cuStreamQuery")
)

// Stream flags for StreamCreate (CUstream_flags).
const (
	StreamDefault     uint32 = 0x0 // CU_STREAM_DEFAULT
	StreamNonBlocking uint32 = 0x1 // CU_STREAM_NON_BLOCKING: no implicit synchronisation with the legacy default stream
)

// Special stream handles accepted wherever a Stream is.
const (
	StreamLegacy    Stream = 0x1 // CU_STREAM_LEGACY: the legacy default stream, whatever the build's default
	StreamPerThread Stream = 0x2 // CU_STREAM_PER_THREAD: the calling thread's default stream
)

// StreamCreate creates a stream in the current context (cuStreamCreate).
// Destroy it with StreamDestroy.
func StreamCreate(flags uint32) (Stream, error) {
	var s Stream
	if err := check(procStreamCreate.Call(uintptr(unsafe.Pointer(&s)), uintptr(flags))); err != nil {
		return 0, err
	}
	return s, nil
}

// StreamSynchronize waits until all work queued on s has finished
// (cuStreamSynchronize).
func StreamSynchronize(s Stream) error {
	return check(procStreamSynchronize.Call(uintptr(s)))
}

// StreamDestroy destroys s (cuStreamDestroy_v2). Work already queued on it
// still runs to completion.
func StreamDestroy(s Stream) error {
	return check(procStreamDestroy.Call(uintptr(s)))
}

// StreamQuery returns nil if all work queued on s has finished and
// ErrorNotReady if not (cuStreamQuery).
func StreamQuery(s Stream) error {
	return check(procStreamQuery.Call(uintptr(s)))
}
