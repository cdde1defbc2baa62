// Package staging moves data between a file and device memory through
// host bounce buffers, overlapping the storage transfer of one chunk with
// the device copy of the previous one. KvikIO runs these one after the
// other (its issue #520); here a task with two buffers keeps both the
// storage and the PCIe link busy.
package staging

import "fmt"

// Mover is what a pipeline drives: synchronous storage transfers and
// asynchronous, in-order device copies on one stream.
type Mover interface {
	// ReadFile fills p from the file at off; a short count comes with an
	// error (io.EOF at end of file).
	ReadFile(p []byte, off int64) (int, error)
	// WriteFile writes all of p to the file at off.
	WriteFile(p []byte, off int64) (int, error)
	// ToDevice queues a copy of p to device offset devOff.
	ToDevice(p []byte, devOff int64) error
	// FromDevice queues a copy from device offset devOff into p.
	FromDevice(p []byte, devOff int64) error
	// Sync waits for every queued copy.
	Sync() error
	// Mark marks the copies queued so far as point i (0 <= i < the
	// number of bounce buffers); WaitMark waits until the copies before
	// point i are done, those queued after it left running. A point not
	// marked yet is done.
	Mark(i int) error
	WaitMark(i int) error
}

// Tuning is how a pipeline cuts a task into chunks. Builtin is the
// measured choice; other values are for benchmarks that compare.
type Tuning struct {
	// MinChunk is the smallest chunk ChunkSize picks: smaller device
	// copies waste the link on per-copy overhead.
	MinChunk int
	// PipelineParts is how many chunks PipelineChunk aims at. Two measured
	// faster than four at 4 to 16 workers on an H100 (up to 1.1x; the same
	// at 32): a device copy and a stream wait per chunk cost more than the
	// deeper overlap saves.
	PipelineParts int
	// Ramp, when positive and smaller than a pipelined read's chunk, is
	// the size of its first chunk: the device copies start after a short
	// read instead of a whole chunk (a multiple of the page size). Off
	// (0): with polling waits it measured level on an H200 at 16 MiB, and
	// 0.85-0.91x where tasks are one chunk.
	Ramp int
	// Wait is how a task waits for its device copies (WaitPoll, the
	// zero value, is the measured choice).
	Wait WaitKind
}

// Builtin returns the measured tuning: 512 KiB smallest chunks, two
// chunks per pipelined task, no ramp.
func Builtin() Tuning { return Tuning{MinChunk: 512 << 10, PipelineParts: 2} }

// SoloWorkers is the worker count from which a task is moved as one chunk:
// other workers' tasks then keep storage and the link busy, and one large
// copy per task beats several small ones (measured on an H200: 4 MiB tasks
// at 16 workers reach 43.7 GB/s as one chunk, 37.9 GB/s in 512 KiB chunks).
const SoloWorkers = 8

// ChunkSize picks the pipeline's chunk for a task of n bytes with bounce
// buffers of bufSize bytes, when workers tasks run at once. With few
// workers a task overlaps its own reads and copies in chunks of about
// 1/PipelineParts of the task, at least MinChunk; with SoloWorkers or
// more it is one chunk. The chunk never exceeds bufSize. align is the page size.
func (t Tuning) ChunkSize(n, bufSize, align, workers int) int {
	if workers < SoloWorkers {
		return t.PipelineChunk(n, bufSize, align)
	}
	return max(min((n+align-1)/align*align, bufSize), 1)
}

// PipelineChunk is the chunk for a task that overlaps its own reads and
// copies: about 1/PipelineParts of the task, at least MinChunk, a multiple of
// align, at most bufSize. Callers use it where no other task will keep
// the link busy meanwhile: with few workers, or for an operation that
// gives each worker at most one task.
func (t Tuning) PipelineChunk(n, bufSize, align int) int {
	parts := max(t.PipelineParts, 1)
	c := max((n+parts-1)/parts, t.MinChunk)
	c = (c + align - 1) / align * align
	return max(min(c, bufSize), 1)
}

// Read moves size bytes from the file at off to the device at devOff,
// chunk by chunk through bufs (at least one; two or more to overlap). It
// returns the bytes that reached the device. With align > 1 the first
// chunk is cut short so that the later ones start at multiples of align
// in the file (chunk is then a multiple of align): each storage read then
// has whole pages, and O_DIRECT no partial page at each chunk's edges.
//
// Each chunk's copy is queued as soon as its read is in, behind the
// copies still running, and a buffer waits only for its own last copy
// before it is filled again, so the stream never drains between chunks.
// (Against waiting for the previous copy before queueing the next it
// measured level on 2x H200, where the copies outlast the reads;
// bench/results/gpus-h200x2-2026-11-26-batch.)
func (t Tuning) Read(m Mover, bufs [][]byte, chunk, align int, off, devOff int64, size int) (int, error) {
	if err := check(bufs, chunk); err != nil {
		return 0, err
	}
	first := chunk
	if t.Ramp > 0 && t.Ramp < chunk && size > chunk && len(bufs) > 1 {
		first = t.Ramp
	}
	if r := int(off % int64(max(align, 1))); r != 0 && chunk > align && first > r {
		first -= r
	}
	ends := make([]int, len(bufs)) // bytes queued up to each buffer's last copy
	done := 0                      // bytes whose copy to the device has completed
	queued := 0
	for i := 0; queued < size; i++ {
		k := i % len(bufs)
		if i >= len(bufs) {
			if err := m.WaitMark(k); err != nil {
				return done, err
			}
			done = ends[k] // copies complete in order
		}
		want := chunk
		if i == 0 {
			want = first
		}
		b := bufs[k][:min(want, size-queued)]
		n, rerr := m.ReadFile(b, off+int64(queued))
		if n > 0 {
			if err := m.ToDevice(b[:n], devOff+int64(queued)); err != nil {
				return done, err
			}
			queued += n
			if err := m.Mark(k); err != nil {
				return done, err
			}
			ends[k] = queued
		}
		if rerr != nil {
			if err := m.Sync(); err != nil {
				return done, err
			}
			return queued, rerr
		}
	}
	if err := m.Sync(); err != nil {
		return done, err
	}
	return queued, nil
}

// Write moves size bytes from the device at devOff to the file at off,
// copying chunk k+1 from the device while chunk k is written. It returns
// the bytes written to the file.
func Write(m Mover, bufs [][]byte, chunk int, off, devOff int64, size int) (int, error) {
	if err := check(bufs, chunk); err != nil {
		return 0, err
	}
	written := 0
	var pending []byte // copied from the device, not yet written
	for i, pos := 0, 0; pos < size || pending != nil; i++ {
		var next []byte
		if pos < size {
			next = bufs[i%len(bufs)][:min(chunk, size-pos)]
			if len(bufs) == 1 && pending != nil {
				next = nil // the only buffer is still being written
			} else if err := m.FromDevice(next, devOff+int64(pos)); err != nil {
				return written, err
			}
		}
		if pending != nil {
			n, err := m.WriteFile(pending, off+int64(written))
			written += n
			if err != nil {
				m.Sync() // let the queued copy finish before its buffer is reused
				return written, err
			}
		}
		if err := m.Sync(); err != nil {
			return written, err
		}
		pending = next
		if next != nil {
			pos += len(next)
		}
	}
	return written, nil
}

func check(bufs [][]byte, chunk int) error {
	if len(bufs) == 0 || chunk <= 0 {
		return fmt.Errorf("staging: need bounce buffers and a positive chunk (got %d buffers, chunk %d)", len(bufs), chunk)
	}
	for _, b := range bufs {
		if len(b) < chunk {
			return fmt.Errorf("staging: bounce buffer of %d bytes is smaller than the %d-byte chunk", len(b), chunk)
		}
	}
	return nil
}
