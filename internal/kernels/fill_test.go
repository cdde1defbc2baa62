package kernels

import (
	"errors"
	"math/rand/v2"
	"testing"

	"github.com/kvikgo/kvik/cuda"
	"github.com/kvikgo/kvik/internal/testkit/gputest"
)

// TestDiffers scans chunks at unaligned offsets of one buffer, of random
// sizes and fill values of 1 to 40 bytes: some all fill value, some with
// one byte changed (first, last, or anywhere, an element's every byte
// in turn), some random, against the same check on the CPU.
func TestDiffers(t *testing.T) {
	ctx := gputest.Primary(t, 0)
	rng := rand.New(rand.NewPCG(11, uint64(len(t.Name()))))
	err := cuda.WithContext(ctx, func() error {
		u, err := LoadFillScanner(ctx)
		if err != nil {
			return err
		}
		for round := range 12 {
			es := 1 + rng.IntN(40)
			n := 1 + rng.IntN(3<<20)
			if round%3 == 0 {
				n = 1 + rng.IntN(5000)
			}
			k := 1 + rng.IntN(40)
			fill := make([]byte, es)
			for i := range fill {
				fill[i] = byte(rng.Uint32())
			}
			gap := rng.IntN(7)
			buf := make([]byte, k*(n+gap)+gap)
			for i := range buf {
				buf[i] = byte(rng.Uint32())
			}
			offs := make([]uint64, k)
			want := make([]bool, k)
			for c := range k {
				off := gap + c*(n+gap)
				offs[c] = uint64(off)
				chunk := buf[off : off+n]
				kind := rng.IntN(5)
				if kind > 0 {
					for i := range chunk {
						chunk[i] = fill[i%es]
					}
				}
				switch kind {
				case 2:
					chunk[0] ^= 1
				case 3:
					chunk[n-1] ^= 0x80
				case 4:
					chunk[rng.IntN(n)]++
				}
				want[c] = kind != 1
			}
			d, err := cuda.MemAlloc(len(buf))
			if err != nil {
				return err
			}
			if err := cuda.MemcpyHtoD(d.Ptr(), buf); err != nil {
				return err
			}
			got, err := u.Differs(0, d.Ptr(), offs, n, fill)
			d.Close()
			if err != nil {
				return err
			}
			for c := range k {
				if got[c] != want[c] {
					t.Errorf("round %d (chunks of %d bytes, fill of %d): chunk %d differs %v, want %v", round, n, es, c, got[c], want[c])
				}
			}
		}
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
}

// TestDiffersInvalid: no chunks is no work; chunks of no bytes or an
// empty fill value fail before any launch (no GPU needed).
func TestDiffersInvalid(t *testing.T) {
	var u FillScanner
	if got, err := u.Differs(0, 0, nil, 10, []byte{1}); got != nil || err != nil {
		t.Errorf("no chunks: %v, %v", got, err)
	}
	for _, c := range []struct {
		n    int
		fill []byte
	}{{0, []byte{1}}, {-1, []byte{1}}, {10, nil}} {
		if _, err := u.Differs(0, 0, []uint64{0}, c.n, c.fill); !errors.Is(err, cuda.ErrorInvalidValue) {
			t.Errorf("%+v: %v, want ErrorInvalidValue", c, err)
		}
	}
}
