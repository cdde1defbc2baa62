// Package crcsum computes CRC-32s of byte runs apart and joins them: the
// checksum of A followed by B from those of A and B and B's length, for
// any reflected polynomial hash/crc32 knows (IEEE: ZIP, gzip; Castagnoli:
// S3's CRC-32C). Uploads join their parts' sums; Sum checksums a large
// buffer on several cores.
package crcsum

import (
	"hash/crc32"
	"runtime"
	"sync"
)

// Poly is a CRC-32 polynomial, bit-reversed as hash/crc32 keeps it (bit
// 31 holds x^0), with what Combine needs.
type Poly struct {
	table *crc32.Table
	poly  uint32
	x2k   [64]uint32 // x^(2^k) modulo the polynomial
}

// The polynomials of hash/crc32.
var (
	IEEE       = New(crc32.IEEE)
	Castagnoli = New(crc32.Castagnoli)
)

// New returns the polynomial p (reversed, as crc32.IEEE is).
func New(p uint32) *Poly {
	c := &Poly{table: crc32.MakeTable(p), poly: p}
	c.x2k[0] = 1 << 30 // x^1
	for k := 1; k < len(c.x2k); k++ {
		c.x2k[k] = c.Mul(c.x2k[k-1], c.x2k[k-1])
	}
	return c
}

// Table returns the polynomial's hash/crc32 table.
func (c *Poly) Table() *crc32.Table { return c.table }

// Combine returns the CRC of A followed by B from a = CRC(A), b = CRC(B)
// and n = len(B): a times x^(8n) modulo the polynomial, plus b.
func (c *Poly) Combine(a, b uint32, n int64) uint32 {
	if n <= 0 {
		return a
	}
	return c.Mul(a, c.XPow8n(n)) ^ b
}

// Reversed returns the polynomial, bit-reversed (bit 31 holds x^0) as
// New took it.
func (c *Poly) Reversed() uint32 { return c.poly }

// Mul returns a*b modulo the polynomial, both as a CRC register holds
// them (bit 31 holds x^0): Mul(crc, XPow8n(n)) is crc moved over n zero
// bytes.
func (c *Poly) Mul(a, b uint32) uint32 {
	var p uint32
	for m := uint32(1) << 31; m != 0 && a != 0; m >>= 1 {
		if a&m != 0 {
			p ^= b
			a ^= m
		}
		// b *= x
		if b&1 != 0 {
			b = b>>1 ^ c.poly
		} else {
			b >>= 1
		}
	}
	return p
}

// XPow8n returns x^(8n) modulo the polynomial, n >= 0.
func (c *Poly) XPow8n(n int64) uint32 {
	p := uint32(1) << 31 // x^0
	for k := 3; n != 0; k, n = k+1, n>>1 {
		if n&1 != 0 {
			p = c.Mul(p, c.x2k[k])
		}
	}
	return p
}

// sumPart is the least a goroutine of Sum checksums: below it, one core
// does the whole buffer faster than starting others.
const sumPart = 16 << 20

// Sum returns the CRC of b, continuing crc (the CRC of what came before
// it), computed in parts on up to GOMAXPROCS goroutines and joined.
func (c *Poly) Sum(crc uint32, b []byte) uint32 {
	parts := min(runtime.GOMAXPROCS(0), len(b)/sumPart)
	if parts <= 1 {
		return crc32.Update(crc, c.table, b)
	}
	sums := make([]uint32, parts)
	var wg sync.WaitGroup
	for i := range parts {
		wg.Add(1)
		go func() {
			defer wg.Done()
			sums[i] = crc32.Checksum(b[i*len(b)/parts:(i+1)*len(b)/parts], c.table)
		}()
	}
	wg.Wait()
	for i, s := range sums {
		crc = c.Combine(crc, s, int64((i+1)*len(b)/parts-i*len(b)/parts))
	}
	return crc
}
