package devmem

import (
	"testing"

	"github.com/kvikgo/kvik/cuda"
)

// TestRangeSub: a sub-range starts off bytes in and keeps the rest.
func TestRangeSub(t *testing.T) {
	r := Range{Ptr: 0x7000_1000, Base: 0x7000_0000, Ctx: cuda.Context(42), Primary: true}
	got := r.Sub(0x300)
	want := Range{Ptr: 0x7000_1300, Base: 0x7000_0000, Ctx: cuda.Context(42), Primary: true}
	if got != want || r.Ptr != 0x7000_1000 {
		t.Errorf("Sub(0x300) of %+v = %+v, want %+v (the range itself unchanged)", r, got, want)
	}
}
