// Package kvik moves file data between storage and host or NVIDIA GPU
// memory, in parallel: a Go counterpart of NVIDIA KvikIO built on the
// cuda and cufile bindings, with no cgo and no CUDA toolkit needed to
// build.
//
// The central type is FileHandle, opened with Open (KvikIO's "r", "r+",
// "w", "w+" flags) or OpenFile (os.O_* flags). Host memory is read and
// written with ReadAt and WriteAt, which honour io.ReaderAt and
// io.WriterAt, with Read and Write, shaped like KvikIO's calls, and with
// PRead and PWrite, which return a Future at once. Every operation is cut
// into tasks of at most Defaults.TaskSize bytes that run on a worker
// pool; with opportunistic direct I/O a task sends its page-aligned
// middle through O_DIRECT. Device memory, named by a cuda.DevicePtr, is read and
// written with ReadDevice, WriteDevice and their P forms, with ReadAsync
// and WriteAsync ordered on a CUDA stream, and with BatchHandle.
//
// Device I/O takes one of two paths, chosen per file by the compat mode
// (CompatMode): cuFile (GPUDirect Storage) when the mode resolves to
// CompatOff, or POSIX reads and writes through pinned host bounce buffers
// when it resolves to CompatOn. CompatAuto, the default, picks cuFile only
// where it would give real GPUDirect Storage; FileHandle.CompatReason says
// what was decided and why.
//
// Settings (Defaults: compat mode, worker count, task size, GDS threshold,
// bounce buffer size, direct I/O switches, pools per block device) start
// from KVIKIO_* environment variables, as KvikIO reads them, and can be
// changed in a scope with SetDefaults or UpdateDefaults. The built-in
// worker count is one per CPU between 4 and 16 rather than KvikIO's 1.
//
// Reading a file back into host memory:
//
//	f, err := kvik.Open("data.bin", "r", 0)
//	if err != nil {
//		return err
//	}
//	defer f.Close()
//	size, err := f.Size()
//	if err != nil {
//		return err
//	}
//	buf := make([]byte, size)
//	if _, err := f.ReadAt(buf, 0); err != nil {
//		return err
//	}
//
// and into GPU memory, with the buffer in device 0's primary context:
//
//	err = cuda.WithContext(ctx, func() error {
//		dev, err := cuda.MemAlloc(int(size))
//		if err != nil {
//			return err
//		}
//		defer dev.Close()
//		_, err = f.ReadDevice(dev.Ptr(), int(size), 0, 0)
//		return err
//	})
//
// The pages under docs/ describe the design, compat modes, settings, host
// and device I/O, page cache utilities and the bindings in detail.
package kvik
