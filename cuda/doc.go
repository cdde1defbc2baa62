// Package cuda is a thin binding of the part of the CUDA driver API
// (cuda.h) that kvik needs to move data between storage and GPU memory:
// driver initialisation, devices, contexts, device and pinned host memory,
// copies, pointer attributes and streams.
//
// The driver library (libcuda.so.1) is opened at run time on first use and
// initialised (cuInit) right then, so calling Init is optional; it reports
// whether the driver is usable. Since the library is opened at run time,
// programs using this package build without cgo, headers or a CUDA toolkit
// and run on machines without a GPU; every call then returns an error that
// matches ErrLibraryNotFound (errors.Is). Set KVIK_LIBCUDA_PATH to load a
// specific library.
//
// Functions map one to one onto driver functions and are named after them
// without the "cu" prefix (MemAlloc for cuMemAlloc_v2). Driver failures are
// returned as Result values, so callers can test them with errors.Is, for
// example errors.Is(err, cuda.ErrorOutOfMemory).
//
// CUDA contexts are bound to OS threads, not goroutines. A goroutine that
// makes a context current must stay on its thread (runtime.LockOSThread)
// for as long as it relies on it; WithContext does that for the duration of
// a function:
//
//	dev, err := cuda.DeviceGet(0) // no cuda.Init needed
//	if err != nil {
//		return err
//	}
//	ctx, err := dev.PrimaryCtxRetain()
//	if err != nil {
//		return err
//	}
//	defer dev.PrimaryCtxRelease()
//	return cuda.WithContext(ctx, func() error {
//		buf, err := cuda.MemAlloc(1 << 20)
//		if err != nil {
//			return err
//		}
//		defer buf.Close()
//		return cuda.MemcpyHtoD(buf.Ptr(), data)
//	})
package cuda
