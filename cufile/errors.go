package cufile

import (
	"fmt"
	"strconv"
	"syscall"

	"github.com/kvikgo/kvik/cuda"
)

// OpError is a cuFile status code (CUfileOpError). Failures are the codes
// above 5000 (CUFILEOP_BASE_ERR); Success is 0. OpError implements error,
// so the named codes below serve as sentinels:
// errors.Is(err, cufile.ErrHandleNotRegistered) holds for any error this
// package returns with that code.
type OpError int32

// The CUfileOpError codes, as in cufile.h (cuFile 1.15 / CUDA 13). Codes
// 5021 and 5032 are unused. Older headers end the list with
// CU_FILE_IO_MAX_ERROR at 5039; later ones give 5039 to
// CU_FILE_INTERNAL_BATCH_SETUP_ERROR and move CU_FILE_IO_MAX_ERROR to 5050.
// The names here follow the later header.
const (
	Success                        OpError = 0    // CU_FILE_SUCCESS
	ErrDriverNotInitialized        OpError = 5001 // CU_FILE_DRIVER_NOT_INITIALIZED
	ErrDriverInvalidProps          OpError = 5002 // CU_FILE_DRIVER_INVALID_PROPS
	ErrDriverUnsupportedLimit      OpError = 5003 // CU_FILE_DRIVER_UNSUPPORTED_LIMIT
	ErrDriverVersionMismatch       OpError = 5004 // CU_FILE_DRIVER_VERSION_MISMATCH
	ErrDriverVersionReadError      OpError = 5005 // CU_FILE_DRIVER_VERSION_READ_ERROR
	ErrDriverClosing               OpError = 5006 // CU_FILE_DRIVER_CLOSING
	ErrPlatformNotSupported        OpError = 5007 // CU_FILE_PLATFORM_NOT_SUPPORTED
	ErrIONotSupported              OpError = 5008 // CU_FILE_IO_NOT_SUPPORTED
	ErrDeviceNotSupported          OpError = 5009 // CU_FILE_DEVICE_NOT_SUPPORTED
	ErrNVFSDriverError             OpError = 5010 // CU_FILE_NVFS_DRIVER_ERROR
	ErrCUDADriverError             OpError = 5011 // CU_FILE_CUDA_DRIVER_ERROR (Error.CUDA holds the CUresult)
	ErrCUDAPointerInvalid          OpError = 5012 // CU_FILE_CUDA_POINTER_INVALID
	ErrCUDAMemoryTypeInvalid       OpError = 5013 // CU_FILE_CUDA_MEMORY_TYPE_INVALID
	ErrCUDAPointerRangeError       OpError = 5014 // CU_FILE_CUDA_POINTER_RANGE_ERROR
	ErrCUDAContextMismatch         OpError = 5015 // CU_FILE_CUDA_CONTEXT_MISMATCH
	ErrInvalidMappingSize          OpError = 5016 // CU_FILE_INVALID_MAPPING_SIZE
	ErrInvalidMappingRange         OpError = 5017 // CU_FILE_INVALID_MAPPING_RANGE
	ErrInvalidFileType             OpError = 5018 // CU_FILE_INVALID_FILE_TYPE
	ErrInvalidFileOpenFlag         OpError = 5019 // CU_FILE_INVALID_FILE_OPEN_FLAG
	ErrDIONotSet                   OpError = 5020 // CU_FILE_DIO_NOT_SET
	ErrInvalidValue                OpError = 5022 // CU_FILE_INVALID_VALUE
	ErrMemoryAlreadyRegistered     OpError = 5023 // CU_FILE_MEMORY_ALREADY_REGISTERED
	ErrMemoryNotRegistered         OpError = 5024 // CU_FILE_MEMORY_NOT_REGISTERED
	ErrPermissionDenied            OpError = 5025 // CU_FILE_PERMISSION_DENIED
	ErrDriverAlreadyOpen           OpError = 5026 // CU_FILE_DRIVER_ALREADY_OPEN
	ErrHandleNotRegistered         OpError = 5027 // CU_FILE_HANDLE_NOT_REGISTERED
	ErrHandleAlreadyRegistered     OpError = 5028 // CU_FILE_HANDLE_ALREADY_REGISTERED
	ErrDeviceNotFound              OpError = 5029 // CU_FILE_DEVICE_NOT_FOUND
	ErrInternalError               OpError = 5030 // CU_FILE_INTERNAL_ERROR
	ErrGetNewFDFailed              OpError = 5031 // CU_FILE_GETNEWFD_FAILED
	ErrNVFSSetupError              OpError = 5033 // CU_FILE_NVFS_SETUP_ERROR
	ErrIODisabled                  OpError = 5034 // CU_FILE_IO_DISABLED
	ErrBatchSubmitFailed           OpError = 5035 // CU_FILE_BATCH_SUBMIT_FAILED
	ErrGPUMemoryPinningFailed      OpError = 5036 // CU_FILE_GPU_MEMORY_PINNING_FAILED
	ErrBatchFull                   OpError = 5037 // CU_FILE_BATCH_FULL
	ErrAsyncNotSupported           OpError = 5038 // CU_FILE_ASYNC_NOT_SUPPORTED
	ErrInternalBatchSetupError     OpError = 5039 // CU_FILE_INTERNAL_BATCH_SETUP_ERROR
	ErrInternalBatchSubmitError    OpError = 5040 // CU_FILE_INTERNAL_BATCH_SUBMIT_ERROR
	ErrInternalBatchGetStatusError OpError = 5041 // CU_FILE_INTERNAL_BATCH_GETSTATUS_ERROR
	ErrInternalBatchCancelError    OpError = 5042 // CU_FILE_INTERNAL_BATCH_CANCEL_ERROR
	ErrNoMemError                  OpError = 5043 // CU_FILE_NOMEM_ERROR
	ErrIOError                     OpError = 5044 // CU_FILE_IO_ERROR
	ErrInternalBufRegisterError    OpError = 5045 // CU_FILE_INTERNAL_BUF_REGISTER_ERROR
	ErrHashOprError                OpError = 5046 // CU_FILE_HASH_OPR_ERROR
	ErrInvalidContextError         OpError = 5047 // CU_FILE_INVALID_CONTEXT_ERROR
	ErrNVFSInternalDriverError     OpError = 5048 // CU_FILE_NVFS_INTERNAL_DRIVER_ERROR
	ErrBatchNoCompatError          OpError = 5049 // CU_FILE_BATCH_NOCOMPAT_ERROR
	ErrIOMaxError                  OpError = 5050 // CU_FILE_IO_MAX_ERROR
)

// baseErr is CUFILEOP_BASE_ERR: cuFile's own codes are above it.
const baseErr = 5000

type opInfo struct {
	name, msg string
}

// opTable holds each code's C name and the text cufile.h's
// cufileop_status_error (CUFILE_ERRSTR) gives for it.
var opTable = map[OpError]opInfo{
	Success:                        {"CU_FILE_SUCCESS", "cufile success"},
	ErrDriverNotInitialized:        {"CU_FILE_DRIVER_NOT_INITIALIZED", "nvidia-fs driver is not loaded. Set allow_compat_mode to true in cufile.json file to enable compatible mode"},
	ErrDriverInvalidProps:          {"CU_FILE_DRIVER_INVALID_PROPS", "invalid property"},
	ErrDriverUnsupportedLimit:      {"CU_FILE_DRIVER_UNSUPPORTED_LIMIT", "property range error"},
	ErrDriverVersionMismatch:       {"CU_FILE_DRIVER_VERSION_MISMATCH", "nvidia-fs driver version mismatch"},
	ErrDriverVersionReadError:      {"CU_FILE_DRIVER_VERSION_READ_ERROR", "nvidia-fs driver version read error"},
	ErrDriverClosing:               {"CU_FILE_DRIVER_CLOSING", "driver shutdown in progress"},
	ErrPlatformNotSupported:        {"CU_FILE_PLATFORM_NOT_SUPPORTED", "GPUDirect Storage not supported on current platform"},
	ErrIONotSupported:              {"CU_FILE_IO_NOT_SUPPORTED", "GPUDirect Storage not supported on current file"},
	ErrDeviceNotSupported:          {"CU_FILE_DEVICE_NOT_SUPPORTED", "GPUDirect Storage not supported on current GPU"},
	ErrNVFSDriverError:             {"CU_FILE_NVFS_DRIVER_ERROR", "nvidia-fs driver ioctl error"},
	ErrCUDADriverError:             {"CU_FILE_CUDA_DRIVER_ERROR", "CUDA Driver API error"},
	ErrCUDAPointerInvalid:          {"CU_FILE_CUDA_POINTER_INVALID", "invalid device pointer"},
	ErrCUDAMemoryTypeInvalid:       {"CU_FILE_CUDA_MEMORY_TYPE_INVALID", "invalid pointer memory type"},
	ErrCUDAPointerRangeError:       {"CU_FILE_CUDA_POINTER_RANGE_ERROR", "pointer range exceeds allocated address range"},
	ErrCUDAContextMismatch:         {"CU_FILE_CUDA_CONTEXT_MISMATCH", "cuda context mismatch"},
	ErrInvalidMappingSize:          {"CU_FILE_INVALID_MAPPING_SIZE", "access beyond maximum pinned size"},
	ErrInvalidMappingRange:         {"CU_FILE_INVALID_MAPPING_RANGE", "access beyond mapped size"},
	ErrInvalidFileType:             {"CU_FILE_INVALID_FILE_TYPE", "unsupported file type"},
	ErrInvalidFileOpenFlag:         {"CU_FILE_INVALID_FILE_OPEN_FLAG", "unsupported file open flags"},
	ErrDIONotSet:                   {"CU_FILE_DIO_NOT_SET", "fd direct IO not set"},
	ErrInvalidValue:                {"CU_FILE_INVALID_VALUE", "invalid arguments"},
	ErrMemoryAlreadyRegistered:     {"CU_FILE_MEMORY_ALREADY_REGISTERED", "device pointer already registered"},
	ErrMemoryNotRegistered:         {"CU_FILE_MEMORY_NOT_REGISTERED", "device pointer lookup failure"},
	ErrPermissionDenied:            {"CU_FILE_PERMISSION_DENIED", "driver or file access error"},
	ErrDriverAlreadyOpen:           {"CU_FILE_DRIVER_ALREADY_OPEN", "driver is already open"},
	ErrHandleNotRegistered:         {"CU_FILE_HANDLE_NOT_REGISTERED", "file descriptor is not registered"},
	ErrHandleAlreadyRegistered:     {"CU_FILE_HANDLE_ALREADY_REGISTERED", "file descriptor is already registered"},
	ErrDeviceNotFound:              {"CU_FILE_DEVICE_NOT_FOUND", "GPU device not found"},
	ErrInternalError:               {"CU_FILE_INTERNAL_ERROR", "internal error"},
	ErrGetNewFDFailed:              {"CU_FILE_GETNEWFD_FAILED", "failed to obtain new file descriptor"},
	ErrNVFSSetupError:              {"CU_FILE_NVFS_SETUP_ERROR", "NVFS driver initialization error"},
	ErrIODisabled:                  {"CU_FILE_IO_DISABLED", "GPUDirect Storage disabled by config on current file"},
	ErrBatchSubmitFailed:           {"CU_FILE_BATCH_SUBMIT_FAILED", "failed to submit batch operation"},
	ErrGPUMemoryPinningFailed:      {"CU_FILE_GPU_MEMORY_PINNING_FAILED", "failed to allocate pinned GPU Memory"},
	ErrBatchFull:                   {"CU_FILE_BATCH_FULL", "queue full for batch operation"},
	ErrAsyncNotSupported:           {"CU_FILE_ASYNC_NOT_SUPPORTED", "cuFile stream operation not supported"},
	ErrInternalBatchSetupError:     {"CU_FILE_INTERNAL_BATCH_SETUP_ERROR", "batch setup internal error - retry later"},
	ErrInternalBatchSubmitError:    {"CU_FILE_INTERNAL_BATCH_SUBMIT_ERROR", "batch submit internal error - retry later"},
	ErrInternalBatchGetStatusError: {"CU_FILE_INTERNAL_BATCH_GETSTATUS_ERROR", "batch get status internal error - retry later"},
	ErrInternalBatchCancelError:    {"CU_FILE_INTERNAL_BATCH_CANCEL_ERROR", "batch cancel internal error - retry later"},
	ErrNoMemError:                  {"CU_FILE_NOMEM_ERROR", "cufile no memory error - retry later"},
	ErrIOError:                     {"CU_FILE_IO_ERROR", "cufile io error"},
	ErrInternalBufRegisterError:    {"CU_FILE_INTERNAL_BUF_REGISTER_ERROR", "cufile buf registration error"},
	ErrHashOprError:                {"CU_FILE_HASH_OPR_ERROR", "cufile hash operation error"},
	ErrInvalidContextError:         {"CU_FILE_INVALID_CONTEXT_ERROR", "cufile invalid context error"},
	ErrNVFSInternalDriverError:     {"CU_FILE_NVFS_INTERNAL_DRIVER_ERROR", "nvfs internal driver error"},
	ErrBatchNoCompatError:          {"CU_FILE_BATCH_NOCOMPAT_ERROR", "compat mode off error"},
	ErrIOMaxError:                  {"CU_FILE_IO_MAX_ERROR", "GPUDirect Storage Max Error"},
}

// Name returns the code's C enumerator name, such as
// "CU_FILE_HANDLE_NOT_REGISTERED", or "" for a code cufile.h does not name.
func (e OpError) Name() string { return opTable[e].name }

// Message returns the text cuFile's CUFILE_ERRSTR gives for the code, or
// "unknown cufile error" for a code cufile.h does not name.
func (e OpError) Message() string {
	if i, ok := opTable[e]; ok {
		return i.msg
	}
	return "unknown cufile error"
}

// Error returns "cuFile: <message> (<code> <name>)", for example
// "cuFile: file descriptor is not registered (5027 CU_FILE_HANDLE_NOT_REGISTERED)".
func (e OpError) Error() string {
	code := strconv.Itoa(int(e))
	if n := e.Name(); n != "" {
		code += " " + n
	}
	return "cuFile: " + e.Message() + " (" + code + ")"
}

// Error is a failure reported by libcufile: the decoded CUfileError_t of a
// function that returns one, or the negative result of cuFileRead,
// cuFileWrite and their stream forms. errors.Is(err, target) holds when
// target is the OpError in Op, the cuda.Result in CUDA, or (through
// Unwrap) the syscall.Errno in Errno.
type Error struct {
	// Op is the CUfileOpError (CUfileError_t.err). It is Success (0) for an
	// I/O call that returned -1, where Errno says why.
	Op OpError
	// CUDA is the CUresult (CUfileError_t.cu_err) behind
	// ErrCUDADriverError, cuda.Success (0) if none.
	CUDA cuda.Result
	// Errno is the errno of an I/O call that returned -1, or the negated
	// result of one that returned a small negative number (cuFile returns
	// -EIO, for example). It is 0 for every other failure, and where the
	// errno could not be read (the stream forms, which run on a thread of
	// the CUDA driver). An errno above 5000 that cuFile set is reported as
	// an Op instead.
	Errno syscall.Errno
}

// Error describes the failure, in OpError's form when Op is set, with the
// CUDA result appended when there is one.
func (e *Error) Error() string {
	if e.Op == Success {
		if e.Errno != 0 {
			return "cuFile: I/O failed: " + e.Errno.Error()
		}
		return "cuFile: I/O failed (errno not available)"
	}
	s := e.Op.Error()
	if e.CUDA != 0 {
		s += ": " + e.CUDA.Error()
	}
	return s
}

// Is reports whether target is the OpError in e.Op, or the cuda.Result in
// e.CUDA; Success and cuda.Success match no *Error.
func (e *Error) Is(target error) bool {
	switch t := target.(type) {
	case OpError:
		return t == e.Op && t != Success
	case cuda.Result:
		return e.CUDA != cuda.Success && t == e.CUDA
	}
	return false
}

// Unwrap returns e.Errno when it is set, so that errors.Is(err,
// syscall.ENOSPC) and errors.Is(err, fs.ErrPermission) work, or nil.
func (e *Error) Unwrap() error {
	if e.Errno != 0 {
		return e.Errno
	}
	return nil
}

// decodeStatus turns a CUfileError_t returned in RAX (err in the low 32
// bits, cu_err in the high 32) into nil or an *Error.
func decodeStatus(r uintptr) error {
	op := OpError(int32(uint32(r)))
	if op == Success {
		return nil
	}
	return &Error{Op: op, CUDA: cuda.Result(int32(uint32(uint64(r) >> 32)))}
}

// decodeSSize interprets the ssize_t result of cuFileRead/cuFileWrite (and
// the bytes-done value of their stream forms): a count when >= 0; -1 for a
// failure described by errno (passed in, 0 if unknown), where cuFile 1.15
// also stores a CUfileOpError (5019 for a read from a write-only file, for
// example); below -1 the negated CUfileOpError when its magnitude is above
// CUFILEOP_BASE_ERR (the header's IS_CUFILE_ERR test), else a negated
// errno.
func decodeSSize(ret int64, errno syscall.Errno) (int, error) {
	switch {
	case ret >= 0:
		return int(ret), nil
	case ret == -1 && errno > baseErr && errno <= 1<<31-1:
		return 0, &Error{Op: OpError(errno)}
	case ret == -1:
		return 0, &Error{Errno: errno}
	case -ret > baseErr && -ret <= 1<<31-1:
		return 0, &Error{Op: OpError(-ret)}
	case -ret < baseErr:
		return 0, &Error{Errno: syscall.Errno(-ret)}
	default:
		return 0, &Error{Op: OpError(baseErr)}
	}
}

// invalid returns an error for a bad argument caught before calling C; it
// matches ErrInvalidValue.
func invalid(fn, format string, args ...any) error {
	return fmt.Errorf("cufile.%s: %s: %w", fn, fmt.Sprintf(format, args...), ErrInvalidValue)
}
