package zarr

import (
	"bytes"
	"errors"
	"fmt"
	"math/rand/v2"
	"testing"
)

// TestShuffles checks the byte and bit shuffles, both ways, against
// element-by-element and bit-by-bit versions written from the format's
// definition, for element sizes with and without a specialised loop and
// blocks with trailing bytes, then that unshuffling undoes shuffling.
func TestShuffles(t *testing.T) {
	rng := rand.New(rand.NewPCG(5, 6))
	for _, ts := range []int{1, 2, 3, 4, 5, 8, 12, 16} {
		for _, n := range []int{0, 1, 7, 8, 9, 64, 1000, 4096 + 3} {
			src := make([]byte, n*ts+rng.IntN(ts))
			for i := range src {
				src[i] = byte(rng.Uint32())
			}
			for _, c := range []struct {
				name      string
				fast, ref func(dst, src []byte, ts int)
			}{
				{"shuffle", shuffle, shuffleRef}, {"unshuffle", unshuffle, unshuffleRef},
				{"bitShuffle", bitShuffle, bitShuffleRef}, {"bitUnshuffle", bitUnshuffle, bitUnshuffleRef},
			} {
				got, want := make([]byte, len(src)), make([]byte, len(src))
				c.fast(got, src, ts)
				c.ref(want, src, ts)
				if !bytes.Equal(got, want) {
					t.Fatalf("%s of %d bytes, typesize %d differs from the definition", c.name, len(src), ts)
				}
			}
			for _, way := range [][2]func(dst, src []byte, ts int){{shuffle, unshuffle}, {bitShuffle, bitUnshuffle}} {
				mid, back := make([]byte, len(src)), make([]byte, len(src))
				way[0](mid, src, ts)
				way[1](back, mid, ts)
				if !bytes.Equal(back, src) {
					t.Fatalf("typesize %d, %d bytes: unshuffling does not undo shuffling", ts, len(src))
				}
			}
		}
	}
}

// The definitions: byte k of element i at k*n+i; bit j of byte b of
// element e at bit e%8 of byte e/8 of row 8*b+j.

// unshuffle undoes a byte shuffle: src holds byte k of every element, then
// byte k+1; trailing bytes that do not fill an element are unshuffled.
func unshuffleRef(dst, src []byte, ts int) {
	n := len(src) / ts
	for k := 0; k < ts; k++ {
		row := src[k*n : (k+1)*n]
		for i, b := range row {
			dst[i*ts+k] = b
		}
	}
	copy(dst[n*ts:], src[n*ts:])
}

func shuffleRef(dst, src []byte, ts int) {
	n := len(src) / ts
	for k := 0; k < ts; k++ {
		row := dst[k*n : (k+1)*n]
		for i := range row {
			row[i] = src[i*ts+k]
		}
	}
	copy(dst[n*ts:], src[n*ts:])
}

// bitUnshuffle undoes Blosc's bit shuffle: for n elements (a multiple of
// 8), bit row r = 8*byte+bit holds that bit of that byte of every
// element, element e at bit e%8 of row byte e/8. Blocks whose element
// count is not a multiple of 8 are stored as they are.
func bitUnshuffleRef(dst, src []byte, ts int) {
	n := len(src) / ts
	if n%8 != 0 {
		copy(dst, src)
		return
	}
	clear(dst[:n*ts])
	rowLen := n / 8
	for b := 0; b < ts; b++ {
		for bit := 0; bit < 8; bit++ {
			row := src[(b*8+bit)*rowLen : (b*8+bit+1)*rowLen]
			for m, v := range row {
				for j := 0; v != 0; j, v = j+1, v>>1 {
					if v&1 != 0 {
						dst[(m*8+j)*ts+b] |= 1 << bit
					}
				}
			}
		}
	}
	copy(dst[n*ts:], src[n*ts:])
}

func bitShuffleRef(dst, src []byte, ts int) {
	n := len(src) / ts
	if n%8 != 0 {
		copy(dst, src)
		return
	}
	clear(dst[:n*ts])
	rowLen := n / 8
	for e := 0; e < n; e++ {
		for b := 0; b < ts; b++ {
			v := src[e*ts+b]
			for bit := 0; bit < 8; bit++ {
				if v>>bit&1 != 0 {
					dst[(b*8+bit)*rowLen+e/8] |= 1 << (e % 8)
				}
			}
		}
	}
	copy(dst[n*ts:], src[n*ts:])
}

// BenchmarkShuffles times the byte shuffles of a 1 MiB block both ways
// for 4- and 8-byte elements.
func BenchmarkShuffles(b *testing.B) {
	src := make([]byte, 1<<20)
	rng := rand.New(rand.NewPCG(1, 2))
	for i := range src {
		src[i] = byte(rng.Uint32())
	}
	dst := make([]byte, len(src))
	for _, ts := range []int{4, 8} {
		for name, f := range map[string]func(dst, src []byte, ts int){"shuffle": shuffle, "unshuffle": unshuffle} {
			b.Run(fmt.Sprintf("%s/%d", name, ts), func(b *testing.B) {
				b.SetBytes(int64(len(src)))
				for b.Loop() {
					f(dst, src, ts)
				}
			})
		}
	}
}

// TestBloscEncodeRuns checks that a chunk encoded from the runs of a
// region it lies in (rows apart) is stored byte for byte as the same
// chunk gathered first, for each shuffle, element sizes with and without
// a specialised loop, block sizes that do and do not hold whole elements,
// and chunks whose rows split blocks anywhere; and that it decodes back.
func TestBloscEncodeRuns(t *testing.T) {
	rng := rand.New(rand.NewPCG(7, 8))
	for _, ts := range []int{1, 2, 3, 4, 8, 12} {
		for _, shuf := range []int{0, 1, 2} {
			for _, bs := range []int{0, 64, 1000 + rng.IntN(ts), 4096} {
				for _, cname := range []string{"lz4", "zstd"} {
					c := bloscCodec{cname: cname, clevel: 5, shuffle: shuf, typesize: ts, blocksize: bs}
					rows, cols := 1+rng.IntN(40), 1+rng.IntN(300)
					stride := cols + rng.IntN(50) // region row, in elements
					region := make([]byte, (rows*stride+rng.IntN(8))*ts)
					for i := range region {
						region[i] = byte(i/ts%7) + byte(rng.IntN(3)) // compressible, never all zero
					}
					v := view{buf: region, shape: []int{rows, stride}, es: ts}
					src := runsOf(v.sub([]int{0, rng.IntN(stride - cols + 1)}), []int{rows, cols})
					gathered := src.appendTo(nil)
					want, err := c.encode(gathered, nil)
					if err != nil {
						t.Fatal(err)
					}
					got, err := c.encodeRuns(src, make([]byte, 0, len(gathered)))
					if err != nil {
						t.Fatal(err)
					}
					if !bytes.Equal(got, want) {
						t.Fatalf("%s ts %d shuffle %d block %d, %dx%d of %d: encoded from runs differs from encoded gathered", cname, ts, shuf, bs, rows, cols, stride)
					}
					back, err := c.decode(got, nil, len(gathered))
					if err != nil || !bytes.Equal(back, gathered) {
						t.Fatalf("%s ts %d shuffle %d block %d: decodes to other bytes (%v)", cname, ts, shuf, bs, err)
					}
				}
			}
		}
	}
}

// TestBloscDecodeRuns decodes chunks of each shuffle, element size and
// block size (whole elements or not) into the rows of a region they lie
// in, rows apart, and checks the rows against the chunk and every byte
// between them untouched; a chunk of another size than the rows hold is
// ErrCorruptChunk.
func TestBloscDecodeRuns(t *testing.T) {
	rng := rand.New(rand.NewPCG(11, 12))
	for _, ts := range []int{1, 2, 3, 4, 8, 12} {
		for _, shuf := range []int{0, 1, 2} {
			for _, bs := range []int{0, 64, 1000 + rng.IntN(ts), 4096} {
				for _, cname := range []string{"lz4", "zstd", "zlib"} {
					c := bloscCodec{cname: cname, clevel: 5, shuffle: shuf, typesize: ts, blocksize: bs}
					rows, cols := 1+rng.IntN(40), 1+rng.IntN(300)
					stride := cols + rng.IntN(50)
					chunk := make([]byte, rows*cols*ts)
					for i := range chunk {
						chunk[i] = byte(i/ts%7) + byte(rng.IntN(3))
					}
					enc, err := c.encode(chunk, nil)
					if err != nil {
						t.Fatal(err)
					}
					region := make([]byte, (rows*stride+rng.IntN(8))*ts)
					for i := range region {
						region[i] = byte(rng.Uint32())
					}
					before := bytes.Clone(region)
					v := view{buf: region, shape: []int{rows, stride}, es: ts}
					col := rng.IntN(stride - cols + 1)
					dst := runsOf(v.sub([]int{0, col}), []int{rows, cols})
					if err := c.decodeRuns(enc, dst); err != nil {
						t.Fatalf("%s ts %d shuffle %d block %d: %v", cname, ts, shuf, bs, err)
					}
					for r := range rows {
						lo, hi := (r*stride+col)*ts, (r*stride+col+cols)*ts
						if !bytes.Equal(region[lo:hi], chunk[r*cols*ts:(r+1)*cols*ts]) {
							t.Fatalf("%s ts %d shuffle %d block %d, %dx%d of %d: row %d differs", cname, ts, shuf, bs, rows, cols, stride, r)
						}
						copy(region[lo:hi], before[lo:hi])
					}
					if !bytes.Equal(region, before) {
						t.Fatalf("%s ts %d shuffle %d block %d: bytes between the rows changed", cname, ts, shuf, bs)
					}
					short := runList{buf: region, runs: []int{0, len(chunk) - ts}, n: len(chunk) - ts}
					if err := c.decodeRuns(enc, short); len(chunk) > 0 && !errors.Is(err, ErrCorruptChunk) {
						t.Fatalf("%s: a chunk of %d bytes into %d: %v, want ErrCorruptChunk", cname, len(chunk), short.n, err)
					}
				}
			}
		}
	}
}

// TestShufflePlanesVector shuffles and unshuffles runs of 2-, 4- and
// 8-byte elements (those with vector code) into and out of shuffled blocks, of random sizes from random elements
// on (as a region write or read takes a chunk's rows), with the vector
// code (AVX2, where the CPU has it) and without, against the format's
// definition: byte k of element i0+i is block[k*n+i0+i]; the block's
// other bytes are left as they were.
func TestShufflePlanesVector(t *testing.T) {
	rng := rand.New(rand.NewPCG(9, 10))
	vector := vectorInterleave
	t.Cleanup(func() { vectorInterleave = vector })
	if !vector {
		t.Log("no vector code here (no AVX2, or not amd64): the 64-bit transposes only")
	}
	random := func(n int) []byte {
		b := make([]byte, n)
		for i := range b {
			b[i] = byte(rng.Uint32())
		}
		return b
	}
	for j := range 1200 {
		ts := []int{2, 4, 8}[j%3]
		n := rng.IntN(3000)
		i0 := 0
		if n > 0 {
			i0 = rng.IntN(n)
		}
		m := rng.IntN(n - i0 + 1)
		block, elems := random(ts*n), random(ts*m)
		unshuffled, shuffled := make([]byte, ts*m), bytes.Clone(block)
		for i := range m {
			for k := range ts {
				unshuffled[ts*i+k] = block[k*n+i0+i]
				shuffled[k*n+i0+i] = elems[ts*i+k]
			}
		}
		for _, v := range []bool{false, vector} {
			vectorInterleave = v
			got := make([]byte, ts*m)
			unshufflePlanes(got, block, n, i0, ts)
			if !bytes.Equal(got, unshuffled) {
				t.Fatalf("unshuffle of %d of %d %d-byte elements from %d (vector %t) differs from the definition", m, n, ts, i0, v)
			}
			got = bytes.Clone(block)
			shufflePlanes(got, n, i0, elems, ts)
			if !bytes.Equal(got, shuffled) {
				t.Fatalf("shuffle of %d of %d %d-byte elements from %d (vector %t) differs from the definition", m, n, ts, i0, v)
			}
		}
	}
}

// BenchmarkShuffleVector unshuffles and shuffles a 256 KiB block of 2-,
// 4- and 8-byte elements, with the vector code and without.
func BenchmarkShuffleVector(b *testing.B) {
	src := make([]byte, 256<<10)
	for i := range src {
		src[i] = byte(i * 7)
	}
	dst := make([]byte, len(src))
	vector := vectorInterleave
	b.Cleanup(func() { vectorInterleave = vector })
	for _, v := range []bool{false, true} {
		if v && !vector {
			continue
		}
		for _, f := range []struct {
			name string
			f    func(dst, src []byte, ts int)
		}{{"unshuffle", unshuffle}, {"shuffle", shuffle}} {
			for _, ts := range []int{2, 4, 8} {
				b.Run(fmt.Sprintf("%s/ts=%d/vector=%t", f.name, ts, v), func(b *testing.B) {
					vectorInterleave = v
					b.SetBytes(int64(len(src)))
					for b.Loop() {
						f.f(dst, src, ts)
					}
				})
			}
		}
	}
}
