package remote

import (
	"bytes"
	"errors"
	"hash/crc32"
	"io"
	"math/rand/v2"
	"testing"
)

// TestCRC32CCombine checks CRC32CCombine against hash/crc32 over the
// concatenation, for random splits of random bytes, and that combining
// is associative for lengths too long to checksum here.
func TestCRC32CCombine(t *testing.T) {
	rng := rand.New(rand.NewPCG(29, 3))
	data := make([]byte, 3<<20+rng.IntN(4096))
	for i := range data {
		data[i] = byte(rng.Uint32())
	}
	sum := func(p []byte) uint32 { return crc32.Checksum(p, Castagnoli) }
	for range 200 {
		n := rng.IntN(len(data))
		i := rng.IntN(n + 1)
		if rng.IntN(4) == 0 {
			i = n // an empty second part
		}
		a, b := data[:i], data[i:n]
		if got, want := CRC32CCombine(sum(a), sum(b), int64(len(b))), sum(data[:n]); got != want {
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

// TestSentSum checks a part's checksum over retries: the last attempt's
// bytes count, whatever earlier attempts read; a body that sent fewer
// bytes than the part, or none, is io.ErrShortWrite.
func TestSentSum(t *testing.T) {
	rng := rand.New(rand.NewPCG(31, 5))
	data := make([]byte, 1+rng.IntN(1<<20))
	for i := range data {
		data[i] = byte(rng.Uint32())
	}
	var s SentSum
	if sum, err := s.Result(0); sum != 0 || err != nil {
		t.Fatalf("empty part without a body: %08x, %v", sum, err)
	}
	if _, err := s.Result(int64(len(data))); !errors.Is(err, io.ErrShortWrite) {
		t.Fatalf("part without a body: %v, want io.ErrShortWrite", err)
	}
	// A first attempt reads part of the body and fails; the retry reads
	// all of it.
	first := s.Attempt(io.NopCloser(bytes.NewReader(data)))
	io.CopyN(io.Discard, first, int64(rng.IntN(len(data))))
	if _, err := s.Result(int64(len(data))); !errors.Is(err, io.ErrShortWrite) {
		t.Fatalf("short attempt: %v, want io.ErrShortWrite", err)
	}
	io.Copy(io.Discard, s.Attempt(io.NopCloser(bytes.NewReader(data))))
	if sum, err := s.Result(int64(len(data))); err != nil || sum != crc32.Checksum(data, Castagnoli) {
		t.Fatalf("retried part: %08x, %v; want %08x", sum, err, crc32.Checksum(data, Castagnoli))
	}
}
