package crcsum

import (
	"hash/crc32"
	"math/rand/v2"
	"testing"
)

// TestCombine checks Combine against hash/crc32 over the concatenation,
// for random splits of random bytes, with both polynomials, and that
// shifting by n+m bytes is shifting by n then by m for lengths too long
// to checksum here.
func TestCombine(t *testing.T) {
	rng := rand.New(rand.NewPCG(29, 3))
	data := make([]byte, 3<<20+rng.IntN(4096))
	for i := range data {
		data[i] = byte(rng.Uint32())
	}
	for _, c := range []*Poly{IEEE, Castagnoli} {
		sum := func(p []byte) uint32 { return crc32.Checksum(p, c.Table()) }
		for range 200 {
			n := rng.IntN(len(data))
			i := rng.IntN(n + 1)
			if rng.IntN(4) == 0 {
				i = n // an empty second part
			}
			a, b := data[:i], data[i:n]
			if got, want := c.Combine(sum(a), sum(b), int64(len(b))), sum(data[:n]); got != want {
				t.Fatalf("%08x: combine of %d + %d bytes = %08x, want %08x", c.poly, len(a), len(b), got, want)
			}
		}
		for range 50 {
			n, m := rng.Int64N(1<<40), rng.Int64N(1<<40)
			if c.Mul(c.XPow8n(n), c.XPow8n(m)) != c.XPow8n(n+m) {
				t.Fatalf("x^(8(%d+%d)) differs from the product of its factors", n, m)
			}
		}
		if c.XPow8n(0) != 1<<31 || c.XPow8n(1) != c.Mul(c.x2k[3], 1<<31) {
			t.Fatal("x^0 or x^8 wrong")
		}
	}
}

// TestSum checks Sum against hash/crc32, buffers small and large enough
// to be split, continuing a CRC of bytes before them.
func TestSum(t *testing.T) {
	rng := rand.New(rand.NewPCG(30, 4))
	data := make([]byte, 5*sumPart+rng.IntN(1<<20))
	for i := range data {
		data[i] = byte(rng.Uint32())
	}
	for _, c := range []*Poly{IEEE, Castagnoli} {
		for _, n := range []int{0, 1, sumPart - 1, 2*sumPart + 7, len(data)} {
			head := rng.IntN(100)
			want := crc32.Checksum(data[:n], c.Table())
			prev := crc32.Checksum(data[:head], c.Table())
			whole := crc32.Update(prev, c.Table(), data[head:n+head-min(head, n)])
			if got := c.Sum(0, data[:n]); got != want {
				t.Fatalf("%08x: Sum of %d bytes = %08x, want %08x", c.poly, n, got, want)
			}
			if got := c.Sum(prev, data[head:n+head-min(head, n)]); got != whole {
				t.Fatalf("%08x: Sum after %d bytes = %08x, want %08x", c.poly, head, got, whole)
			}
		}
	}
}
