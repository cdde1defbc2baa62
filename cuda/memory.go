package cuda

import (
	"runtime"
	"sync/atomic"
	"unsafe"
)

var (
	procMemAlloc           = fn("cuMemAlloc_v2")
	procMemFree            = fn("cuMemFree_v2")
	procMemGetInfo         = fn("cuMemGetInfo_v2")
	procMemsetD8           = fn("cuMemsetD8_v2")
	procMemcpyHtoD         = fn("cuMemcpyHtoD_v2")
	procMemcpyDtoH         = fn("cuMemcpyDtoH_v2")
	procMemcpyDtoD         = fn("cuMemcpyDtoD_v2")
	procMemcpyHtoDAsync    = fn("cuMemcpyHtoDAsync_v2")
	procMemcpyDtoHAsync    = fn("cuMemcpyDtoHAsync_v2")
	procMemGetAddressRange = fn("cuMemGetAddressRange_v2")
)

// DeviceBuffer is device memory allocated by MemAlloc. Release it with
// Close. Its methods may be called concurrently.
type DeviceBuffer struct {
	ptr    DevicePtr
	size   int
	ctx    Context
	closed atomic.Bool
}

// MemAlloc allocates size bytes of device memory in the context current on
// the calling OS thread (cuMemAlloc_v2). The memory is not cleared. A size
// that is not positive is an error matching ErrorInvalidValue.
func MemAlloc(size int) (*DeviceBuffer, error) {
	if size <= 0 {
		return nil, invalid("MemAlloc", "size %d is not positive", size)
	}
	// The context and the allocation must be looked up on the same thread.
	runtime.LockOSThread()
	defer runtime.UnlockOSThread()
	ctx, err := CtxGetCurrent()
	if err != nil {
		return nil, err
	}
	var p DevicePtr
	if err := check(procMemAlloc.Call(uintptr(unsafe.Pointer(&p)), uintptr(size))); err != nil {
		return nil, err
	}
	return &DeviceBuffer{ptr: p, size: size, ctx: ctx}, nil
}

// Ptr returns the buffer's device address, or 0 for a nil buffer. The
// address is valid until Close.
func (b *DeviceBuffer) Ptr() DevicePtr {
	if b == nil {
		return 0
	}
	return b.ptr
}

// Size returns the buffer's size in bytes.
func (b *DeviceBuffer) Size() int {
	if b == nil {
		return 0
	}
	return b.size
}

// Context returns the context that was current when the buffer was
// allocated, the one it belongs to.
func (b *DeviceBuffer) Context() Context {
	if b == nil {
		return 0
	}
	return b.ctx
}

// Close frees the buffer (cuMemFree_v2) with its context pushed, so it can
// be called from any goroutine. Calls after the first, and calls on a nil
// buffer, do nothing and return nil.
func (b *DeviceBuffer) Close() error {
	if b == nil || b.closed.Swap(true) {
		return nil
	}
	if b.ctx == 0 {
		return MemFree(b.ptr)
	}
	return WithContext(b.ctx, func() error { return MemFree(b.ptr) })
}

// MemFree frees device memory allocated by cuMemAlloc (cuMemFree_v2). The
// memory's context, or one that shares its address space, must be current.
// Memory from MemAlloc is freed with DeviceBuffer.Close instead.
func MemFree(p DevicePtr) error {
	return check(procMemFree.Call(uintptr(p)))
}

// MemGetInfo returns the free and total memory, in bytes, of the current
// context's device (cuMemGetInfo_v2).
func MemGetInfo() (free, total int64, err error) {
	var f, t uint64
	if err := check(procMemGetInfo.Call(uintptr(unsafe.Pointer(&f)), uintptr(unsafe.Pointer(&t)))); err != nil {
		return 0, 0, err
	}
	return int64(f), int64(t), nil
}

// MemsetD8 sets n bytes of device memory at dst to v (cuMemsetD8_v2). It
// is asynchronous with respect to the host when dst is device memory.
func MemsetD8(dst DevicePtr, v byte, n int) error {
	if n < 0 {
		return invalid("MemsetD8", "negative count %d", n)
	}
	if n == 0 {
		return nil
	}
	return check(procMemsetD8.Call(uintptr(dst), uintptr(v), uintptr(n)))
}

// MemcpyHtoD copies src from host memory to device memory at dst
// (cuMemcpyHtoD_v2). An empty src copies nothing.
func MemcpyHtoD(dst DevicePtr, src []byte) error {
	if len(src) == 0 {
		return nil
	}
	return check(procMemcpyHtoD.Call(uintptr(dst), uintptr(unsafe.Pointer(&src[0])), uintptr(len(src))))
}

// MemcpyDtoH copies len(dst) bytes from device memory at src to dst
// (cuMemcpyDtoH_v2). An empty dst copies nothing.
func MemcpyDtoH(dst []byte, src DevicePtr) error {
	if len(dst) == 0 {
		return nil
	}
	return check(procMemcpyDtoH.Call(uintptr(unsafe.Pointer(&dst[0])), uintptr(src), uintptr(len(dst))))
}

// MemcpyDtoD copies n bytes of device memory from src to dst
// (cuMemcpyDtoD_v2).
func MemcpyDtoD(dst, src DevicePtr, n int) error {
	if n < 0 {
		return invalid("MemcpyDtoD", "negative count %d", n)
	}
	if n == 0 {
		return nil
	}
	return check(procMemcpyDtoD.Call(uintptr(dst), uintptr(src), uintptr(n)))
}

// MemcpyHtoDAsync queues a copy of src to device memory at dst on stream s
// (cuMemcpyHtoDAsync_v2). src must be page-locked memory outside the Go
// heap, for example HostBuffer.Bytes from MemHostAlloc, and must stay
// valid and unchanged until the stream has been synchronised: the copy may
// run after MemcpyHtoDAsync returns. An empty src copies nothing.
func MemcpyHtoDAsync(dst DevicePtr, src []byte, s Stream) error {
	if len(src) == 0 {
		return nil
	}
	return check(procMemcpyHtoDAsync.Call(uintptr(dst), uintptr(unsafe.Pointer(&src[0])), uintptr(len(src)), uintptr(s)))
}

// MemcpyDtoHAsync queues a copy of len(dst) bytes from device memory at src
// to dst on stream s (cuMemcpyDtoHAsync_v2). dst must be page-locked
// memory outside the Go heap, for example HostBuffer.Bytes from
// MemHostAlloc, and must stay valid and must not be read until the stream
// has been synchronised. An empty dst copies nothing.
func MemcpyDtoHAsync(dst []byte, src DevicePtr, s Stream) error {
	if len(dst) == 0 {
		return nil
	}
	return check(procMemcpyDtoHAsync.Call(uintptr(unsafe.Pointer(&dst[0])), uintptr(src), uintptr(len(dst)), uintptr(s)))
}

// MemGetAddressRange returns the base address and size of the allocation
// that contains device address p (cuMemGetAddressRange_v2).
func MemGetAddressRange(p DevicePtr) (base DevicePtr, size int, err error) {
	var n uint64
	if err := check(procMemGetAddressRange.Call(uintptr(unsafe.Pointer(&base)), uintptr(unsafe.Pointer(&n)), uintptr(p))); err != nil {
		return 0, 0, err
	}
	return base, int(n), nil
}

var (
	procDeviceCanAccessPeer = fn("cuDeviceCanAccessPeer")
	procCtxEnablePeerAccess = fn("cuCtxEnablePeerAccess")
	procMemcpyPeerAsync     = fn("cuMemcpyPeerAsync")
)

// DeviceCanAccessPeer reports whether contexts on device d can access
// memory of peer directly, over NVLink or PCIe
// (cuDeviceCanAccessPeer).
func DeviceCanAccessPeer(d, peer Device) (bool, error) {
	var can int32
	if err := check(procDeviceCanAccessPeer.Call(uintptr(unsafe.Pointer(&can)), uintptr(d), uintptr(peer))); err != nil {
		return false, err
	}
	return can != 0, nil
}

// CtxEnablePeerAccess lets the context current on the calling OS thread
// access memory of peer (cuCtxEnablePeerAccess, flags 0). Enabling it a
// second time fails with ErrorPeerAccessAlreadyEnabled.
func CtxEnablePeerAccess(peer Context) error {
	return check(procCtxEnablePeerAccess.Call(uintptr(peer), 0))
}

// MemcpyPeerAsync queues a copy of n bytes from src in context srcCtx to
// dst in context dstCtx on stream s (cuMemcpyPeerAsync): directly between
// the devices where peer access is enabled, through host memory
// otherwise.
func MemcpyPeerAsync(dst DevicePtr, dstCtx Context, src DevicePtr, srcCtx Context, n int, s Stream) error {
	if n < 0 {
		return invalid("MemcpyPeerAsync", "negative count %d", n)
	}
	if n == 0 {
		return nil
	}
	return check(procMemcpyPeerAsync.Call(uintptr(dst), uintptr(dstCtx), uintptr(src), uintptr(srcCtx), uintptr(n), uintptr(s)))
}
