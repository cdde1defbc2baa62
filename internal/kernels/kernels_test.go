package kernels

import (
	"bytes"
	"errors"
	"math"
	"math/rand/v2"
	"testing"

	"github.com/kvikgo/kvik/cuda"
	"github.com/kvikgo/kvik/internal/testkit/gputest"
)

// shuffle is Blosc's byte shuffle of one block, the reference the kernel
// undoes.
func shuffle(block []byte, ts int) []byte {
	out := bytes.Clone(block)
	neb := len(block) / ts
	for i := range neb {
		for j := range ts {
			out[j*neb+i] = block[i*ts+j]
		}
	}
	return out
}

// TestUnshuffle shuffles random bytes block by block (random sizes,
// blocks and element sizes, a short last block, bytes past the last
// whole element), unshuffles them on the GPU into rows of a wider
// buffer, and compares every byte there, the gaps between the rows
// included (left as they were).
func TestUnshuffle(t *testing.T) {
	ctx := gputest.Primary(t, 0)
	rng := rand.New(rand.NewPCG(7, uint64(len(t.Name()))))
	cases := []struct{ n, bs, ts, width int }{
		{1 << 20, 256 << 10, 4, 2048},  // a 512 x 512 float32 chunk
		{1 << 20, 1 << 20, 8, 1 << 20}, // one block, one run
		{1000, 96, 3, 100},             // rows that cut elements
		{7, 16, 4, 7},                  // a block shorter than asked
		{5, 5, 8, 3},                   // no whole element
		{300001, 4099, 2, 1001},        // a short last block, odd sizes
		{65536, 16, 16, 64 * 3},        // many small blocks
		{131072, 131072, 255, 131072},  // the largest type size
	}
	for range 6 {
		n := 1 + rng.IntN(3<<20)
		ts := 1 + rng.IntN(16)
		cases = append(cases, struct{ n, bs, ts, width int }{n, 1 + rng.IntN(n), ts, 1 + rng.IntN(n)})
	}
	err := cuda.WithContext(ctx, func() error {
		u, err := LoadUnshuffler(ctx)
		if err != nil {
			return err
		}
		for _, c := range cases {
			want := make([]byte, c.n)
			for i := range want {
				want[i] = byte(rng.Uint32())
			}
			var stored []byte
			for off := 0; off < c.n; off += c.bs {
				stored = append(stored, shuffle(want[off:min(off+c.bs, c.n)], c.ts)...)
			}
			rows := (c.n + c.width - 1) / c.width
			dpitch := c.width + rng.IntN(64)
			out := make([]byte, rows*dpitch)
			for i := range out {
				out[i] = byte(rng.Uint32())
			}
			expect := bytes.Clone(out)
			for r := range rows {
				copy(expect[r*dpitch:r*dpitch+c.width], want[r*c.width:min((r+1)*c.width, c.n)])
			}
			src, err := cuda.MemAlloc(c.n)
			if err != nil {
				return err
			}
			dst, err := cuda.MemAlloc(len(out))
			if err != nil {
				return err
			}
			if err := cuda.MemcpyHtoD(src.Ptr(), stored); err != nil {
				return err
			}
			if err := cuda.MemcpyHtoD(dst.Ptr(), out); err != nil {
				return err
			}
			if err := u.Unshuffle(0, dst.Ptr(), c.width, dpitch, src.Ptr(), c.n, c.bs, c.ts); err != nil {
				return err
			}
			if err := cuda.MemcpyDtoH(out, dst.Ptr()); err != nil {
				return err
			}
			src.Close()
			dst.Close()
			if i := firstDiff(out, expect); i >= 0 {
				t.Errorf("n %d, block %d, type size %d, rows of %d %d apart: byte %d is %d, want %d", c.n, c.bs, c.ts, c.width, dpitch, i, out[i], expect[i])
			}
		}
		// The module is loaded once per context.
		if u2, err := LoadUnshuffler(ctx); err != nil || u2.f != u.f {
			t.Errorf("second load: %v, %v; want the function %v", u2, err, u.f)
		}
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
}

func firstDiff(a, b []byte) int {
	for i := range a {
		if a[i] != b[i] {
			return i
		}
	}
	return -1
}

// TestUnshuffleInvalid: arguments the kernel cannot take fail before any
// launch, matching cuda.ErrorInvalidValue (no GPU needed).
func TestUnshuffleInvalid(t *testing.T) {
	var u Unshuffler
	for _, c := range []struct{ n, bs, ts, width, dpitch int }{
		{0, 1, 4, 1, 1},
		{math.MaxInt32 + 1, 1 << 20, 4, 1 << 20, 1 << 20},
		{100, 0, 4, 10, 10},
		{100, 10, 0, 10, 10},
		{100, 10, 256, 10, 10},
		{100, 10, 4, 0, 10},
		{100, 10, 4, 20, 10},
	} {
		err := u.Unshuffle(0, 0, c.width, c.dpitch, 0, c.n, c.bs, c.ts)
		if !errors.Is(err, cuda.ErrorInvalidValue) {
			t.Errorf("%+v: %v, want ErrorInvalidValue", c, err)
		}
	}
}
