// Package kvik moves data between storage and host or NVIDIA GPU memory,
// in parallel: a Go counterpart of NVIDIA KvikIO built on the cuda and
// cufile bindings, with no cgo and no CUDA toolkit needed to build.
//
// Data comes from three kinds of handle, each with the same reads: a
// FileHandle (Open, OpenFile; KvikIO's "r", "r+", "w", "w+" flags), which
// also writes; an MmapHandle (OpenMmap), which reads a mapping of the
// file; and a RemoteHandle (OpenRemote), which reads an object over HTTP,
// S3 or WebHDFS with ranged requests. All three satisfy Reader, the one
// interface the format packages (safetensors, npy, gguf, zarr) read
// through. Host memory is read with ReadAt (io.ReaderAt semantics), Read
// and PRead, which returns a Future at once; device memory, named by a
// cuda.DevicePtr, with ReadDevice and PReadDevice. FileHandle writes with
// WriteAt, Write, PWrite, WriteDevice and PWriteDevice, orders transfers on
// a CUDA stream with ReadAsync and WriteAsync, and submits cuFile batches
// through BatchHandle. Whole files and objects are written atomically by
// SaveFile (local paths and s3:// URLs) and UploadS3; RemotePrefix reads
// and writes the keys under one S3 prefix, never outside it.
//
// Every operation is cut into tasks of at most Defaults.TaskSize bytes
// that run on a worker pool (one per GPU in flight, so several GPUs are
// fed at once); with opportunistic direct I/O a task sends its
// page-aligned middle through O_DIRECT.
//
// Device I/O takes one of two paths, chosen per file by the compat mode
// (CompatMode): cuFile (GPUDirect Storage) when the mode resolves to
// CompatOff, or POSIX reads and writes through pinned host bounce buffers
// when it resolves to CompatOn, each task reading its next chunk while the
// previous one is copied. CompatAuto, the default, picks cuFile only where
// it would give real GPUDirect Storage; FileHandle.CompatReason says what
// was decided and why.
//
// Settings (Defaults: compat mode, worker count, task size, GDS threshold,
// bounce buffer size, direct I/O switches, pools per block device, remote
// request limits) start from KVIKIO_* environment variables, as KvikIO
// reads them, and can be changed in a scope with SetDefaults or
// UpdateDefaults. The built-in worker count is one per CPU between 4 and
// 16 rather than KvikIO's 1.
//
// Errors are *fs.PathError values around sentinel errors that errors.Is
// matches (ErrInvalidArgument, ErrClosed, ErrNotDeviceMemory,
// ErrInvalidKey, ...); secrets in URLs are masked in every error and log
// record.
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
// The pages under docs/ describe the design (design.md: the layers and
// what may import what), compat modes, settings, host and device I/O,
// remote objects, the formats, security and performance in detail.
package kvik
