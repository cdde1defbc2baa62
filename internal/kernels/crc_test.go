package kernels

import (
	"encoding/binary"
	"errors"
	"fmt"
	"hash/crc32"
	"math/rand/v2"
	"sync"
	"testing"

	"github.com/kvikgo/kvik/cuda"
	"github.com/kvikgo/kvik/internal/crcsum"
	"github.com/kvikgo/kvik/internal/testkit/gputest"
)

// modelRaw does on the CPU what the crc32 kernel does with the tables of
// crcTables, warp by warp and lane by lane: the check of the tables and
// powers that runs without a GPU.
func modelRaw(p *crcsum.Poly, b []byte, rounds int64) uint32 {
	seg := 256 * rounds
	nseg := int64(len(b)) / seg
	t, pw := roundTables(p), segmentPowers(p, seg, nseg)
	tab := func(i int) uint32 { return t[i] }
	var out uint32
	for s := range nseg {
		var sum uint32
		for lane := range int64(32) {
			word := func(r int64) uint64 { return binary.LittleEndian.Uint64(b[s*seg+256*r+8*lane:]) }
			var c uint32
			r := int64(0)
			for ; r+1 < rounds; r++ {
				w := word(r)
				lo, hi := uint32(w)^c, uint32(w>>32)
				c = 0
				for k := range 4 {
					c ^= tab(256*k+int(lo>>(8*k)&255)) ^ tab(1024+256*k+int(hi>>(8*k)&255))
				}
			}
			w := word(r)
			sum ^= p.Mul(uint32(w)^c, tab(2048+int(lane))) ^ p.Mul(uint32(w>>32), tab(2048+32+int(lane)))
		}
		for j, e := 0, nseg-1-s; e != 0; j, e = j+1, e>>1 {
			if e&1 != 0 {
				sum = p.Mul(sum, pw[j])
			}
		}
		out ^= sum
	}
	return out
}

// TestCRCModel: the kernel's way, on the CPU, of random bytes in
// segments of 1 to 40 rounds, 1 to 70 of them, against hash/crc32, for
// both polynomials.
func TestCRCModel(t *testing.T) {
	rng := rand.New(rand.NewPCG(5, 8))
	for _, p := range []*crcsum.Poly{crcsum.IEEE, crcsum.Castagnoli} {
		for range 20 {
			rounds := 1 + rng.Int64N(40)
			nseg := 1 + rng.Int64N(70)
			b := make([]byte, 256*rounds*nseg)
			for i := range b {
				b[i] = byte(rng.Uint32())
			}
			start := rng.Uint32()
			want := crc32.Update(start, p.Table(), b)
			if got := ^p.Combine(^start, modelRaw(p, b, rounds), int64(len(b))); got != want {
				t.Errorf("poly %08x, %d segments of %d rounds: %08x, want %08x", p.Reversed(), nseg, rounds, got, want)
			}
		}
	}
}

// TestCRC32 sums random bytes on the GPU at unaligned offsets of one
// buffer, of random sizes from none to 80 MiB (so one segment, a few,
// and thousands of more than the fewest rounds), continuing a random
// CRC, against hash/crc32, for both polynomials; then 16 goroutines sum
// at once, 192 sums in all, so that each of the context's 64 words for
// them serves several.
func TestCRC32(t *testing.T) {
	ctx := gputest.Primary(t, 0)
	rng := rand.New(rand.NewPCG(9, uint64(len(t.Name()))))
	const most = 80 << 20
	buf := make([]byte, most+8)
	for i := range buf {
		buf[i] = byte(rng.Uint32())
	}
	sizes := []int{0, 1, 7, 8, 4095, 4096, 4096 + 7, 8192 + 13, 1 << 20, 32<<20 + 1, most}
	for range 8 {
		sizes = append(sizes, rng.IntN(most))
	}
	err := cuda.WithContext(ctx, func() error {
		u, err := LoadCRC32(ctx)
		if err != nil {
			return err
		}
		d, err := cuda.MemAlloc(len(buf))
		if err != nil {
			return err
		}
		defer d.Close()
		if err := cuda.MemcpyHtoD(d.Ptr(), buf); err != nil {
			return err
		}
		for i, n := range sizes {
			p := []*crcsum.Poly{crcsum.IEEE, crcsum.Castagnoli}[i%2]
			off := rng.IntN(8)
			if n == most {
				off = 8
			}
			start := rng.Uint32()
			got, err := u.Update(0, start, p, d.Ptr()+cuda.DevicePtr(off), int64(n))
			if err != nil {
				return fmt.Errorf("%d bytes at %d: %w", n, off, err)
			}
			if want := crc32.Update(start, p.Table(), buf[off:off+n]); got != want {
				t.Errorf("poly %08x, %d bytes at offset %d: %08x, want %08x", p.Reversed(), n, off, got, want)
			}
		}
		// Sums at once, more than the context's words for them.
		var wg sync.WaitGroup
		errs := make(chan error, 16)
		for g := range 16 {
			seed := rng.Uint64()
			wg.Add(1)
			go func() {
				defer wg.Done()
				errs <- cuda.WithContext(ctx, func() error {
					rng := rand.New(rand.NewPCG(seed, uint64(g)))
					for range 12 {
						off, n := rng.IntN(most), rng.IntN(4<<20)
						n = min(n, most-off)
						got, err := u.Update(0, 0, crcsum.IEEE, d.Ptr()+cuda.DevicePtr(off), int64(n))
						if err != nil {
							return err
						}
						if want := crc32.ChecksumIEEE(buf[off : off+n]); got != want {
							return fmt.Errorf("%d bytes at %d, at once with others: %08x, want %08x", n, off, got, want)
						}
					}
					return nil
				})
			}()
		}
		wg.Wait()
		close(errs)
		for err := range errs {
			if err != nil {
				return err
			}
		}
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
}

// TestCRC32Invalid: a negative size or a nil pointer fails before any
// copy or launch (no GPU needed); no bytes is the CRC given.
func TestCRC32Invalid(t *testing.T) {
	var u CRC32
	for _, c := range []struct {
		ptr cuda.DevicePtr
		n   int64
	}{{0x1000, -1}, {0, 5}} {
		if _, err := u.Update(0, 0, crcsum.IEEE, c.ptr, c.n); !errors.Is(err, cuda.ErrorInvalidValue) {
			t.Errorf("%d bytes at %#x: %v, want ErrorInvalidValue", c.n, uint64(c.ptr), err)
		}
	}
	if got, err := u.Update(0, 0xdeadbeef, crcsum.IEEE, 0, 0); got != 0xdeadbeef || err != nil {
		t.Errorf("no bytes: %08x, %v", got, err)
	}
}

// BenchmarkCRC32 sums 1 GiB of device memory on the GPU, beside
// BenchmarkCRC32Host, the same bytes in host memory on every core
// (crcsum.Sum): bytes a second of each.
func BenchmarkCRC32(b *testing.B) {
	ctx := gputest.Primary(b, 0)
	const n = 1 << 30
	err := cuda.WithContext(ctx, func() error {
		u, err := LoadCRC32(ctx)
		if err != nil {
			return err
		}
		d, err := cuda.MemAlloc(n)
		if err != nil {
			return err
		}
		defer d.Close()
		if err := cuda.MemsetD8(d.Ptr(), 0x5a, n); err != nil {
			return err
		}
		b.SetBytes(n)
		for b.Loop() {
			if _, err := u.Update(0, 0, crcsum.IEEE, d.Ptr(), n); err != nil {
				return err
			}
		}
		return nil
	})
	if err != nil {
		b.Fatal(err)
	}
}

func BenchmarkCRC32Host(b *testing.B) {
	buf := make([]byte, 1<<30)
	for i := range buf {
		buf[i] = byte(i * 7)
	}
	b.SetBytes(int64(len(buf)))
	for b.Loop() {
		crcsum.IEEE.Sum(0, buf)
	}
}
