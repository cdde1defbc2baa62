package kvik

import (
	"fmt"
	"math"
)

// opKind names an operation in errors and selects its direction.
type opKind string

const (
	opRead  opKind = "read"
	opWrite opKind = "write"
)

// checkRange validates an operation of size bytes at off.
func checkRange(off int64, size int) error {
	switch {
	case off < 0:
		return fmt.Errorf("%w: negative offset %d", ErrInvalidArgument, off)
	case size < 0:
		return fmt.Errorf("%w: negative size %d", ErrInvalidArgument, size)
	case off > math.MaxInt64-int64(size):
		return fmt.Errorf("%w: offset %d + size %d overflows", ErrInvalidArgument, off, size)
	}
	return nil
}

// clampRead returns the bytes of a read of size at off that lie inside
// data of total bytes, and whether it had to cut the read short.
func clampRead(off int64, size int, total int64) (int, bool) {
	if rest := total - min(off, total); int64(size) > rest {
		return int(rest), true
	}
	return size, false
}

// alignDown rounds x down to a multiple of a.
func alignDown(x, a int64) int64 { return x / a * a }

// alignUp64 rounds n up to a multiple of a.
func alignUp64(n, a int64) int64 { return (n + a - 1) / a * a }
