package kvik

import (
	"fmt"
	"time"

	"github.com/kvikgo/kvik/cuda"
	"github.com/kvikgo/kvik/cufile"
	"github.com/kvikgo/kvik/internal/devmem"
)

// BatchOp is one read or write of a batch.
type BatchOp struct {
	File       *FileHandle
	Buf        cuda.DevicePtr // any address inside a device allocation
	Size       int
	FileOffset int64
	DevOffset  int64
	Write      bool // a write to the file; a read otherwise
}

// BatchHandle submits groups of cuFile reads and writes that run without
// the worker pool (cuFileBatchIO*), like kvikio::BatchHandle. Only files
// whose handles use cuFile can take part; they stay busy (their Close
// waits) until the BatchHandle is closed. As in cuFile, an operation
// waits for no stream: work queued on the legacy default stream that
// fills or reads its buffer must finish before Submit. A BatchHandle is
// not safe for concurrent use.
type BatchHandle struct {
	h    cufile.BatchHandle
	max  int
	ctx  cuda.Context
	held []*FileHandle
}

// NewBatchHandle sets up a batch of at most maxOps operations per Submit.
func NewBatchHandle(maxOps int) (*BatchHandle, error) {
	if maxOps <= 0 {
		return nil, fmt.Errorf("%w: batch size %d", ErrInvalidArgument, maxOps)
	}
	if st := ProbeCuFile(); !st.Usable {
		return nil, fmt.Errorf("%w: batch I/O: %s", ErrCuFileRequired, st.Reason)
	}
	h, err := cufile.BatchIOSetUp(maxOps)
	if err != nil {
		return nil, err
	}
	return &BatchHandle{h: h, max: maxOps}, nil
}

// Submit queues ops; results are collected with Status. Each op's Cookie
// in the events is its index in ops.
func (b *BatchHandle) Submit(ops []BatchOp) error {
	if b.h == 0 {
		return fmt.Errorf("batch: %w", ErrClosed)
	}
	if len(ops) == 0 || len(ops) > b.max {
		return fmt.Errorf("%w: batch of %d operations (1..%d allowed)", ErrInvalidArgument, len(ops), b.max)
	}
	params := make([]cufile.IOParams, len(ops))
	held := len(b.held)
	for i, op := range ops {
		p, ctx, err := b.param(op)
		if err != nil {
			b.releaseFrom(held)
			return fmt.Errorf("batch op %d: %w", i, err)
		}
		if b.ctx != 0 && ctx != b.ctx {
			b.releaseFrom(held)
			return fmt.Errorf("%w: batch op %d: device memory of another CUDA context than earlier ops", ErrInvalidArgument, i)
		}
		p.Cookie = uintptr(i)
		params[i] = p
		b.ctx = ctx
	}
	err := cuda.WithContext(b.ctx, func() error { return cufile.BatchIOSubmit(b.h, params, 0) })
	if err != nil {
		b.releaseFrom(held)
	}
	return err
}

// releaseFrom releases the files held since index i.
func (b *BatchHandle) releaseFrom(i int) {
	for _, f := range b.held[i:] {
		f.release()
	}
	b.held = b.held[:i]
}

func (b *BatchHandle) param(op BatchOp) (cufile.IOParams, cuda.Context, error) {
	f := op.File
	if f == nil {
		return cufile.IOParams{}, 0, fmt.Errorf("%w: nil file", ErrInvalidArgument)
	}
	if f.compat != CompatOff {
		return cufile.IOParams{}, 0, fmt.Errorf("%w: %s uses POSIX I/O (%s)", ErrCuFileRequired, f.name, f.reason)
	}
	kind := opRead
	if op.Write {
		kind = opWrite
	}
	if _, err := f.begin(kind, op.FileOffset, op.Size); err != nil {
		return cufile.IOParams{}, 0, err
	}
	b.held = append(b.held, f)
	r, err := devmem.Resolve(op.Buf, op.Size, op.DevOffset)
	if err != nil {
		return cufile.IOParams{}, 0, err
	}
	code := cufile.BatchRead
	if op.Write {
		code = cufile.BatchWrite
	}
	return cufile.IOParams{Handle: f.cuHandle, Buf: r.Base, FileOffset: op.FileOffset,
		BufOffset: int64(r.Ptr - r.Base), Size: op.Size, Opcode: code}, r.Ctx, nil
}

// Status waits until at least minNr operations have completed, or timeout
// passes, and returns the completed ones, at most maxNr.
func (b *BatchHandle) Status(minNr, maxNr int, timeout time.Duration) ([]cufile.IOEvent, error) {
	if b.h == 0 {
		return nil, fmt.Errorf("batch: %w", ErrClosed)
	}
	if maxNr <= 0 || maxNr > b.max || minNr < 0 || minNr > maxNr {
		return nil, fmt.Errorf("%w: status of %d..%d operations in a batch of %d", ErrInvalidArgument, minNr, maxNr, b.max)
	}
	ev := make([]cufile.IOEvent, maxNr)
	var n int
	err := b.withCtx(func() (err error) { n, err = cufile.BatchIOGetStatus(b.h, minNr, ev, timeout); return err })
	return ev[:n], err
}

// Cancel asks cuFile to cancel operations still in flight.
func (b *BatchHandle) Cancel() error {
	if b.h == 0 {
		return fmt.Errorf("batch: %w", ErrClosed)
	}
	return b.withCtx(func() error { return cufile.BatchIOCancel(b.h) })
}

// Close releases the batch (cuFileBatchIODestroy) and the files it held.
// Collect every operation's status (or Cancel) first. Closing twice does
// nothing.
func (b *BatchHandle) Close() error {
	if b.h == 0 {
		return nil
	}
	b.withCtx(func() error { cufile.BatchIODestroy(b.h); return nil })
	b.h = 0
	b.releaseFrom(0)
	return nil
}

// withCtx runs f with the batch's context current, if it has one yet.
func (b *BatchHandle) withCtx(f func() error) error {
	if b.ctx == 0 {
		return f()
	}
	return cuda.WithContext(b.ctx, f)
}
