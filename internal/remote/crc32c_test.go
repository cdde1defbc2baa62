package remote

import (
	"bytes"
	"errors"
	"hash/crc32"
	"io"
	"math/rand/v2"
	"testing"
)

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
