package cuda

import (
	"fmt"
	"strconv"
	"sync/atomic"
	"unsafe"

	"github.com/kvikgo/kvik/internal/dl"
)

// ErrLibraryNotFound is matched (errors.Is) by the error every function
// returns when the CUDA driver library, or one of its symbols, cannot be
// found.
var ErrLibraryNotFound = dl.ErrNotFound

// LoadError is the error (errors.As) that reports a library that could not
// be opened, such as libcuda.so.1 on a machine without an NVIDIA driver.
// Its Error is one short line, "kvik: no CUDA driver (libcuda.so.1 not
// found)"; Tried holds every path tried and why it failed, which the %+v
// verb prints too. It matches ErrLibraryNotFound.
type LoadError = dl.LoadError

// Result is a CUDA driver status code (CUresult). Functions in this package
// return failures as Result values; Success is never returned as an error.
type Result int32

// Result codes, with the values of cuda.h.
const (
	Success                          Result = 0   // CUDA_SUCCESS
	ErrorInvalidValue                Result = 1   // CUDA_ERROR_INVALID_VALUE
	ErrorOutOfMemory                 Result = 2   // CUDA_ERROR_OUT_OF_MEMORY
	ErrorNotInitialized              Result = 3   // CUDA_ERROR_NOT_INITIALIZED
	ErrorDeinitialized               Result = 4   // CUDA_ERROR_DEINITIALIZED
	ErrorStubLibrary                 Result = 34  // CUDA_ERROR_STUB_LIBRARY
	ErrorDeviceUnavailable           Result = 46  // CUDA_ERROR_DEVICE_UNAVAILABLE
	ErrorNoDevice                    Result = 100 // CUDA_ERROR_NO_DEVICE
	ErrorInvalidDevice               Result = 101 // CUDA_ERROR_INVALID_DEVICE
	ErrorInvalidImage                Result = 200 // CUDA_ERROR_INVALID_IMAGE
	ErrorInvalidContext              Result = 201 // CUDA_ERROR_INVALID_CONTEXT
	ErrorContextAlreadyCurrent       Result = 202 // CUDA_ERROR_CONTEXT_ALREADY_CURRENT (deprecated)
	ErrorContextAlreadyInUse         Result = 216 // CUDA_ERROR_CONTEXT_ALREADY_IN_USE
	ErrorPeerAccessUnsupported       Result = 217 // CUDA_ERROR_PEER_ACCESS_UNSUPPORTED
	ErrorInvalidPTX                  Result = 218 // CUDA_ERROR_INVALID_PTX
	ErrorJITCompilerNotFound         Result = 221 // CUDA_ERROR_JIT_COMPILER_NOT_FOUND
	ErrorUnsupportedPTXVersion       Result = 222 // CUDA_ERROR_UNSUPPORTED_PTX_VERSION
	ErrorOperatingSystem             Result = 304 // CUDA_ERROR_OPERATING_SYSTEM
	ErrorInvalidHandle               Result = 400 // CUDA_ERROR_INVALID_HANDLE
	ErrorIllegalState                Result = 401 // CUDA_ERROR_ILLEGAL_STATE
	ErrorNotFound                    Result = 500 // CUDA_ERROR_NOT_FOUND
	ErrorNotReady                    Result = 600 // CUDA_ERROR_NOT_READY
	ErrorIllegalAddress              Result = 700 // CUDA_ERROR_ILLEGAL_ADDRESS
	ErrorLaunchOutOfResources        Result = 701 // CUDA_ERROR_LAUNCH_OUT_OF_RESOURCES
	ErrorPeerAccessAlreadyEnabled    Result = 704 // CUDA_ERROR_PEER_ACCESS_ALREADY_ENABLED
	ErrorPrimaryContextActive        Result = 708 // CUDA_ERROR_PRIMARY_CONTEXT_ACTIVE
	ErrorContextIsDestroyed          Result = 709 // CUDA_ERROR_CONTEXT_IS_DESTROYED
	ErrorHostMemoryAlreadyRegistered Result = 712 // CUDA_ERROR_HOST_MEMORY_ALREADY_REGISTERED
	ErrorHostMemoryNotRegistered     Result = 713 // CUDA_ERROR_HOST_MEMORY_NOT_REGISTERED
	ErrorLaunchFailed                Result = 719 // CUDA_ERROR_LAUNCH_FAILED
	ErrorNotPermitted                Result = 800 // CUDA_ERROR_NOT_PERMITTED
	ErrorNotSupported                Result = 801 // CUDA_ERROR_NOT_SUPPORTED
	ErrorSystemNotReady              Result = 802 // CUDA_ERROR_SYSTEM_NOT_READY
	ErrorSystemDriverMismatch        Result = 803 // CUDA_ERROR_SYSTEM_DRIVER_MISMATCH
	ErrorTimeout                     Result = 909 // CUDA_ERROR_TIMEOUT
	ErrorUnknown                     Result = 999 // CUDA_ERROR_UNKNOWN
)

// resultText is used when the driver cannot describe a code itself.
var resultText = map[Result][2]string{
	Success:                          {"CUDA_SUCCESS", "no error"},
	ErrorInvalidValue:                {"CUDA_ERROR_INVALID_VALUE", "invalid argument"},
	ErrorOutOfMemory:                 {"CUDA_ERROR_OUT_OF_MEMORY", "out of memory"},
	ErrorNotInitialized:              {"CUDA_ERROR_NOT_INITIALIZED", "initialization error"},
	ErrorDeinitialized:               {"CUDA_ERROR_DEINITIALIZED", "driver shutting down"},
	ErrorStubLibrary:                 {"CUDA_ERROR_STUB_LIBRARY", "CUDA driver is a stub library"},
	ErrorDeviceUnavailable:           {"CUDA_ERROR_DEVICE_UNAVAILABLE", "CUDA-capable device(s) is/are busy or unavailable"},
	ErrorNoDevice:                    {"CUDA_ERROR_NO_DEVICE", "no CUDA-capable device is detected"},
	ErrorInvalidDevice:               {"CUDA_ERROR_INVALID_DEVICE", "invalid device ordinal"},
	ErrorInvalidImage:                {"CUDA_ERROR_INVALID_IMAGE", "device kernel image is invalid"},
	ErrorInvalidContext:              {"CUDA_ERROR_INVALID_CONTEXT", "invalid device context"},
	ErrorContextAlreadyCurrent:       {"CUDA_ERROR_CONTEXT_ALREADY_CURRENT", "context already current"},
	ErrorContextAlreadyInUse:         {"CUDA_ERROR_CONTEXT_ALREADY_IN_USE", "context already in use"},
	ErrorOperatingSystem:             {"CUDA_ERROR_OPERATING_SYSTEM", "OS call failed or operation not supported on this OS"},
	ErrorInvalidHandle:               {"CUDA_ERROR_INVALID_HANDLE", "invalid resource handle"},
	ErrorIllegalState:                {"CUDA_ERROR_ILLEGAL_STATE", "the operation cannot be performed in the present state"},
	ErrorNotFound:                    {"CUDA_ERROR_NOT_FOUND", "named symbol not found"},
	ErrorNotReady:                    {"CUDA_ERROR_NOT_READY", "device not ready"},
	ErrorIllegalAddress:              {"CUDA_ERROR_ILLEGAL_ADDRESS", "an illegal memory access was encountered"},
	ErrorLaunchOutOfResources:        {"CUDA_ERROR_LAUNCH_OUT_OF_RESOURCES", "too many resources requested for launch"},
	ErrorPrimaryContextActive:        {"CUDA_ERROR_PRIMARY_CONTEXT_ACTIVE", "primary context active"},
	ErrorContextIsDestroyed:          {"CUDA_ERROR_CONTEXT_IS_DESTROYED", "context is destroyed"},
	ErrorHostMemoryAlreadyRegistered: {"CUDA_ERROR_HOST_MEMORY_ALREADY_REGISTERED", "part or all of the requested memory range is already mapped"},
	ErrorHostMemoryNotRegistered:     {"CUDA_ERROR_HOST_MEMORY_NOT_REGISTERED", "pointer does not correspond to a registered memory region"},
	ErrorPeerAccessUnsupported:       {"CUDA_ERROR_PEER_ACCESS_UNSUPPORTED", "peer access is not supported across the given devices"},
	ErrorInvalidPTX:                  {"CUDA_ERROR_INVALID_PTX", "a PTX JIT compilation failed"},
	ErrorJITCompilerNotFound:         {"CUDA_ERROR_JIT_COMPILER_NOT_FOUND", "PTX JIT compiler library not found"},
	ErrorUnsupportedPTXVersion:       {"CUDA_ERROR_UNSUPPORTED_PTX_VERSION", "the provided PTX was compiled with an unsupported toolchain"},
	ErrorPeerAccessAlreadyEnabled:    {"CUDA_ERROR_PEER_ACCESS_ALREADY_ENABLED", "peer access is already enabled"},
	ErrorLaunchFailed:                {"CUDA_ERROR_LAUNCH_FAILED", "unspecified launch failure"},
	ErrorNotPermitted:                {"CUDA_ERROR_NOT_PERMITTED", "operation not permitted"},
	ErrorNotSupported:                {"CUDA_ERROR_NOT_SUPPORTED", "operation not supported"},
	ErrorSystemNotReady:              {"CUDA_ERROR_SYSTEM_NOT_READY", "system not yet initialized"},
	ErrorSystemDriverMismatch:        {"CUDA_ERROR_SYSTEM_DRIVER_MISMATCH", "system has unsupported display driver / cuda driver combination"},
	ErrorTimeout:                     {"CUDA_ERROR_TIMEOUT", "timeout"},
	ErrorUnknown:                     {"CUDA_ERROR_UNKNOWN", "unknown error"},
}

var (
	procGetErrorName   = fn("cuGetErrorName")
	procGetErrorString = fn("cuGetErrorString")
)

// driverUsed is set once a driver function has been called successfully,
// that is once the library is known to be loaded. Result.Error asks the
// driver for its text only then, so that formatting an error never loads
// the library.
var driverUsed atomic.Bool

// Error returns the code's name, value and description, for example
// "CUDA_ERROR_INVALID_VALUE (1): invalid argument". The text comes from
// cuGetErrorName and cuGetErrorString when the driver is loaded and from a
// built-in table of common codes otherwise; a code neither knows reads
// "CUresult (N): unrecognized error code".
func (r Result) Error() string {
	name, desc := r.text()
	return name + " (" + strconv.Itoa(int(r)) + "): " + desc
}

func (r Result) text() (name, desc string) {
	if driverUsed.Load() {
		name = driverString(procGetErrorName, r)
		desc = driverString(procGetErrorString, r)
	}
	if t, ok := resultText[r]; ok {
		if name == "" {
			name = t[0]
		}
		if desc == "" {
			desc = t[1]
		}
	}
	if name == "" {
		name = "CUresult"
	}
	if desc == "" {
		desc = "unrecognized error code"
	}
	return name, desc
}

// driverString calls cuGetErrorName or cuGetErrorString, which store a
// pointer to a static C string, and copies that string.
func driverString(f *dl.Func, r Result) string {
	var p *byte
	if ret, err := f.Call(uintptr(r), uintptr(unsafe.Pointer(&p))); err != nil || int32(uint32(ret)) != 0 || p == nil {
		return ""
	}
	return dl.GoString(p)
}

// check turns the return of a driver call into an error: a call error (the
// library or symbol is missing) as is, a CUresult other than CUDA_SUCCESS
// as a Result, and nil otherwise. A CUresult is 32 bits wide; the upper
// half of the returned register is not defined and is dropped.
func check(r uintptr, err error) error {
	if err != nil {
		return err
	}
	if !driverUsed.Load() {
		driverUsed.Store(true)
	}
	if c := Result(int32(uint32(r))); c != Success {
		return c
	}
	return nil
}

// invalid reports an argument rejected before reaching the driver; the
// error matches ErrorInvalidValue.
func invalid(op, format string, args ...any) error {
	return fmt.Errorf("cuda: %s: %s: %w", op, fmt.Sprintf(format, args...), ErrorInvalidValue)
}
