package hostmem

import (
	"errors"
	"testing"
)

// TestCheck: sizes a process can hold pass; a terabyte-scale claim beyond
// the machine's memory, or a negative size, is ErrTooLarge.
func TestCheck(t *testing.T) {
	mem := total()
	if mem <= 0 {
		t.Skip("machine memory unknown")
	}
	for _, n := range []int64{0, 1, 1 << 20, mem / 4} {
		if err := Check(n, "test"); err != nil {
			t.Errorf("Check(%d) = %v on a machine of %d bytes", n, err, mem)
		}
	}
	for _, n := range []int64{-1, mem + 1, 1 << 50} {
		if err := Check(n, "test"); !errors.Is(err, ErrTooLarge) {
			t.Errorf("Check(%d) = %v on a machine of %d bytes, want ErrTooLarge", n, err, mem)
		}
	}
}
