package cuda

import (
	"runtime"
	"strconv"
	"unsafe"
)

var (
	procPointerGetAttribute  = fn("cuPointerGetAttribute")
	procPointerGetAttributes = fn("cuPointerGetAttributes")
)

// MemoryType says where memory lives (CUmemorytype). The zero value means
// the memory is not known to CUDA: ordinary pageable host memory, such as
// Go heap memory.
type MemoryType uint32

// Memory types, with the values of cuda.h.
const (
	MemoryTypeHost    MemoryType = 1 // CU_MEMORYTYPE_HOST: page-locked host memory
	MemoryTypeDevice  MemoryType = 2 // CU_MEMORYTYPE_DEVICE
	MemoryTypeArray   MemoryType = 3 // CU_MEMORYTYPE_ARRAY
	MemoryTypeUnified MemoryType = 4 // CU_MEMORYTYPE_UNIFIED
)

// String returns the memory type's name: "host", "device", "array",
// "unified", or "unregistered" for 0.
func (t MemoryType) String() string {
	switch t {
	case 0:
		return "unregistered"
	case MemoryTypeHost:
		return "host"
	case MemoryTypeDevice:
		return "device"
	case MemoryTypeArray:
		return "array"
	case MemoryTypeUnified:
		return "unified"
	}
	return "MemoryType(" + strconv.FormatUint(uint64(t), 10) + ")"
}

// PointerAttribute names a property of a memory address
// (CUpointer_attribute).
type PointerAttribute int32

// Pointer attributes, with the values of cuda.h; the comment gives each
// one's C type.
const (
	PointerAttributeContext                PointerAttribute = 1  // CUcontext
	PointerAttributeMemoryType             PointerAttribute = 2  // CUmemorytype (unsigned int)
	PointerAttributeDevicePointer          PointerAttribute = 3  // CUdeviceptr
	PointerAttributeHostPointer            PointerAttribute = 4  // void *
	PointerAttributeSyncMemops             PointerAttribute = 6  // bool
	PointerAttributeBufferID               PointerAttribute = 7  // unsigned long long
	PointerAttributeIsManaged              PointerAttribute = 8  // bool
	PointerAttributeDeviceOrdinal          PointerAttribute = 9  // int
	PointerAttributeRangeStartAddr         PointerAttribute = 11 // CUdeviceptr
	PointerAttributeRangeSize              PointerAttribute = 12 // size_t
	PointerAttributeMapped                 PointerAttribute = 13 // bool
	PointerAttributeIsGPUDirectRDMACapable PointerAttribute = 15 // bool
)

// PointerAttributes describes a memory address, as PointerGetAttributes
// reports it.
type PointerAttributes struct {
	// MemoryType is where the memory lives; 0 means the address is not
	// known to CUDA (pageable host memory). The other fields then carry
	// the driver's defaults and mean nothing: on CUDA 13 HostPointer
	// echoes the address and DeviceOrdinal is -2.
	MemoryType MemoryType
	// Context is the context the memory was allocated or registered in.
	Context Context
	// DevicePointer is the address at which the device accesses the memory.
	DevicePointer DevicePtr
	// HostPointer is the address at which the host accesses the memory, or
	// 0 if the host cannot.
	HostPointer uintptr
	// IsManaged reports managed (unified) memory.
	IsManaged bool
	// DeviceOrdinal is the ordinal of the device the memory was allocated
	// or registered for.
	DeviceOrdinal int
	// RangeStart and RangeSize give the whole allocation or registration
	// that contains the address.
	RangeStart DevicePtr
	RangeSize  int
}

// pointerAttrs are the attributes PointerGetAttributes asks for, in the
// order of the fields of pointerAttrOut.
var pointerAttrs = [...]PointerAttribute{
	PointerAttributeMemoryType,
	PointerAttributeContext,
	PointerAttributeDevicePointer,
	PointerAttributeHostPointer,
	PointerAttributeIsManaged,
	PointerAttributeDeviceOrdinal,
	PointerAttributeRangeStartAddr,
	PointerAttributeRangeSize,
}

// pointerAttrOut receives the attributes. Every slot is 8 bytes and
// zeroed, wide enough for each attribute's C type (4 bytes for enums and
// int, 1 or 4 for bool, 8 for pointers and size_t); on little-endian
// machines the narrower values land in the low bytes.
type pointerAttrOut [len(pointerAttrs)]uint64

// PointerGetAttributes describes the memory at address p with one call to
// cuPointerGetAttributes. Unlike PointerGetAttribute it succeeds for
// addresses CUDA does not know, such as Go heap memory, and reports them
// with MemoryType 0. p may be a host address or a DevicePtr converted to
// uintptr. Memory allocated with MemHostAlloc or registered with
// MemHostRegister reports MemoryTypeHost; RangeStart and RangeSize then
// give the whole allocation or registration.
func PointerGetAttributes(p uintptr) (PointerAttributes, error) {
	attrs := pointerAttrs
	out := new(pointerAttrOut)
	// The driver receives an array of pointers into out: out is pinned so
	// that passing memory that holds Go pointers follows the cgo rules.
	var pin runtime.Pinner
	pin.Pin(out)
	defer pin.Unpin()
	var data [len(pointerAttrs)]unsafe.Pointer
	for i := range data {
		data[i] = unsafe.Pointer(&out[i])
	}
	if err := check(procPointerGetAttributes.Call(uintptr(len(attrs)), uintptr(unsafe.Pointer(&attrs[0])), uintptr(unsafe.Pointer(&data[0])), p)); err != nil {
		return PointerAttributes{}, err
	}
	return PointerAttributes{
		MemoryType:    MemoryType(uint32(out[0])),
		Context:       Context(out[1]),
		DevicePointer: DevicePtr(out[2]),
		HostPointer:   uintptr(out[3]),
		IsManaged:     uint8(out[4]) != 0,
		DeviceOrdinal: int(int32(uint32(out[5]))),
		RangeStart:    DevicePtr(out[6]),
		RangeSize:     int(out[7]),
	}, nil
}

// PointerGetAttribute returns one attribute of the memory at address p
// (cuPointerGetAttribute). The value is the attribute's C value (see the
// PointerAttribute constants) zero-extended to 64 bits. Unlike
// PointerGetAttributes, it fails with ErrorInvalidValue for memory CUDA
// does not know.
func PointerGetAttribute(attr PointerAttribute, p uintptr) (uint64, error) {
	var v uint64
	if err := check(procPointerGetAttribute.Call(uintptr(unsafe.Pointer(&v)), uintptr(attr), p)); err != nil {
		return 0, err
	}
	return v, nil
}
