package cuda

import (
	"runtime"
	"sync/atomic"
	"unsafe"
)

var (
	procMemHostAlloc      = fn("cuMemHostAlloc")
	procMemFreeHost       = fn("cuMemFreeHost")
	procMemHostRegister   = fn("cuMemHostRegister_v2")
	procMemHostUnregister = fn("cuMemHostUnregister")
)

// Flags for MemHostAlloc (CU_MEMHOSTALLOC_*).
const (
	MemHostAllocPortable      uint32 = 0x01 // pinned for all contexts, not only the current one
	MemHostAllocDeviceMap     uint32 = 0x02 // mapped into the device address space
	MemHostAllocWriteCombined uint32 = 0x04 // write-combined: fast for the device to read, slow for the host to read
)

// Flags for MemHostRegister (CU_MEMHOSTREGISTER_*).
const (
	MemHostRegisterPortable  uint32 = 0x01 // pinned for all contexts, not only the current one
	MemHostRegisterDeviceMap uint32 = 0x02 // mapped into the device address space
	MemHostRegisterIoMemory  uint32 = 0x04 // the range is memory-mapped I/O space of a PCIe device
	MemHostRegisterReadOnly  uint32 = 0x08 // the device only reads the range
)

// HostBuffer is page-locked (pinned) host memory allocated by the driver
// with MemHostAlloc. It lives outside the Go heap, so it may be handed to
// asynchronous copies and to cuFile. Release it with Close.
type HostBuffer struct {
	p      unsafe.Pointer
	n      int
	ctx    Context
	closed atomic.Bool
}

// MemHostAlloc allocates size bytes of page-locked host memory in the
// context current on the calling OS thread (cuMemHostAlloc). flags is a
// combination of the MemHostAlloc* constants. A size that is not positive
// is an error matching ErrorInvalidValue.
func MemHostAlloc(size int, flags uint32) (*HostBuffer, error) {
	if size <= 0 {
		return nil, invalid("MemHostAlloc", "size %d is not positive", size)
	}
	runtime.LockOSThread()
	defer runtime.UnlockOSThread()
	ctx, err := CtxGetCurrent()
	if err != nil {
		return nil, err
	}
	var p unsafe.Pointer
	if err := check(procMemHostAlloc.Call(uintptr(unsafe.Pointer(&p)), uintptr(size), uintptr(flags))); err != nil {
		return nil, err
	}
	return &HostBuffer{p: p, n: size, ctx: ctx}, nil
}

// Bytes returns the buffer's memory as a slice, or nil once the buffer is
// closed. The slice must not be used after Close.
func (h *HostBuffer) Bytes() []byte {
	if h == nil || h.closed.Load() {
		return nil
	}
	return unsafe.Slice((*byte)(h.p), h.n)
}

// Len returns the buffer's size in bytes.
func (h *HostBuffer) Len() int {
	if h == nil {
		return 0
	}
	return h.n
}

// Close frees the buffer (cuMemFreeHost) with its context pushed. Calls
// after the first, and calls on a nil buffer, do nothing and return nil.
func (h *HostBuffer) Close() error {
	if h == nil || h.closed.Swap(true) {
		return nil
	}
	free := func() error { return check(procMemFreeHost.Call(uintptr(h.p))) }
	if h.ctx == 0 {
		return free()
	}
	return WithContext(h.ctx, free)
}

// MemHostRegister page-locks the memory of b and registers it with the
// current context (cuMemHostRegister_v2), so that it can take part in
// asynchronous copies. b must not be Go heap memory (the Go runtime may
// reuse it once unreferenced): use memory from an anonymous mmap, for
// example. flags is a combination of the MemHostRegister* constants.
// Undo with MemHostUnregister before the memory is unmapped.
func MemHostRegister(b []byte, flags uint32) error {
	if len(b) == 0 {
		return invalid("MemHostRegister", "empty buffer")
	}
	return check(procMemHostRegister.Call(uintptr(unsafe.Pointer(&b[0])), uintptr(len(b)), uintptr(flags)))
}

// MemHostUnregister unregisters memory registered with MemHostRegister
// (cuMemHostUnregister); b must start where the registered range starts.
func MemHostUnregister(b []byte) error {
	if len(b) == 0 {
		return invalid("MemHostUnregister", "empty buffer")
	}
	return check(procMemHostUnregister.Call(uintptr(unsafe.Pointer(&b[0]))))
}
