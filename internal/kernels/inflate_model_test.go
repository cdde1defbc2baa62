package kernels

import (
	"bytes"
	stdflate "compress/flate"
	"fmt"
	"io"
	"math/rand/v2"
	"os/exec"
	"testing"

	"github.com/klauspost/compress/flate"
	"github.com/klauspost/compress/gzip"
	"github.com/klauspost/compress/zlib"

	"github.com/kvikgo/kvik/internal/libdeflate"
	"github.com/kvikgo/kvik/internal/testkit/fielddata"
)

// inflateCase is a stream in a format and what it decodes to (nil: a
// stream the decoder must refuse or find corrupt, without touching
// memory outside its buffers).
type inflateCase struct {
	zstdCase
	format Format
}

// deflateStream compresses data in format at level (flate's: -2 Huffman
// only, 0 stored, 1-9) with klauspost/compress, or with the standard
// library's encoder (other block choices) when std is set.
func deflateStream(t testing.TB, format Format, level int, std bool, data []byte) []byte {
	var b bytes.Buffer
	var w io.WriteCloser
	var err error
	switch {
	case std && format == Raw:
		w, err = stdflate.NewWriter(&b, level)
	case format == Raw:
		w, err = flate.NewWriter(&b, level)
	case format == Gzip:
		var g *gzip.Writer
		if g, err = gzip.NewWriterLevel(&b, level); err == nil {
			g.Name = []string{"", "chunk.bin"}[len(data)%2] // an FNAME field, sometimes
			w = g
		}
	default:
		w, err = zlib.NewWriterLevel(&b, level)
	}
	if err != nil {
		t.Fatal(err)
	}
	// Written in pieces: flushes between them end blocks where they fall.
	for rest := data; len(rest) > 0; {
		k := min(len(rest), 1+len(data)/3)
		w.Write(rest[:k])
		rest = rest[k:]
	}
	if err := w.Close(); err != nil {
		t.Fatal(err)
	}
	return b.Bytes()
}

// inflateCases encodes random data (zstdData's kinds) in each format at
// each level, plus streams cut, flipped and given trailing bytes, and
// destinations too small.
func inflateCases(t testing.TB, rng *rand.Rand, count int) []inflateCase {
	var cases []inflateCase
	levels := []int{-2, 0, 1, 2, 4, 6, 9}
	for i := range count {
		n := rng.IntN(300 << 10)
		if i%4 == 0 {
			n = rng.IntN(300)
		}
		data := zstdData(rng, n)
		format := Format(i % 3)
		s := deflateStream(t, format, levels[rng.IntN(len(levels))], format == Raw && rng.IntN(2) == 0, data)
		cases = append(cases, inflateCase{zstdCase{frame: s, want: data, cap: n}, format})
		if i%8 == 0 { // a destination too small
			cases = append(cases, inflateCase{zstdCase{frame: s, cap: max(0, n-1-rng.IntN(100))}, format})
		}
		if i%2 == 0 {
			cases = append(cases, inflateCase{zstdCase{frame: mutate(rng, s), cap: n}, format})
		}
		if i%16 == 0 { // trailing bytes (a second gzip member): the CPU's
			cases = append(cases, inflateCase{zstdCase{frame: append(append([]byte(nil), s...), s...), cap: 2 * n}, format})
		}
	}
	return cases
}

// mutate returns s with one to eight bytes changed, cut short, or both.
func mutate(rng *rand.Rand, s []byte) []byte {
	c := append([]byte(nil), s...)
	if rng.IntN(4) == 0 && len(c) > 1 {
		c = c[:1+rng.IntN(len(c)-1)]
	}
	for range 1 + rng.IntN(8) {
		c[rng.IntN(len(c))] ^= byte(1 + rng.IntN(255))
	}
	return c
}

// hostInflate builds testdata/inflate_host.c (inflate.cu for the CPU).
func hostInflate(t *testing.T) string {
	return hostBuild(t, "inflate_host")
}

// TestInflateModel runs inflate.cu's decoder on the CPU
// (testdata/inflate_host.c, under AddressSanitizer) over raw, gzip and
// zlib streams of random data that klauspost/compress and the standard
// library encoded, compared with the data; streams it must refuse and
// corrupted ones end in an error code or decode to what the reference
// decoders (libdeflate where it loads, and klauspost/compress) decode,
// without a read or write outside their buffers.
func TestInflateModel(t *testing.T) {
	bin := hostInflate(t)
	sizes, err := exec.Command(bin, "sizes").Output()
	if want := fmt.Sprintf("%d\n", frameJobSize); err != nil || string(sizes) != want {
		t.Fatalf("C's struct size %q (%v), the Go side's %q", sizes, err, want)
	}
	rng := rand.New(rand.NewPCG(19, 51))
	t.Run("streams", func(t *testing.T) { inflateModel(t, bin, inflateCases(t, rng, 240)) })
	t.Run("mutated", func(t *testing.T) { inflateModel(t, bin, inflateMutations(t, rng, 6000)) })
}

// inflateMutations returns n streams of inflateCases' valid ones (and of
// a megabyte of zarrbench's field in each format), each with bytes
// changed or cut short: the decoder must refuse each, or decode it to
// the reference decoders' bytes.
func inflateMutations(t *testing.T, rng *rand.Rand, n int) []inflateCase {
	var valid []inflateCase
	for _, c := range inflateCases(t, rng, 45) {
		if c.want != nil && len(c.frame) > 8 {
			valid = append(valid, c)
		}
	}
	field := fielddata.Float32(512, 512, 2)
	for f := range Format(3) {
		valid = append(valid, inflateCase{zstdCase{frame: deflateStream(t, f, 5, false, field), want: field, cap: len(field)}, f})
	}
	cases := make([]inflateCase, n)
	for i := range cases {
		v := valid[rng.IntN(len(valid))]
		cases[i] = inflateCase{zstdCase{frame: mutate(rng, v.frame), cap: v.cap}, v.format}
	}
	return cases
}

// referenceInflate decodes c's stream as the CPU would: with libdeflate
// where it loads (its result compared with klauspost/compress's, which
// must agree), else klauspost/compress; nil and an error where corrupt.
func referenceInflate(c inflateCase) ([]byte, error) {
	var r io.Reader
	var err error
	src := bytes.NewReader(c.frame)
	switch c.format {
	case Raw:
		r = flate.NewReader(src)
	case Gzip:
		var g *gzip.Reader
		if g, err = gzip.NewReader(src); err == nil {
			g.Multistream(false)
			r = g
		}
	default:
		r, err = zlib.NewReader(src)
	}
	var got []byte
	if err == nil {
		got, err = io.ReadAll(io.LimitReader(r, int64(c.cap)+1))
	}
	if err == nil && (len(got) > c.cap || src.Len() > 0) {
		err = fmt.Errorf("%d bytes decoded, %d left over", len(got), src.Len())
	}
	if libdeflate.Load() == nil {
		dst := make([]byte, c.cap)
		dec := []func(dst, src []byte) (int, int, error){libdeflate.DeflateDecompress, libdeflate.GzipDecompress, libdeflate.ZlibDecompress}[c.format]
		in, out, lerr := dec(dst, c.frame)
		if lerr == nil && in != len(c.frame) {
			lerr = fmt.Errorf("%d of %d bytes read", in, len(c.frame))
		}
		if (lerr == nil) != (err == nil) || err == nil && !bytes.Equal(got, dst[:out]) {
			return nil, fmt.Errorf("libdeflate (%v) and klauspost/compress (%v) disagree", lerr, err)
		}
	}
	return got, err
}

func inflateModel(t *testing.T, bin string, cases []inflateCase) {
	var in bytes.Buffer
	for _, c := range cases {
		writeInflateJob(&in, c)
	}
	out := runHost(t, bin, &in, len(cases))
	decoded, refused := 0, 0
	for i, c := range cases {
		got := out[i]
		if got != nil {
			// The model never accepts what the CPU would call corrupt.
			if ref, err := referenceInflate(c); err != nil || !bytes.Equal(ref, got) {
				t.Errorf("case %d (%v): the model decodes %d bytes; the reference: %d bytes, %v", i, c.format, len(got), len(ref), err)
			}
		}
		if got == nil {
			refused++
			if c.want != nil {
				t.Errorf("case %d (%v, %d bytes from %d): refused", i, c.format, len(c.want), len(c.frame))
			}
			continue
		}
		decoded++
		if c.want != nil && !bytes.Equal(got, c.want) {
			t.Errorf("case %d: %d bytes decoded, want %d, differing", i, len(got), len(c.want))
		}
	}
	t.Logf("%d streams: %d decoded, %d refused", len(cases), decoded, refused)
}
