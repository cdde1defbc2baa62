package kvik

import (
	"fmt"
	"time"

	"github.com/kvikgo/kvik/cuda"
	"github.com/kvikgo/kvik/cufile"
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
// whose handles use cuFile can take part.
type BatchHandle struct {
	h   cufile.BatchHandle
	max int
	ctx cuda.Context
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
	for i, op := range ops {
		p, ctx, err := b.param(op)
		if err != nil {
			return fmt.Errorf("batch op %d: %w", i, err)
		}
		p.Cookie = uintptr(i)
		params[i] = p
		b.ctx = ctx
	}
	return cuda.WithContext(b.ctx, func() error { return cufile.BatchIOSubmit(b.h, params, 0) })
}

func (b *BatchHandle) param(op BatchOp) (cufile.IOParams, cuda.Context, error) {
	f := op.File
	if f == nil {
		return cufile.IOParams{}, 0, fmt.Errorf("%w: nil file", ErrInvalidArgument)
	}
	if f.compat != CompatOff {
		return cufile.IOParams{}, 0, fmt.Errorf("%w: %s uses POSIX I/O (%s)", ErrCuFileRequired, f.name, f.reason)
	}
	if err := checkRange(op.FileOffset, op.Size); err != nil {
		return cufile.IOParams{}, 0, err
	}
	r, err := resolveDevice(op.Buf, op.Size, op.DevOffset)
	if err != nil {
		return cufile.IOParams{}, 0, err
	}
	code := cufile.BatchRead
	if op.Write {
		code = cufile.BatchWrite
	}
	return cufile.IOParams{Handle: f.cuHandle, Buf: r.base, FileOffset: op.FileOffset,
		BufOffset: int64(r.ptr - r.base), Size: op.Size, Opcode: code}, r.ctx, nil
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
	n, err := cufile.BatchIOGetStatus(b.h, minNr, ev, timeout)
	return ev[:n], err
}

// Cancel asks cuFile to cancel operations still in flight.
func (b *BatchHandle) Cancel() error {
	if b.h == 0 {
		return fmt.Errorf("batch: %w", ErrClosed)
	}
	return cufile.BatchIOCancel(b.h)
}

// Close releases the batch. Closing twice does nothing.
func (b *BatchHandle) Close() error {
	cufile.BatchIODestroy(b.h)
	b.h = 0
	return nil
}
