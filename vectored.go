package kvik

import (
	"context"
	"errors"
	"fmt"
	"io"
	"math"
	"time"

	"github.com/kvikgo/kvik/cuda"
	"github.com/kvikgo/kvik/cufile"
	"github.com/kvikgo/kvik/internal/devmem"
	"github.com/kvikgo/kvik/internal/sched"
)

// DeviceVec is one device buffer of a vectored device read or write:
// Size bytes at Ptr, which may be any address inside a device allocation
// (the range must lie in it), like the buf of ReadDevice.
type DeviceVec struct {
	Ptr  cuda.DevicePtr
	Size int
}

// hostVec is the byte range of a vector of host buffers laid end to end,
// as preadv(2) fills them: buffer i covers [starts[i], starts[i]+len).
type hostVec struct {
	bufs   [][]byte
	starts []int
	total  int
}

func newHostVec(bufs [][]byte) (hostVec, error) {
	v := hostVec{bufs: bufs, starts: make([]int, len(bufs))}
	for i, b := range bufs {
		if len(b) > math.MaxInt-v.total {
			return hostVec{}, fmt.Errorf("%w: %d buffers add up to more than %d bytes", ErrInvalidArgument, len(bufs), math.MaxInt)
		}
		v.starts[i] = v.total
		v.total += len(b)
	}
	return v, nil
}

// each calls fn on the pieces of [pos, pos+n) of the vector, in order,
// with each piece's position in the vector. It stops at the first error or
// short count and returns the bytes done.
func (v hostVec) each(pos, n int, fn func(p []byte, pos int) (int, error)) (int, error) {
	// The last buffer that starts at or before pos; empty buffers share
	// their start with the next one and are skipped below.
	lo, hi := 0, len(v.starts)
	for lo < hi {
		m := int(uint(lo+hi) >> 1)
		if v.starts[m] <= pos {
			lo = m + 1
		} else {
			hi = m
		}
	}
	done := 0
	for i := max(lo-1, 0); i < len(v.bufs) && done < n; i++ {
		b := v.bufs[i]
		at := pos + done - v.starts[i]
		if at >= len(b) {
			continue
		}
		p := b[at:min(len(b), at+n-done)]
		m, err := fn(p, pos+done)
		done += m
		if err != nil {
			return done, err
		}
		if m < len(p) {
			return done, io.ErrNoProgress
		}
	}
	return done, nil
}

// ReadV reads into bufs, in order, from consecutive file ranges starting
// at off: bufs[0] from off, bufs[1] from off+len(bufs[0]), and so on, as
// preadv(2) does (a net.Buffers may be passed). The bytes are read in
// parallel tasks as by ReadAt, and the result has ReadAt's meaning for the
// buffers laid end to end: n is the total read, and when it is less than
// the buffers hold the error is non-nil, io.EOF when the file ends first.
// Empty buffers are allowed and take no bytes.
func (f *FileHandle) ReadV(bufs [][]byte, off int64) (int, error) {
	return f.hostVecOp(context.Background(), opRead, bufs, off)
}

// WriteV writes bufs, in order, to consecutive file ranges starting at
// off, as pwritev(2) does, in parallel tasks as by WriteAt. When n is less
// than the buffers hold the error is non-nil; n counts the bytes from off
// that are known written.
func (f *FileHandle) WriteV(bufs [][]byte, off int64) (int, error) {
	return f.hostVecOp(context.Background(), opWrite, bufs, off)
}

func (f *FileHandle) hostVecOp(ctx context.Context, kind opKind, bufs [][]byte, off int64) (int, error) {
	v, err := newHostVec(bufs)
	if err != nil {
		return f.fail(kind, err, nil)
	}
	d, err := f.begin(kind, off, v.total)
	if err != nil {
		return f.fail(kind, err, nil)
	}
	fn := func(_ context.Context, t sched.Task) (int, error) {
		return v.each(t.BufOff, t.Len, func(p []byte, pos int) (int, error) {
			return f.hostTask(kind, d, p, off+int64(pos))
		})
	}
	return f.run(ctx, kind, d, f.pool(d), off, v.total, fn, nil, nil)
}

// ReadV reads into bufs, in order, from consecutive ranges of the data
// starting at off, in parallel tasks; see FileHandle.ReadV.
func (h *readMethods) ReadV(bufs [][]byte, off int64) (int, error) {
	ctx := context.Background()
	v, err := newHostVec(bufs)
	if err != nil {
		return h.fail(err, nil)
	}
	d, n, eof, err := h.src.begin(off, v.total)
	if err != nil {
		return h.fail(err, nil)
	}
	if ts, ok := h.src.(hostTaskSizer); ok {
		d.TaskSize = ts.hostTaskSize(d, n)
	}
	read := h.src.fetcher(d)
	fn := func(ctx context.Context, t sched.Task) (int, error) {
		return v.each(t.BufOff, t.Len, func(p []byte, pos int) (int, error) {
			return read(ctx, p, off+int64(pos))
		})
	}
	return h.run(ctx, d, poolFor(d, ""), off, n, eof, fn, h.src.release, nil)
}

// ReadDeviceV reads into the device buffers bufs, in order, from
// consecutive ranges of the data starting at off, each as by ReadDevice
// and all at once. n is the total read; when it is less than the buffers
// hold the error is non-nil, io.EOF when the data ends first.
func (h *readMethods) ReadDeviceV(bufs []DeviceVec, off int64) (int, error) {
	return deviceVec(bufs, off, func(b DeviceVec, off int64) *Future {
		return h.PReadDevice(context.Background(), b.Ptr, b.Size, off, 0)
	}, h.src.pathErr)
}

// ReadDeviceV reads into the device buffers bufs, in order, from
// consecutive file ranges starting at off: the device counterpart of
// ReadV, and of cuda-python's cufile readv. With cuFile (CompatMode() ==
// CompatOff) the buffers go to cuFile as one batch (cuFileBatchIOSubmit,
// see BatchHandle) of up to TaskSize bytes per entry; otherwise each
// buffer is read as by ReadDevice, all at once. n is the total read; when
// it is less than the buffers hold the error is non-nil, io.EOF when the
// file ends first.
func (f *FileHandle) ReadDeviceV(bufs []DeviceVec, off int64) (int, error) {
	return f.deviceVecOp(opRead, bufs, off)
}

// WriteDeviceV writes the device buffers bufs, in order, to consecutive
// file ranges starting at off: the device counterpart of WriteV, through
// a cuFile batch or the POSIX path as ReadDeviceV. When n is less than the
// buffers hold the error is non-nil.
func (f *FileHandle) WriteDeviceV(bufs []DeviceVec, off int64) (int, error) {
	return f.deviceVecOp(opWrite, bufs, off)
}

func (f *FileHandle) deviceVecOp(kind opKind, bufs []DeviceVec, off int64) (int, error) {
	pathErr := func(err error) error { return f.pathErr(kind, err) }
	if f.compat == CompatOff {
		total, err := vecTotal(bufs)
		if err != nil {
			return 0, pathErr(err)
		}
		d, err := f.begin(kind, off, total)
		if err != nil {
			return 0, pathErr(err)
		}
		f.release() // the batch holds the file itself while it runs
		if total >= d.GDSThreshold {
			return f.batchVec(kind, d, bufs, off, total)
		}
	}
	return deviceVec(bufs, off, func(b DeviceVec, off int64) *Future {
		if kind == opRead {
			return f.PReadDevice(context.Background(), b.Ptr, b.Size, off, 0)
		}
		return f.PWriteDevice(context.Background(), b.Ptr, b.Size, off, 0)
	}, pathErr)
}

// vecTotal checks the sizes of bufs and returns their sum.
func vecTotal(bufs []DeviceVec) (int, error) {
	total := 0
	for i, b := range bufs {
		if b.Size < 0 {
			return 0, fmt.Errorf("%w: buffer %d has negative size %d", ErrInvalidArgument, i, b.Size)
		}
		if b.Size > math.MaxInt-total {
			return 0, fmt.Errorf("%w: %d buffers add up to more than %d bytes", ErrInvalidArgument, len(bufs), math.MaxInt)
		}
		total += b.Size
	}
	return total, nil
}

// deviceVec starts one transfer per non-empty buffer with start, at the
// buffer's file offset, and sums the results in order up to the first
// buffer that was not filled, whose error it returns.
func deviceVec(bufs []DeviceVec, off int64, start func(b DeviceVec, off int64) *Future, pathErr func(error) error) (int, error) {
	total, err := vecTotal(bufs)
	if err != nil {
		return 0, pathErr(err)
	}
	if err := checkRange(off, total); err != nil {
		return 0, pathErr(err)
	}
	futs := make([]*Future, len(bufs))
	pos := off
	for i, b := range bufs {
		if b.Size > 0 {
			futs[i] = start(b, pos)
		}
		pos += int64(b.Size)
	}
	n := 0
	var first error
	for i, fut := range futs {
		if fut == nil {
			continue
		}
		m, err := fut.Get() // wait for every transfer, even after a failure
		if first != nil {
			continue
		}
		n += m
		if err == nil && m < bufs[i].Size {
			err = io.ErrNoProgress
		}
		if err != nil {
			first = err
		}
	}
	return n, first
}

// maxBatchOps bounds the entries of one cuFile batch: cuFile's default
// io_batchsize (cufile.json) is 128.
const maxBatchOps = 128

// batchVec moves bufs through cuFile batches of at most maxBatchOps
// entries of at most d.TaskSize bytes each. Reads are clamped at the end
// of the file first, so that each entry is expected to complete in full.
func (f *FileHandle) batchVec(kind opKind, d Defaults, bufs []DeviceVec, off int64, total int) (int, error) {
	want, eof := total, false
	if kind == opRead {
		size, err := f.Size()
		if err != nil {
			return 0, err
		}
		if n, clamped := clampRead(off, total, size); clamped {
			want, eof = n, true
		}
	}
	// Wait for work queued on the buffers' default streams, as ReadDevice
	// and WriteDevice do.
	synced := map[cuda.Context]bool{}
	for _, b := range bufs {
		if b.Size == 0 {
			continue
		}
		r, err := devmem.Resolve(b.Ptr, b.Size, 0)
		if err == nil && !synced[r.Ctx] {
			err = cuda.WithContext(r.Ctx, func() error { return cuda.StreamSynchronize(0) })
			synced[r.Ctx] = true
		}
		if err != nil {
			return 0, f.pathErr(kind, err)
		}
	}
	var ops []BatchOp
	pos := 0
	for _, b := range bufs {
		for done := 0; done < b.Size && pos < want; {
			l := min(b.Size-done, want-pos)
			if d.TaskSize > 0 {
				l = min(l, d.TaskSize)
			}
			ops = append(ops, BatchOp{File: f, Buf: b.Ptr, Size: l, FileOffset: off + int64(pos), DevOffset: int64(done), Write: kind == opWrite})
			done += l
			pos += l
		}
	}
	n := 0
	for len(ops) > 0 {
		k := min(len(ops), maxBatchOps)
		m, err := runBatchOps(ops[:k])
		n += m
		if err != nil {
			return n, f.pathErr(kind, err)
		}
		ops = ops[k:]
	}
	if eof {
		return n, io.EOF
	}
	return n, nil
}

// runBatchOps submits ops as one batch, waits for them all and returns
// the bytes done in order up to the first entry that did not complete in
// full.
func runBatchOps(ops []BatchOp) (int, error) {
	b, err := NewBatchHandle(len(ops))
	if err != nil {
		return 0, err
	}
	defer b.Close()
	if err := b.Submit(ops); err != nil {
		return 0, err
	}
	ret := make([]int, len(ops))
	status := make([]cufile.Status, len(ops))
	for left := len(ops); left > 0; {
		ev, err := b.Status(1, len(ops), time.Minute)
		if err == nil && len(ev) == 0 {
			err = fmt.Errorf("%d of %d entries still in flight after a minute", left, len(ops))
		}
		if err != nil {
			b.Cancel()
			return 0, fmt.Errorf("cuFile batch: %w", err)
		}
		for _, e := range ev {
			if e.Status == cufile.Waiting || e.Status == cufile.Pending {
				continue
			}
			if e.Cookie < uintptr(len(ops)) && status[e.Cookie] == 0 {
				status[e.Cookie], ret[e.Cookie] = e.Status, e.Ret
				left--
			}
		}
	}
	n := 0
	for i, op := range ops {
		switch {
		case status[i] == cufile.Complete && ret[i] == op.Size:
			n += ret[i]
		case status[i] == cufile.Complete && ret[i] >= 0:
			n += ret[i]
			if op.Write {
				return n, io.ErrShortWrite
			}
			return n, errors.New("cuFile batch read stopped short of the end of the file")
		default:
			return n, fmt.Errorf("cuFile batch entry %d of %d bytes at offset %d: status %#x, result %d", i, op.Size, op.FileOffset, status[i], ret[i])
		}
	}
	return n, nil
}
