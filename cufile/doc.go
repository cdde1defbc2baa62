// Package cufile is a thin binding of NVIDIA's cuFile API (cufile.h,
// GPUDirect Storage): reads and writes between files and GPU memory that
// bypass host bounce buffers where the platform allows, and fall back to
// cuFile's own POSIX "compatibility mode" where it does not.
//
// The library, libcufile.so.0 (or libcufile.so), is opened at run time on
// first use, with no cgo and no headers; KVIK_LIBCUFILE_PATH names an exact
// path instead. Each Go function wraps one C function and is named after it
// without the cuFile prefix: HandleRegister is cuFileHandleRegister.
// Failures reported through CUfileError_t, or a negative ssize_t, come back
// as *Error values that match the OpError sentinels with errors.Is; a
// missing library or symbol matches ErrLibraryNotFound. Arguments that C
// would reject (a negative size, a nil handle) are caught first and match
// ErrInvalidValue.
//
// Device pointers must belong to the CUDA context current on the calling
// OS thread; lock the goroutine to its thread (runtime.LockOSThread) while
// a context is pushed. A minimal read:
//
//	f, _ := os.Open(path)
//	h, err := cufile.HandleRegister(int(f.Fd()))
//	if errors.Is(err, cufile.ErrHandleNotRegistered) { /* fall back to POSIX */ }
//	defer cufile.HandleDeregister(h)
//	n, err := cufile.Read(h, devPtr, size, fileOffset, 0)
//
// Policy (compatibility-mode choice, task splitting, thresholds) lives in
// the packages above this one.
package cufile
