package cuda

import "unsafe"

var (
	procDriverGetVersion  = fn("cuDriverGetVersion")
	procDeviceGetCount    = fn("cuDeviceGetCount")
	procDeviceGet         = fn("cuDeviceGet")
	procDeviceGetName     = fn("cuDeviceGetName")
	procDeviceTotalMem    = fn("cuDeviceTotalMem_v2")
	procDeviceGetAttr     = fn("cuDeviceGetAttribute")
	procDeviceGetPCIBusID = fn("cuDeviceGetPCIBusId")
)

// Init initialises the driver (cuInit(0)) if it is not initialised yet
// and returns the result. Calling it is optional: the package calls
// cuInit(0) once, right after it loads the driver library on first use,
// so DeviceGet and the rest work without it. Init is idempotent: every
// call returns the first initialisation's result, which makes it the way
// to learn why the driver is not usable (no library, no device).
func Init() error {
	if err := Load(); err != nil {
		return err
	}
	if initErr != nil {
		return initErr
	}
	return check(uintptr(initResult), nil)
}

// DriverGetVersion returns the CUDA version the driver supports, as
// 1000*major + 10*minor (cuDriverGetVersion); 13000 is CUDA 13.0.
func DriverGetVersion() (int, error) {
	var v int32
	if err := check(procDriverGetVersion.Call(uintptr(unsafe.Pointer(&v)))); err != nil {
		return 0, err
	}
	return int(v), nil
}

// DeviceGetCount returns the number of CUDA devices (cuDeviceGetCount).
func DeviceGetCount() (int, error) {
	var n int32
	if err := check(procDeviceGetCount.Call(uintptr(unsafe.Pointer(&n)))); err != nil {
		return 0, err
	}
	return int(n), nil
}

// DeviceGet returns the device with the given ordinal (cuDeviceGet).
func DeviceGet(ordinal int) (Device, error) {
	var d Device
	if err := check(procDeviceGet.Call(uintptr(unsafe.Pointer(&d)), uintptr(ordinal))); err != nil {
		return 0, err
	}
	return d, nil
}

// Name returns the device's product name (cuDeviceGetName).
func (d Device) Name() (string, error) {
	var buf [256]byte
	if err := check(procDeviceGetName.Call(uintptr(unsafe.Pointer(&buf[0])), uintptr(len(buf)), uintptr(d))); err != nil {
		return "", err
	}
	return cString(buf[:]), nil
}

// TotalMem returns the device's total memory in bytes
// (cuDeviceTotalMem_v2).
func (d Device) TotalMem() (int64, error) {
	var n uint64
	if err := check(procDeviceTotalMem.Call(uintptr(unsafe.Pointer(&n)), uintptr(d))); err != nil {
		return 0, err
	}
	return int64(n), nil
}

// DeviceAttribute names a device property (CUdevice_attribute).
type DeviceAttribute int32

// Device attributes, with the values of cuda.h. Boolean attributes are 1
// when true and 0 when false.
const (
	DeviceAttributeMultiprocessorCount               DeviceAttribute = 16  // CU_DEVICE_ATTRIBUTE_MULTIPROCESSOR_COUNT
	DeviceAttributeIntegrated                        DeviceAttribute = 18  // CU_DEVICE_ATTRIBUTE_INTEGRATED
	DeviceAttributeCanMapHostMemory                  DeviceAttribute = 19  // CU_DEVICE_ATTRIBUTE_CAN_MAP_HOST_MEMORY
	DeviceAttributePCIBusID                          DeviceAttribute = 33  // CU_DEVICE_ATTRIBUTE_PCI_BUS_ID
	DeviceAttributePCIDeviceID                       DeviceAttribute = 34  // CU_DEVICE_ATTRIBUTE_PCI_DEVICE_ID
	DeviceAttributeUnifiedAddressing                 DeviceAttribute = 41  // CU_DEVICE_ATTRIBUTE_UNIFIED_ADDRESSING
	DeviceAttributePCIDomainID                       DeviceAttribute = 50  // CU_DEVICE_ATTRIBUTE_PCI_DOMAIN_ID
	DeviceAttributeComputeCapabilityMajor            DeviceAttribute = 75  // CU_DEVICE_ATTRIBUTE_COMPUTE_CAPABILITY_MAJOR
	DeviceAttributeComputeCapabilityMinor            DeviceAttribute = 76  // CU_DEVICE_ATTRIBUTE_COMPUTE_CAPABILITY_MINOR
	DeviceAttributeManagedMemory                     DeviceAttribute = 83  // CU_DEVICE_ATTRIBUTE_MANAGED_MEMORY
	DeviceAttributePageableMemoryAccess              DeviceAttribute = 88  // CU_DEVICE_ATTRIBUTE_PAGEABLE_MEMORY_ACCESS
	DeviceAttributeCanUseHostPointerForRegisteredMem DeviceAttribute = 91  // CU_DEVICE_ATTRIBUTE_CAN_USE_HOST_POINTER_FOR_REGISTERED_MEM
	DeviceAttributeHostRegisterSupported             DeviceAttribute = 99  // CU_DEVICE_ATTRIBUTE_HOST_REGISTER_SUPPORTED
	DeviceAttributeReadOnlyHostRegisterSupported     DeviceAttribute = 113 // CU_DEVICE_ATTRIBUTE_READ_ONLY_HOST_REGISTER_SUPPORTED
	DeviceAttributeGPUDirectRDMASupported            DeviceAttribute = 116 // CU_DEVICE_ATTRIBUTE_GPU_DIRECT_RDMA_SUPPORTED
)

// Attribute returns the value of a device attribute
// (cuDeviceGetAttribute).
func (d Device) Attribute(a DeviceAttribute) (int, error) {
	var v int32
	if err := check(procDeviceGetAttr.Call(uintptr(unsafe.Pointer(&v)), uintptr(a), uintptr(d))); err != nil {
		return 0, err
	}
	return int(v), nil
}

// PCIBusID returns the device's PCI address in the form
// "domain:bus:device.function", for example "0000:3b:00.0"
// (cuDeviceGetPCIBusId).
func (d Device) PCIBusID() (string, error) {
	var buf [64]byte
	if err := check(procDeviceGetPCIBusID.Call(uintptr(unsafe.Pointer(&buf[0])), uintptr(len(buf)), uintptr(d))); err != nil {
		return "", err
	}
	return cString(buf[:]), nil
}

// cString returns b up to its first NUL byte.
func cString(b []byte) string {
	for i, c := range b {
		if c == 0 {
			return string(b[:i])
		}
	}
	return string(b)
}
