// Package hostmem bounds host allocations whose size comes from outside
// the program (a server's Content-Length or object size, a file header,
// metadata): a size the machine cannot hold fails with an error matching
// remote.ErrTooLarge (kvik.ErrTooLarge) instead of killing the process,
// which is what Go does when an allocation finds no memory.
package hostmem

import (
	"fmt"
	"math"

	"github.com/kvikgo/kvik/internal/remote"
)

// Check returns an error matching remote.ErrTooLarge when n bytes cannot
// be allocated in host memory: more than the machine's RAM and swap (on
// Linux), or more than a slice can hold. what names the allocation in
// the error.
func Check(n int64, what string) error {
	if n < 0 {
		return fmt.Errorf("%w: %s of %d bytes", remote.ErrTooLarge, what, n)
	}
	limit := Limit()
	if n > limit {
		return fmt.Errorf("%w: %s of %d bytes, more than the %d bytes of memory this machine has", remote.ErrTooLarge, what, n, limit)
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
