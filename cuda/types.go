package cuda

// Device is a CUDA device ordinal handle (CUdevice).
type Device int32

// DevicePtr is a device memory address (CUdeviceptr). It carries no
// ownership: use it for memory allocated by other libraries. Memory this
// package allocates is a *DeviceBuffer.
type DevicePtr uint64

// Context is a CUDA context handle (CUcontext).
type Context uintptr

// Stream is a CUDA stream handle (CUstream). The zero value is the legacy
// default stream.
type Stream uintptr
