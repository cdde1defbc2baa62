// Package hostmem bounds host allocations whose size comes from outside
// the program (a server's Content-Length or object size, a file header,
// metadata): a size the machine cannot hold fails with an error matching
// ErrTooLarge (kvik.ErrTooLarge) instead of killing the process, which is
// what Go does when an allocation finds no memory.
package hostmem

import (
	"errors"
	"fmt"
	"math"
)

// ErrTooLarge reports a size from a server, a file or metadata beyond its
// bound: an allocation larger than the machine's memory here, a body
// longer than a caller expects or a cap allows in internal/remote, which
// re-exports it, as the root package does (kvik.ErrTooLarge).
var ErrTooLarge = errors.New("larger than allowed")

// Check returns an error matching ErrTooLarge when n bytes cannot
// be allocated in host memory: more than the machine's RAM and swap (on
// Linux), or more than a slice can hold. what names the allocation in
// the error.
func Check(n int64, what string) error {
	if n < 0 {
		return fmt.Errorf("%w: %s of %d bytes", ErrTooLarge, what, n)
	}
	limit := Limit()
	if n > limit {
		return fmt.Errorf("%w: %s of %d bytes, more than the %d bytes of memory this machine has", ErrTooLarge, what, n, limit)
	}
	return nil
}

// Limit returns the most bytes Check lets through: the machine's RAM and
// swap where known, else the most a slice can hold.
func Limit() int64 {
	limit := total()
	if limit <= 0 || limit > math.MaxInt {
		limit = math.MaxInt
	}
	return int64(limit)
}
