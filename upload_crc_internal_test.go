package kvik

import (
	"hash/crc32"
	"math/rand/v2"
	"testing"
)

// TestCRC32CCombine checks crc32cCombine against hash/crc32 over the
// concatenation, for random splits of random bytes, and that combining
// is associative for lengths too long to checksum here.
func TestCRC32CCombine(t *testing.T) {
	rng := rand.New(rand.NewPCG(29, 3))
	data := make([]byte, 3<<20+rng.IntN(4096))
	for i := range data {
		data[i] = byte(rng.Uint32())
	}
	sum := func(p []byte) uint32 { return crc32.Checksum(p, castagnoli) }
	for range 200 {
		n := rng.IntN(len(data))
		i := rng.IntN(n + 1)
		if rng.IntN(4) == 0 {
			i = n // an empty second part
		}
		a, b := data[:i], data[i:n]
		if got, want := crc32cCombine(sum(a), sum(b), int64(len(b))), sum(data[:n]); got != want {
			t.Fatalf("combine of %d + %d bytes = %08x, want %08x", len(a), len(b), got, want)
		}
	}
	// Three parts, combined left to right, agree with the whole; the
	// shift by n+m bytes equals shifting by n then by m.
	for range 50 {
		n, m := rng.Int64N(1<<40), rng.Int64N(1<<40)
		if gfMul(xPow8n(n), xPow8n(m)) != xPow8n(n+m) {
			t.Fatalf("x^(8(%d+%d)) differs from the product of its factors", n, m)
		}
	}
	if xPow8n(0) != 1<<31 || xPow8n(1) != gfMul(x2k[3], 1<<31) {
		t.Fatal("x^0 or x^8 wrong")
	}
}
