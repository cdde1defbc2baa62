package remote

import (
	"fmt"
	"hash/crc32"
	"io"
	"sync"

	"github.com/kvikgo/kvik/internal/crcsum"
)

// Castagnoli is the CRC-32C table (hash/crc32), the checksum S3 checks;
// crcsum.Castagnoli joins the sums of parts.
var Castagnoli = crcsum.Castagnoli.Table()

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
