package remote

import (
	"bytes"
	"errors"
	"io"
	"math/rand/v2"
	"testing"
	"testing/iotest"
)

// TestReadBody compares readBody, at stage sizes around and inside the
// body, with io.ReadFull over readers that return short reads, fail
// midway or end early: the same bytes, count and error.
func TestReadBody(t *testing.T) {
	defer SetTuning(tuning)()
	rng := rand.New(rand.NewPCG(7, 21))
	errBroken := errors.New("connection broken")
	readers := map[string]func(data []byte) io.Reader{
		"whole":     func(d []byte) io.Reader { return bytes.NewReader(d) },
		"one byte":  func(d []byte) io.Reader { return iotest.OneByteReader(bytes.NewReader(d)) },
		"half":      func(d []byte) io.Reader { return iotest.HalfReader(bytes.NewReader(d)) },
		"data+EOF":  func(d []byte) io.Reader { return iotest.DataErrReader(bytes.NewReader(d)) },
		"broken":    func(d []byte) io.Reader { return io.MultiReader(bytes.NewReader(d), iotest.ErrReader(errBroken)) },
		"truncated": func(d []byte) io.Reader { return bytes.NewReader(d[:len(d)*2/3]) },
	}
	for range 12 {
		n := rng.IntN(100_000)
		if rng.IntN(8) == 0 {
			n = rng.IntN(5)
		}
		data := make([]byte, n)
		for i := range data {
			data[i] = byte(rng.Uint32())
		}
		stages := []int{0, 1, 4096, 65537, max(n-1, 1), n + 1, 1 + rng.IntN(n+1)}
		for name, reader := range readers {
			for _, stage := range stages {
				SetTuning(Tuning{})
				want := make([]byte, n)
				wantN, wantErr := io.ReadFull(reader(data), want)
				SetTuning(Tuning{BodyStage: stage})
				got := make([]byte, n)
				gotN, gotErr := readBody(reader(data), got)
				if gotN != wantN || !bytes.Equal(got[:gotN], data[:gotN]) || !errors.Is(gotErr, wantErr) || (gotErr == nil) != (wantErr == nil) {
					t.Fatalf("%s, %d bytes, stage %d: %d, %v; io.ReadFull %d, %v", name, n, stage, gotN, gotErr, wantN, wantErr)
				}
				if !bytes.Equal(got[gotN:], make([]byte, n-gotN)) {
					t.Fatalf("%s, %d bytes, stage %d: wrote past the %d bytes it reports", name, n, stage, gotN)
				}
			}
		}
	}
}
