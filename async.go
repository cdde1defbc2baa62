package kvik

import (
	"io"
	"os"

	"github.com/kvikgo/kvik/cuda"
	"github.com/kvikgo/kvik/cufile"
	"github.com/kvikgo/kvik/internal/devmem"
)

// StreamFuture is the result of ReadAsync or WriteAsync: the transfer is
// ordered on a CUDA stream, and its byte count is known once the stream
// has reached it. Call Get (or synchronise the stream and call Get) before
// touching the memory, then Close. A StreamFuture is not safe for
// concurrent use.
type StreamFuture struct {
	file   *FileHandle // held busy until the result is collected
	stream cuda.Stream
	ctx    cuda.Context
	aio    *cufile.AsyncIO // nil when the transfer already ran (fallback)
	n      int
	err    error
	done   bool
}

// cuFileConfigPath is where cuFile reads its configuration, as KvikIO
// checks it: $CUFILE_ENV_PATH_JSON if that file exists, else
// /etc/cufile.json.
func cuFileConfigPath() string {
	if p := os.Getenv("CUFILE_ENV_PATH_JSON"); p != "" {
		if _, err := os.Stat(p); err == nil {
			return p
		}
	}
	return "/etc/cufile.json"
}

func hasCuFileConfig() bool {
	_, err := os.Stat(cuFileConfigPath())
	return err == nil
}

// ReadAsync queues a read of size bytes at fileOffset into device memory at
// buf+devOffset on stream (cuFileReadAsync). When the handle uses POSIX
// I/O, or cuFile has no configuration file, it synchronises the stream and
// reads before returning, as KvikIO does; the StreamFuture then holds the
// result.
//
// A queued transfer keeps the FileHandle busy until Get or Close of the
// StreamFuture: Close of the FileHandle waits for that.
func (f *FileHandle) ReadAsync(buf cuda.DevicePtr, size int, fileOffset, devOffset int64, stream cuda.Stream) (*StreamFuture, error) {
	return f.async(opRead, buf, size, fileOffset, devOffset, stream)
}

// WriteAsync queues a write of size bytes from device memory at
// buf+devOffset to the file at fileOffset on stream; see ReadAsync.
func (f *FileHandle) WriteAsync(buf cuda.DevicePtr, size int, fileOffset, devOffset int64, stream cuda.Stream) (*StreamFuture, error) {
	return f.async(opWrite, buf, size, fileOffset, devOffset, stream)
}

func (f *FileHandle) async(kind opKind, buf cuda.DevicePtr, size int, fileOffset, devOffset int64, stream cuda.Stream) (*StreamFuture, error) {
	if f.compat != CompatOff || !hasCuFileConfig() {
		return f.asyncFallback(kind, buf, size, fileOffset, devOffset, stream)
	}
	_, r, err := f.beginDevice(kind, buf, size, fileOffset, devOffset)
	if err != nil {
		return nil, f.pathErr(kind, err)
	}
	sf := &StreamFuture{file: f, stream: stream, ctx: r.Ctx}
	// cuFile's async calls reject a non-zero buffer offset into memory that
	// is not registered, so pass the operation's own address.
	err = cuda.WithContext(r.Ctx, func() (err error) {
		if kind == opRead {
			sf.aio, err = cufile.ReadAsync(f.cuHandle, r.Ptr, size, fileOffset, 0, stream)
		} else {
			sf.aio, err = cufile.WriteAsync(f.cuHandle, r.Ptr, size, fileOffset, 0, stream)
		}
		return err
	})
	if err != nil {
		f.release()
		return nil, f.pathErr(kind, err)
	}
	return sf, nil
}

// asyncFallback waits for the stream, then transfers synchronously.
func (f *FileHandle) asyncFallback(kind opKind, buf cuda.DevicePtr, size int, fileOffset, devOffset int64, stream cuda.Stream) (*StreamFuture, error) {
	r, err := devmem.Resolve(buf, size, devOffset)
	if err != nil {
		return nil, f.pathErr(kind, err)
	}
	if err := cuda.WithContext(r.Ctx, func() error { return cuda.StreamSynchronize(stream) }); err != nil {
		return nil, f.pathErr(kind, err)
	}
	sf := &StreamFuture{stream: stream, ctx: r.Ctx, done: true}
	if kind == opRead {
		sf.n, sf.err = f.ReadDevice(buf, size, fileOffset, devOffset)
	} else {
		sf.n, sf.err = f.WriteDevice(buf, size, fileOffset, devOffset)
	}
	if sf.err == io.EOF {
		sf.err = nil // a short count, as cuFileReadAsync reports end of file
	}
	return sf, nil
}

// Get synchronises the stream and returns the bytes transferred. A read
// that reached end of file returns fewer bytes than asked with a nil
// error, as cuFileReadAsync reports it.
func (s *StreamFuture) Get() (int, error) {
	if s.done {
		return s.n, s.err
	}
	s.done = true
	defer s.file.release()
	if s.err = cuda.WithContext(s.ctx, func() error { return cuda.StreamSynchronize(s.stream) }); s.err != nil {
		return 0, s.err
	}
	s.n, s.err = s.aio.BytesDone()
	return s.n, s.err
}

// Close releases the memory cuFile writes the result to. It synchronises
// the stream first if Get was not called.
func (s *StreamFuture) Close() error {
	if s.aio == nil {
		return nil
	}
	var err error
	if !s.done {
		_, err = s.Get()
	}
	s.aio.Close()
	s.aio = nil
	return err
}
