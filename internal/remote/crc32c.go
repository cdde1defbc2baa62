package remote

import (
	"fmt"
	"hash/crc32"
	"io"
	"sync"
)

// Castagnoli is the CRC-32C table (hash/crc32), the checksum S3 checks.
var Castagnoli = crc32.MakeTable(crc32.Castagnoli)

// SentSum is the checksum of one part's body as it went out: each attempt
// (a retry sends the body again) starts a fresh crcReader, and the one
// that the successful request read is the last.
type SentSum struct {
	mu   sync.Mutex
	last *crcReader
}

// Attempt checksums the body of one attempt, r, as it is read.
func (s *SentSum) Attempt(r io.ReadCloser) io.Reader {
	c := &crcReader{r: r}
	s.mu.Lock()
	s.last = c
	s.mu.Unlock()
	return c
}

// Result returns the checksum of the last attempt, which must have sent
// exactly n bytes. The request returns only after the transport closed
// the body, so no Read runs any more.
func (s *SentSum) Result(n int64) (uint32, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	c := s.last
	if c == nil {
		if n == 0 {
			return 0, nil
		}
		return 0, fmt.Errorf("%w: no body was sent", io.ErrShortWrite)
	}
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.n != n {
		return 0, fmt.Errorf("%w: the body sent %d of %d bytes", io.ErrShortWrite, c.n, n)
	}
	return c.sum, nil
}

// crcReader checksums the bytes read through it.
type crcReader struct {
	r   io.ReadCloser
	mu  sync.Mutex // Close may come from another goroutine than Read
	sum uint32
	n   int64
}

func (c *crcReader) Read(p []byte) (int, error) {
	n, err := c.r.Read(p)
	c.mu.Lock()
	c.sum = crc32.Update(c.sum, Castagnoli, p[:n])
	c.n += int64(n)
	c.mu.Unlock()
	return n, err
}

func (c *crcReader) Close() error { return c.r.Close() }

// CRC32CCombine returns the CRC-32C of A followed by B from a = CRC(A),
// b = CRC(B) and n = len(B): a times x^(8n) modulo the polynomial, plus b.
func CRC32CCombine(a, b uint32, n int64) uint32 {
	if n == 0 {
		return a
	}
	return gfMul(a, xPow8n(n)) ^ b
}

// The CRC's polynomials are kept bit-reversed, as hash/crc32 does: bit 31
// holds x^0 and bit 0 holds x^31.
const crc32cPoly = 0x82f63b78

// gfMul returns a*b modulo the CRC-32C polynomial.
func gfMul(a, b uint32) uint32 {
	var p uint32
	for m := uint32(1) << 31; m != 0 && a != 0; m >>= 1 {
		if a&m != 0 {
			p ^= b
			a ^= m
		}
		// b *= x
		if b&1 != 0 {
			b = b>>1 ^ crc32cPoly
		} else {
			b >>= 1
		}
	}
	return p
}

// x2k[k] is x^(2^k) modulo the polynomial.
var x2k = func() (t [64]uint32) {
	t[0] = 1 << 30 // x^1
	for k := 1; k < len(t); k++ {
		t[k] = gfMul(t[k-1], t[k-1])
	}
	return t
}()

// xPow8n returns x^(8n) modulo the polynomial, n >= 0.
func xPow8n(n int64) uint32 {
	p := uint32(1) << 31 // x^0
	for k := 3; n != 0; k, n = k+1, n>>1 {
		if n&1 != 0 {
			p = gfMul(p, x2k[k])
		}
	}
	return p
}
