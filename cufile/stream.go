package cufile

import (
	"sync"
	"unsafe"

	"golang.org/x/sys/unix"

	"github.com/kvikgo/kvik/cuda"
	"github.com/kvikgo/kvik/internal/dl"
)

// StreamRegister registers a CUDA stream with cuFile
// (cuFileStreamRegister), which synchronises the stream and sets up the
// resources for the stream forms. It is optional. flags says which inputs
// are known and fixed at submission: 0, or a combination of
// StreamFixedBufOffset, StreamFixedFileOffset, StreamFixedFileSize and
// StreamPageAlignedInputs.
func StreamRegister(s cuda.Stream, flags uint32) error {
	return callStatus(fnStreamRegister, uintptr(s), uintptr(flags))
}

// StreamDeregister releases what StreamRegister set up for the stream
// (cuFileStreamDeregister), after synchronising it.
func StreamDeregister(s cuda.Stream) error {
	return callStatus(fnStreamDeregister, uintptr(s))
}

// asyncSlot holds the arguments that cuFileReadAsync and cuFileWriteAsync
// take by address and read, or write, when the stream runs the operation.
// Slots live in anonymous mmap memory, outside the Go heap.
type asyncSlot struct {
	size       uint64 // size_t *size_p
	fileOffset int64  // off_t *file_offset_p
	bufOffset  int64  // off_t *bufPtr_offset_p
	bytesDone  int64  // ssize_t *bytes_read_p / bytes_written_p
}

// slotPool hands out asyncSlots carved from mmap'd pages. Pages are never
// unmapped: the pool holds as many slots as were ever in use at once.
var slotPool struct {
	mu   sync.Mutex
	free []*asyncSlot
}

func getSlot() (*asyncSlot, error) {
	slotPool.mu.Lock()
	defer slotPool.mu.Unlock()
	if len(slotPool.free) == 0 {
		page := unix.Getpagesize()
		mem, err := unix.Mmap(-1, 0, page, unix.PROT_READ|unix.PROT_WRITE, unix.MAP_ANON|unix.MAP_PRIVATE)
		if err != nil {
			return nil, err
		}
		n := page / int(unsafe.Sizeof(asyncSlot{}))
		base := unsafe.Pointer(unsafe.SliceData(mem))
		for i := n - 1; i >= 0; i-- {
			slotPool.free = append(slotPool.free, (*asyncSlot)(unsafe.Add(base, uintptr(i)*unsafe.Sizeof(asyncSlot{}))))
		}
	}
	s := slotPool.free[len(slotPool.free)-1]
	slotPool.free = slotPool.free[:len(slotPool.free)-1]
	return s, nil
}

func putSlot(s *asyncSlot) {
	*s = asyncSlot{}
	slotPool.mu.Lock()
	slotPool.free = append(slotPool.free, s)
	slotPool.mu.Unlock()
}

// AsyncIO is a read or write enqueued on a CUDA stream by ReadAsync or
// WriteAsync. It owns the memory, outside the Go heap, that holds the
// operation's size, offsets and result until the stream has run it.
type AsyncIO struct {
	slot *asyncSlot
}

// BytesDone returns the operation's result: the number of bytes
// transferred, or its failure as an *Error (decoded like Read's result;
// the errno of a -1 result is not available, the operation having run on
// a thread of the CUDA driver). It is meaningful only after the stream has
// been synchronised past the operation; before that it reports 0.
func (a *AsyncIO) BytesDone() (int, error) {
	if a == nil || a.slot == nil {
		return 0, invalid("AsyncIO.BytesDone", "closed")
	}
	return decodeSSize(a.slot.bytesDone, 0)
}

// Close releases the memory holding the operation's arguments and result
// for reuse. Call it only once the stream has been synchronised past the
// operation (or the stream destroyed after it ran): until then the stream
// may still read and write that memory. An AsyncIO that is never closed
// keeps its few bytes for good. Close is idempotent.
func (a *AsyncIO) Close() {
	if a == nil || a.slot == nil {
		return
	}
	putSlot(a.slot)
	a.slot = nil
}

func submitAsync(name string, f *dl.Func, h Handle, buf cuda.DevicePtr, size int, fileOffset, bufOffset int64, s cuda.Stream) (*AsyncIO, error) {
	if err := checkIO(name, h, buf, size, fileOffset, bufOffset); err != nil {
		return nil, err
	}
	slot, err := getSlot()
	if err != nil {
		return nil, err
	}
	*slot = asyncSlot{size: uint64(size), fileOffset: fileOffset, bufOffset: bufOffset}
	// The slot is outside the Go heap, so its address may travel as a
	// plain uintptr and stay valid after this call returns.
	p := uintptr(unsafe.Pointer(slot))
	if err := callStatus(f,
		uintptr(h), uintptr(buf),
		p+unsafe.Offsetof(slot.size),
		p+unsafe.Offsetof(slot.fileOffset),
		p+unsafe.Offsetof(slot.bufOffset),
		p+unsafe.Offsetof(slot.bytesDone),
		uintptr(s)); err != nil {
		putSlot(slot)
		return nil, err
	}
	return &AsyncIO{slot: slot}, nil
}

// ReadAsync enqueues on stream s a read of size bytes at fileOffset of the
// file into the memory at buf+bufOffset (cuFileReadAsync). It returns once
// the read is enqueued; the stream runs it in order with its other work.
// Synchronise the stream, then take the result from BytesDone and Close
// the AsyncIO. s == 0 is the default stream.
//
// cuFile 1.15 (seen in compatibility mode) checks bufOffset+size against
// the buffer's registration, and a buffer not registered with BufRegister
// counts as registered from buf for size bytes: with such a buffer, pass
// the address itself in buf and 0 in bufOffset, or the operation fails
// with a negative errno in BytesDone (-EIO).
func ReadAsync(h Handle, buf cuda.DevicePtr, size int, fileOffset, bufOffset int64, s cuda.Stream) (*AsyncIO, error) {
	return submitAsync("ReadAsync", fnReadAsync, h, buf, size, fileOffset, bufOffset, s)
}

// WriteAsync enqueues on stream s a write of size bytes from the memory at
// buf+bufOffset to fileOffset of the file (cuFileWriteAsync). It behaves
// like ReadAsync otherwise.
func WriteAsync(h Handle, buf cuda.DevicePtr, size int, fileOffset, bufOffset int64, s cuda.Stream) (*AsyncIO, error) {
	return submitAsync("WriteAsync", fnWriteAsync, h, buf, size, fileOffset, bufOffset, s)
}
