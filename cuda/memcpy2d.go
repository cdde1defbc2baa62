package cuda

import (
	"math"
	"runtime"
	"unsafe"
)

var procMemcpy2DAsync = fn("cuMemcpy2DAsync_v2")

// memcpy2D is CUDA_MEMCPY2D (cuda.h), 128 bytes on 64-bit Linux: each
// side's X offset in bytes, Y row, memory type (a 4-byte enum, padded),
// host pointer, device pointer, array handle and pitch; then the width in
// bytes and the height of the copy.
type memcpy2D struct {
	srcXInBytes, srcY uintptr
	srcMemoryType     uint32
	srcHost           unsafe.Pointer
	srcDevice         DevicePtr
	srcArray          uintptr
	srcPitch          uintptr
	dstXInBytes, dstY uintptr
	dstMemoryType     uint32
	dstHost           unsafe.Pointer
	dstDevice         DevicePtr
	dstArray          uintptr
	dstPitch          uintptr
	widthInBytes      uintptr
	height            uintptr
}

// CUmemorytype values.
const (
	memoryTypeHost   = 1
	memoryTypeDevice = 2
)

// MaxPitch is the largest row pitch the 2D copies accept here: CUDA
// bounds device pitches by the device's maximum pitch attribute, 2^31-1
// bytes on current GPUs; wider rows are copied row by row.
const MaxPitch = 1<<31 - 1

// check2D validates a 2D copy of height rows of width bytes between a
// host buffer of n bytes (rows hostPitch apart) and device memory (rows
// devPitch apart).
func check2D(op string, n, hostPitch, devPitch, width, height int) error {
	switch {
	case width < 0 || height < 0:
		return invalid(op, "width %d, height %d", width, height)
	case hostPitch < width || devPitch < width || hostPitch > MaxPitch || devPitch > MaxPitch:
		return invalid(op, "pitches %d (host) and %d (device) for rows of %d bytes (at most %d)", hostPitch, devPitch, width, MaxPitch)
	case width > 0 && height > 0 && (height-1) > (n-width)/max(hostPitch, 1):
		return invalid(op, "%d rows of %d bytes, %d apart, do not fit in %d bytes", height, width, hostPitch, n)
	}
	return nil
}

// MemcpyHtoD2DAsync queues on stream s a copy of height rows of width
// bytes from src, rows srcPitch bytes apart, to device memory at dst,
// rows dstPitch bytes apart (cuMemcpy2DAsync_v2): a strided box in one
// call where a copy per row would cost a driver call each. src must be
// page-locked memory outside the Go heap and stay valid and unchanged
// until the stream has been synchronised. An empty copy does nothing.
func MemcpyHtoD2DAsync(dst DevicePtr, dstPitch int, src []byte, srcPitch, width, height int, s Stream) error {
	if err := check2D("MemcpyHtoD2DAsync", len(src), srcPitch, dstPitch, width, height); err != nil {
		return err
	}
	if width == 0 || height == 0 {
		return nil
	}
	p := &memcpy2D{
		srcMemoryType: memoryTypeHost, srcHost: unsafe.Pointer(&src[0]), srcPitch: uintptr(srcPitch),
		dstMemoryType: memoryTypeDevice, dstDevice: dst, dstPitch: uintptr(dstPitch),
		widthInBytes: uintptr(width), height: uintptr(height),
	}
	err := check(procMemcpy2DAsync.Call(uintptr(unsafe.Pointer(p)), uintptr(s)))
	runtime.KeepAlive(p)
	runtime.KeepAlive(src)
	return err
}

// MemcpyDtoH2DAsync queues on stream s a copy of height rows of width
// bytes from device memory at src, rows srcPitch bytes apart, into dst,
// rows dstPitch bytes apart (cuMemcpy2DAsync_v2). dst must be page-locked
// memory outside the Go heap and must not be read until the stream has
// been synchronised. An empty copy does nothing.
func MemcpyDtoH2DAsync(dst []byte, dstPitch int, src DevicePtr, srcPitch, width, height int, s Stream) error {
	if err := check2D("MemcpyDtoH2DAsync", len(dst), dstPitch, srcPitch, width, height); err != nil {
		return err
	}
	if width == 0 || height == 0 {
		return nil
	}
	p := &memcpy2D{
		srcMemoryType: memoryTypeDevice, srcDevice: src, srcPitch: uintptr(srcPitch),
		dstMemoryType: memoryTypeHost, dstHost: unsafe.Pointer(&dst[0]), dstPitch: uintptr(dstPitch),
		widthInBytes: uintptr(width), height: uintptr(height),
	}
	err := check(procMemcpy2DAsync.Call(uintptr(unsafe.Pointer(p)), uintptr(s)))
	runtime.KeepAlive(p)
	runtime.KeepAlive(dst)
	return err
}

// MemcpyDtoD2DAsync queues on stream s a copy of height rows of width
// bytes from device memory at src, rows srcPitch bytes apart, to device
// memory at dst, rows dstPitch bytes apart (cuMemcpy2DAsync_v2): boxes
// moved within device memory, where rows of a few KiB cost far less than
// across PCIe. An empty copy does nothing.
func MemcpyDtoD2DAsync(dst DevicePtr, dstPitch int, src DevicePtr, srcPitch, width, height int, s Stream) error {
	// No host buffer bounds the rows: only shapes and pitches are checked.
	if err := check2D("MemcpyDtoD2DAsync", math.MaxInt, srcPitch, dstPitch, width, height); err != nil {
		return err
	}
	if width == 0 || height == 0 {
		return nil
	}
	p := &memcpy2D{
		srcMemoryType: memoryTypeDevice, srcDevice: src, srcPitch: uintptr(srcPitch),
		dstMemoryType: memoryTypeDevice, dstDevice: dst, dstPitch: uintptr(dstPitch),
		widthInBytes: uintptr(width), height: uintptr(height),
	}
	err := check(procMemcpy2DAsync.Call(uintptr(unsafe.Pointer(p)), uintptr(s)))
	runtime.KeepAlive(p)
	return err
}
