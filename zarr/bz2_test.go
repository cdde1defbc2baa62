package zarr

import (
	"bytes"
	"encoding/hex"
	"errors"
	"math/rand/v2"
	"testing"
)

// numcodecsBZ2 is numcodecs 0.11's BZ2(level=9).encode of bz2Sample();
// numcodecsBZ2Zeros its encoding of 1 MiB of zeros (45 bytes).
const (
	numcodecsBZ2      = "425a683931415926535967147d000000007fffed2492496492592492492492792492592492492492492492492492492492492030011300e68d1a1a6100d30269a00c8686200d188d0c119003349b51a064d00680c4d00019068031323403d4c99342bf2a948d0d341a0d0d1a1900000006834c9a063f4f5523ffd554fd42870104002f84230c11e1130e2458d1ca2e4192654b993a7d0368d2a752ad638f42ba362ddcbb7afe0c38b265493cd9f4695356bd9b776fe1c55597e4c33cfa35d7b77f1e7d7b17c6dcfaebdf9f7002101b8dc6e371b8dc6e371ff5ac626188e2388e23f0b58c4c32b58a30a1a1a1a1a1a1a1a1a1a1a1a1a1a1a1d0b58e65ac519943434343d0b07fed61c37877872b58c82d21c083060c183060c183060c183060c183060c183060c183060c183060c183060c183060c18390ef8bb9229c2848338a3e8000"
	numcodecsBZ2Zeros = "425a683931415926535938571ce50008084000c0040008200030cc0529a60806c4201e2ee48a70a12070ae39ca"
)

// bz2Sample is the input of numcodecsBZ2: runs of seven bytes, then a
// phrase repeated.
func bz2Sample() []byte {
	var b []byte
	for i := range 600 {
		b = append(b, byte((i/7)*3%251))
	}
	return append(b, bytes.Repeat([]byte("zarr-bz2 "), 12)...)
}

// TestBZ2Codec decodes numcodecs' BZ2 chunks: one decodes to its input,
// into a new buffer and into one of its size; 1 MiB of zeros in 45
// bytes against a limit of 4 KiB fails with ErrCorruptChunk, as do the
// chunk cut short, bit-flipped (bzip2's CRCs catch every flip that is
// not in the padding) or followed by junk, and random bytes; encoding
// fails with ErrUnsupportedCodec.
func TestBZ2Codec(t *testing.T) {
	enc, _ := hex.DecodeString(numcodecsBZ2)
	src := bz2Sample()
	for _, dst := range [][]byte{nil, make([]byte, 0, len(src))} {
		got, err := bz2Codec{}.decode(enc, dst, len(src))
		if err != nil || !bytes.Equal(got, src) {
			t.Fatalf("numcodecs' chunk: %v, %d bytes", err, len(got))
		}
	}
	zeros, _ := hex.DecodeString(numcodecsBZ2Zeros)
	if got, err := (bz2Codec{}).decode(zeros, nil, 1<<20); err != nil || len(got) != 1<<20 || bytes.Count(got, []byte{0}) != 1<<20 {
		t.Fatalf("1 MiB of zeros: %d bytes, %v", len(got), err)
	}
	if _, err := (bz2Codec{}).decode(zeros, nil, 4096); !errors.Is(err, ErrCorruptChunk) {
		t.Errorf("1 MiB of zeros against a 4 KiB limit: %v, want ErrCorruptChunk", err)
	}
	rng := rand.New(rand.NewPCG(51, 52))
	junk := make([]byte, 200)
	for i := range junk {
		junk[i] = byte(rng.Uint32())
	}
	spoiled := map[string][]byte{"cut short": enc[:len(enc)/2], "last byte gone": enc[:len(enc)-1], "junk after": append(bytes.Clone(enc), "junk"...),
		"random bytes": junk, "empty": nil}
	for k := range 20 {
		b := bytes.Clone(enc)
		b[4+rng.IntN(len(b)-5)] ^= 1 << rng.IntN(8) // not the last byte: its low bits may be padding
		spoiled["flip "+string(rune('a'+k))] = b
	}
	for name, b := range spoiled {
		if got, err := (bz2Codec{}).decode(b, nil, len(src)); !errors.Is(err, ErrCorruptChunk) && !(err == nil && bytes.Equal(got, src)) {
			t.Errorf("%s: %d bytes, %v, want ErrCorruptChunk", name, len(got), err)
		}
	}
	if _, err := (bz2Codec{}).encode(src, nil); !errors.Is(err, ErrUnsupportedCodec) {
		t.Errorf("encode: %v, want ErrUnsupportedCodec", err)
	}
}
