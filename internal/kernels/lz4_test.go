package kernels

import (
	"bytes"
	"encoding/binary"
	"fmt"
	"io"
	"math/rand/v2"
	"os"
	"os/exec"
	"runtime"
	"strings"
	"testing"
	"time"
	"unsafe"

	"github.com/pierrec/lz4/v4"

	"github.com/kvikgo/kvik/cuda"
	"github.com/kvikgo/kvik/internal/liblz4"
	"github.com/kvikgo/kvik/internal/testkit/fielddata"
	"github.com/kvikgo/kvik/internal/testkit/gputest"
)

// bloscCase is a chunk to encode: rows of width bytes pitch apart in
// src, in blocks of bs bytes; data is the chunk's bytes gathered.
type bloscCase struct {
	name                     string
	rows, width, pitch       int
	bs, ts                   int
	shuffle                  bool
	fill                     uint64
	src, data                []byte
	compressible, differsNot bool
}

// bloscCases returns n chunks of random shapes (rows of a wider region,
// one run, a short last block, element sizes 1 to 8, shuffled or not)
// holding a smooth float32 field plus noise, random bytes, the fill
// value all through (but for one element in some), or runs of bytes.
func bloscCases(rng *rand.Rand, n int) []bloscCase {
	field := fielddata.Float32(512, 4096, 3)
	var cases []bloscCase
	for i := range n {
		ts := []int{1, 2, 4, 8}[rng.IntN(4)]
		width := ts * (1 + rng.IntN(2048/ts))
		rows := 1 + rng.IntN(300)
		if i%7 == 0 {
			rows = 1
		}
		pitch := width + rng.IntN(3)*ts*rng.IntN(64)
		size := rows * width
		bs := ts * (1 + rng.IntN(max(1, size/ts)))
		if i%3 == 0 {
			bs = ts * (1 + rng.IntN(128<<10/ts))
		}
		c := bloscCase{rows: rows, width: width, pitch: pitch, bs: bs, ts: ts, shuffle: rng.IntN(4) != 0}
		c.src = make([]byte, pitch*(rows-1)+width)
		var fill [8]byte
		for k := range ts {
			fill[k] = byte(rng.IntN(3) * 0x55)
		}
		c.fill = binary.LittleEndian.Uint64(fill[:])
		switch kind := i % 5; kind {
		case 0, 1: // the field: compresses
			off := rng.IntN(len(field) - len(c.src))
			copy(c.src, field[off:])
			c.name, c.compressible = "field", true
		case 2: // random bytes: a plain copy
			for k := range c.src {
				c.src[k] = byte(rng.Uint32())
			}
			c.name = "random"
		case 3: // the fill value, but for one element now and then
			for k := range c.src {
				c.src[k] = fill[k%pitch%ts]
			}
			c.name, c.differsNot = "fill", true
			if rng.IntN(2) == 0 {
				e := rng.IntN(size / ts)
				at := e*ts/width*pitch + e*ts%width
				c.src[at] ^= 0x80
				c.name, c.differsNot = "fill+1", false
			}
		case 4: // runs of a byte, of random lengths
			for k := 0; k < len(c.src); {
				r := 1 + rng.IntN(300)
				v := byte(rng.Uint32())
				for ; r > 0 && k < len(c.src); r-- {
					c.src[k] = v
					k++
				}
			}
			c.name = "runs"
		}
		c.data = make([]byte, 0, size)
		for r := range rows {
			c.data = append(c.data, c.src[r*pitch:r*pitch+width]...)
		}
		cases = append(cases, c)
	}
	return cases
}

// blockSize is the block size of c as BloscBatch.Encode sets it.
func (c bloscCase) blockSize() int {
	bs := min(c.bs, c.rows*c.width)
	return bs - bs%c.ts
}

// decodeBlosc decodes a Blosc 1 chunk of unsplit LZ4 blocks as c-blosc
// documents the format, with pierrec/lz4 for the blocks, and checks its
// header against c.
func decodeBlosc(c bloscCase, enc []byte) ([]byte, error) {
	size := c.rows * c.width
	if len(enc) < 16 {
		return nil, fmt.Errorf("%d bytes", len(enc))
	}
	le := binary.LittleEndian
	flags, bs := enc[2], int(le.Uint32(enc[8:]))
	wantFlags := byte(bloscDontSplit | bloscLZ4)
	if c.shuffle && c.ts > 1 {
		wantFlags |= bloscShuffle
	}
	switch {
	case enc[0] != 2 || enc[1] != 1 || int(enc[3]) != c.ts || flags&^2 != wantFlags:
		return nil, fmt.Errorf("header % x, flags %#x not %#x", enc[:4], flags, wantFlags)
	case int(le.Uint32(enc[4:])) != size || bs != c.blockSize() || int(le.Uint32(enc[12:])) != len(enc):
		return nil, fmt.Errorf("header: %d bytes in blocks of %d, %d stored (want %d, %d, %d)", le.Uint32(enc[4:]), bs, le.Uint32(enc[12:]), size, c.blockSize(), len(enc))
	}
	if flags&2 != 0 {
		if len(enc) != 16+size {
			return nil, fmt.Errorf("a plain copy of %d bytes", len(enc)-16)
		}
		return enc[16:], nil
	}
	if len(enc) >= 16+size {
		return nil, fmt.Errorf("%d bytes where a plain copy takes %d", len(enc), 16+size)
	}
	out := make([]byte, size)
	nb := (size + bs - 1) / bs
	for j := range nb {
		if 16+4*j+4 > len(enc) {
			return nil, fmt.Errorf("block %d: no offset", j)
		}
		at := int(le.Uint32(enc[16+4*j:]))
		if at+4 > len(enc) {
			return nil, fmt.Errorf("block %d at %d", j, at)
		}
		z := int(le.Uint32(enc[at:]))
		blen := min(bs, size-j*bs)
		if at+4+z > len(enc) || z > blen {
			return nil, fmt.Errorf("block %d: %d bytes at %d", j, z, at)
		}
		block := out[j*bs : j*bs+blen]
		src := enc[at+4 : at+4+z]
		if z == blen {
			copy(block, src)
		} else if n, err := lz4.UncompressBlock(src, block); err != nil || n != blen {
			return nil, fmt.Errorf("block %d: %d of %d bytes: %v", j, n, blen, err)
		}
		if flags&bloscShuffle != 0 {
			m := blen / c.ts
			un := make([]byte, blen)
			for i := range m {
				for k := range c.ts {
					un[i*c.ts+k] = block[k*m+i]
				}
			}
			copy(block, un)
		}
	}
	return out, nil
}

// checkBlosc checks enc and differs, c encoded, against c's data: lz4
// reports the bytes liblz4 (else pierrec/lz4) takes for the blocks.
func checkBlosc(t *testing.T, c bloscCase, enc []byte, differs bool) {
	t.Helper()
	got, err := decodeBlosc(c, enc)
	if err != nil {
		t.Fatalf("%s %dx%d (pitch %d, ts %d, bs %d, shuffle %v): %v", c.name, c.rows, c.width, c.pitch, c.ts, c.bs, c.shuffle, err)
	}
	if i := firstDiff(got, c.data); i >= 0 {
		t.Fatalf("%s %dx%d (pitch %d, ts %d, bs %d): byte %d of %d differs", c.name, c.rows, c.width, c.pitch, c.ts, c.bs, i, len(c.data))
	}
	if differs == c.differsNot {
		t.Fatalf("%s: differs from the fill value %v", c.name, differs)
	}
}

// TestBloscLZ4Model runs lz4.cu's encoder on the CPU (testdata/lz4_host.c,
// under AddressSanitizer: one lane, a window of one position) over
// chunks of random shapes and data, decodes what it writes with a
// decoder of the format written here on pierrec/lz4, and compares it
// with the chunks; the field's chunks must shrink to no more than 1.05
// times what LZ4 itself makes of their blocks.
func TestBloscLZ4Model(t *testing.T) {
	bin := hostBuild(t, "lz4_host")
	sizes, err := exec.Command(bin, "sizes").Output()
	if want := fmt.Sprintf("%d\n", bloscChunkSize); err != nil || string(sizes) != want {
		t.Fatalf("C's struct size %q (%v), the Go side's %q", sizes, err, want)
	}
	rng := rand.New(rand.NewPCG(40, 4))
	cases := bloscCases(rng, 400)
	var in bytes.Buffer
	for _, c := range cases {
		flags := uint64(0)
		if c.shuffle && c.ts > 1 {
			flags = bloscShuffle
		}
		binary.Write(&in, binary.LittleEndian, [7]uint64{uint64(c.rows), uint64(c.width), uint64(c.pitch), uint64(c.blockSize()), uint64(c.ts), flags | bloscDontSplit | bloscLZ4, c.fill})
		in.Write(c.src)
	}
	cmd := exec.Command(bin)
	cmd.Stdin = &in
	cmd.Stderr = os.Stderr
	out, err := cmd.Output()
	if err != nil {
		t.Fatalf("the encoder failed: %v", err)
	}
	r := bytes.NewReader(out)
	var ours, lz4s int
	for _, c := range cases {
		var h [2]uint64
		if err := binary.Read(r, binary.LittleEndian, &h); err != nil {
			t.Fatal(err)
		}
		enc := make([]byte, h[0])
		if _, err := io.ReadFull(r, enc); err != nil {
			t.Fatal(err)
		}
		checkBlosc(t, c, enc, h[1] != 0)
		if c.compressible {
			ours += len(enc)
			lz4s += lz4Size(t, c)
		}
	}
	t.Logf("the field's chunks: %d bytes, LZ4's blocks %d (%.3fx)", ours, lz4s, float64(ours)/float64(lz4s))
	if float64(ours) > 1.05*float64(lz4s) {
		t.Errorf("the field's chunks take %d bytes, %.3fx LZ4's", ours, float64(ours)/float64(lz4s))
	}
}

// lz4Size returns the bytes of c's blocks (shuffled as c asks) as LZ4
// compresses them (liblz4 at acceleration 5, Blosc's at its level 5 and
// zarr's default, else pierrec/lz4), each
// stored as it is where LZ4 does not shrink it, with Blosc's 16-byte
// header and 8 bytes a block.
func lz4Size(t *testing.T, c bloscCase) int {
	bs := c.blockSize()
	total := 16
	for start := 0; start < len(c.data); start += bs {
		block := c.data[start:min(start+bs, len(c.data))]
		if c.shuffle {
			block = shuffle(block, c.ts)
		}
		buf := make([]byte, lz4.CompressBlockBound(len(block)))
		n, err := liblz4.CompressFast(buf, block, 5)
		if err != nil {
			n, err = lz4.CompressBlock(block, buf, nil)
		}
		if err != nil {
			t.Fatal(err)
		}
		if n == 0 || n >= len(block) {
			n = len(block)
		}
		total += 8 + n
	}
	return min(total, 16+len(c.data))
}

// TestBloscLZ4 encodes TestBloscLZ4Model's chunks on the GPU in batches
// of random sizes, each chunk's rows in device memory as a region's
// are, and decodes and compares them as that test does; the field's
// chunks must shrink to no more than 1.10 times what LZ4 makes of their
// blocks (the lanes look at 32 positions at once).
func TestBloscLZ4(t *testing.T) {
	ctx := gputest.Primary(t, 0)
	if err := cuda.WithContext(ctx, func() error { gpuBlosc(t, ctx); return nil }); err != nil {
		t.Fatal(err)
	}
}

// gpuBlosc is TestBloscLZ4 in ctx, current.
func gpuBlosc(t *testing.T, ctx cuda.Context) {
	k, err := LoadBloscLZ4(ctx)
	if err != nil {
		t.Fatal(err)
	}
	rng := rand.New(rand.NewPCG(40, 4))
	cases := bloscCases(rng, 400)
	s, err := cuda.StreamCreate(cuda.StreamNonBlocking)
	if err != nil {
		t.Fatal(err)
	}
	defer cuda.StreamDestroy(s)
	var ours, lz4s int
	for len(cases) > 0 {
		n := min(len(cases), 1+rng.IntN(60))
		batch := cases[:n]
		cases = cases[n:]
		// One batch's chunks share a block size, as an array's do: a
		// multiple of every type size.
		bs := max(8, batch[0].bs-batch[0].bs%8)
		most := 0
		for i := range batch {
			batch[i].bs = bs
			most = max(most, batch[i].rows*batch[i].width)
		}
		b, err := k.NewBatch(n, most, bs)
		if err != nil {
			t.Fatal(err)
		}
		var srcs []*cuda.DeviceBuffer
		chunks := make([]BloscChunk, n)
		for i, c := range batch {
			d, err := cuda.MemAlloc(len(c.src))
			if err != nil {
				t.Fatal(err)
			}
			srcs = append(srcs, d)
			if err := cuda.MemcpyHtoD(d.Ptr(), c.src); err != nil {
				t.Fatal(err)
			}
			chunks[i] = BloscChunk{Src: d.Ptr(), Rows: c.rows, Width: c.width, Pitch: c.pitch, TypeSize: c.ts, Shuffle: c.shuffle, Fill: c.fill}
		}
		res, err := b.Encode(s, chunks)
		if err != nil {
			t.Fatal(err)
		}
		for i, c := range batch {
			enc := make([]byte, res[i].Size)
			if err := cuda.MemcpyDtoH(enc, res[i].Out); err != nil {
				t.Fatal(err)
			}
			checkBlosc(t, c, enc, res[i].Differs)
			if c.compressible {
				ours += len(enc)
				lz4s += lz4Size(t, c)
			}
			back := make([]byte, len(c.src))
			if err := cuda.MemcpyDtoH(back, srcs[i].Ptr()); err != nil || !bytes.Equal(back, c.src) {
				t.Fatalf("chunk %d's source changed (%v)", i, err)
			}
			srcs[i].Close()
		}
		b.Close()
	}
	t.Logf("the field's chunks: %d bytes, LZ4's blocks %d (%.3fx)", ours, lz4s, float64(ours)/float64(lz4s))
	if float64(ours) > 1.10*float64(lz4s) {
		t.Errorf("the field's chunks take %d bytes, %.3fx LZ4's", ours, float64(ours)/float64(lz4s))
	}
}

// BenchmarkBloscLZ4 encodes zarrbench's 1 GiB float32 field (a smooth
// field plus noise, 16384 x 16384) in 1 MiB chunks of 512 x 512, byte-
// shuffled blocks of 256 KiB, on every core (the shuffle, then liblz4 at
// Blosc level 5's acceleration, else pierrec/lz4) and on the GPU from
// device memory, its chunks' rows 64 KiB apart, in launches of 1024,
// 256 and 64 chunks, in the same run: GB/s of chunk bytes.
func BenchmarkBloscLZ4(b *testing.B) {
	const side, cs, bs = 16384, 512, 256 << 10
	const chunk, count = 4 * cs * cs, (side / cs) * (side / cs)
	field := fielddata.Float32(side, side, 1)
	at := func(i int) int { return (i/(side/cs)*cs*side + i%(side/cs)*cs) * 4 }
	native := liblz4.Load() == nil
	stored := make([]int, count)
	benchCPU(b, count, chunk, func(i int) error {
		block, buf := make([]byte, bs), make([]byte, lz4.CompressBlockBound(bs))
		stored[i] = 16
		for j := range chunk / bs {
			rows := bs / (4 * cs)
			for r := range rows {
				row := field[at(i)+(j*rows+r)*4*side:][:4*cs]
				for e := range cs {
					for k := range 4 {
						block[k*(bs/4)+r*cs+e] = row[4*e+k]
					}
				}
			}
			var n int
			var err error
			if native {
				n, err = liblz4.CompressFast(buf, block, 5)
			} else {
				n, err = lz4.CompressBlock(block, buf, nil)
			}
			if err != nil {
				return err
			}
			stored[i] += 8 + n
		}
		return nil
	})
	b.Logf("CPU (%s): %.2fx compressed", map[bool]string{true: "liblz4", false: "pierrec/lz4"}[native], float64(count*chunk)/float64(sum(stored)))
	b.Run("gpu", func(b *testing.B) {
		ctx := gputest.Primary(b, 0)
		if err := cuda.WithContext(ctx, func() error { benchBlosc(b, ctx, field, at); return nil }); err != nil {
			b.Fatal(err)
		}
	})
}

// benchBlosc is BenchmarkBloscLZ4's GPU half in ctx, current: field's
// chunk i at at(i).
func benchBlosc(b *testing.B, ctx cuda.Context, field []byte, at func(int) int) {
	k, err := LoadBloscLZ4(ctx)
	if err != nil {
		b.Fatal(err)
	}
	src, err := cuda.MemAlloc(len(field))
	if err != nil {
		b.Fatal(err)
	}
	defer src.Close()
	if err := cuda.MemcpyHtoD(src.Ptr(), field); err != nil {
		b.Fatal(err)
	}
	s, err := cuda.StreamCreate(cuda.StreamNonBlocking)
	if err != nil {
		b.Fatal(err)
	}
	defer cuda.StreamDestroy(s)
	builds := map[string]*BloscLZ4{"lz4.ptx": k}
	if v := os.Getenv("KVIK_LZ4_PTX"); v != "" {
		for _, nv := range strings.Split(v, ",") {
			name, path, _ := strings.Cut(nv, "=")
			var fs [3]cuda.Function
			for i, f := range []string{"bshuffle", "bcompress", "bpack"} {
				var unload func()
				if fs[i], unload, err = variant(path, f); err != nil {
					b.Fatal(err)
				}
				defer unload()
			}
			builds[name] = &BloscLZ4{fs[0], fs[1], fs[2]}
		}
	}
	for name, k := range builds {
		for _, per := range []int{1024, 256, 64} {
			for _, bs := range []int{256 << 10, 64 << 10} {
				if name != "lz4.ptx" && (per != 1024 || bs != 256<<10) {
					continue
				}
				benchBloscLaunches(b, name, k, src, s, per, bs, at)
			}
		}
	}
}

// benchBloscLaunches is BenchmarkBloscLZ4's GPU half with k in launches
// of per chunks.
func benchBloscLaunches(b *testing.B, name string, k *BloscLZ4, src *cuda.DeviceBuffer, s cuda.Stream, per, bs int, at func(int) int) {
	const side, cs = 16384, 512
	const chunk, count = 4 * cs * cs, (side / cs) * (side / cs)
	ctx, err := cuda.CtxGetCurrent()
	if err != nil {
		b.Fatal(err)
	}
	b.Run(fmt.Sprintf("%s/%d/block=%dK", name, per, bs>>10), func(b *testing.B) {
		runtime.LockOSThread() // the context current on this goroutine's thread
		defer runtime.UnlockOSThread()
		if err := cuda.CtxPushCurrent(ctx); err != nil {
			b.Fatal(err)
		}
		defer cuda.CtxPopCurrent()
		batch, err := k.NewBatch(per, chunk, bs)
		if err != nil {
			b.Fatal(err)
		}
		defer batch.Close()
		chunks := make([]BloscChunk, count)
		for i := range chunks {
			chunks[i] = BloscChunk{Src: src.Ptr() + cuda.DevicePtr(at(i)), Rows: cs, Width: 4 * cs, Pitch: 4 * side, TypeSize: 4, Shuffle: true}
		}
		b.SetBytes(int64(count * chunk))
		var stored int
		for b.Loop() {
			stored = 0
			for i := 0; i < count; i += per {
				res, err := batch.Encode(s, chunks[i:min(i+per, count)])
				if err != nil {
					b.Fatal(err)
				}
				for _, r := range res {
					stored += r.Size
				}
			}
		}
		b.Logf("%.2fx compressed", float64(count*chunk)/float64(stored))
		if per == 1024 {
			bloscPhases(b, batch, s, chunks[:per], chunk/bs)
		}
	})
}

// bloscPhases times each of the three kernels of a launch of chunks
// (already encoded once: their descriptors in place) on its own.
func bloscPhases(b *testing.B, batch *BloscBatch, s cuda.Stream, chunks []BloscChunk, perChunk int) {
	nb := perChunk * len(chunks)
	desc := batch.mem.Ptr()
	blocks := desc + cuda.DevicePtr(batch.n*bloscChunkSize)
	p := &struct {
		desc, blocks cuda.DevicePtr
		n, nb        uint32
	}{desc, blocks, uint32(len(chunks)), uint32(nb)}
	for _, k := range []struct {
		name string
		f    cuda.Function
		grid cuda.Dim3
		thr  uint32
		args []unsafe.Pointer
	}{
		{"shuffle", batch.k.shuffle, cuda.Dim3{X: 1 << 18 / (16 * blockThreads), Y: uint32(len(chunks))}, blockThreads, []unsafe.Pointer{unsafe.Pointer(&p.desc)}},
		{"compress", batch.k.compress, cuda.Dim3{X: uint32(nb)}, 32, []unsafe.Pointer{unsafe.Pointer(&p.desc), unsafe.Pointer(&p.blocks), unsafe.Pointer(&p.nb)}},
		{"pack", batch.k.pack, cuda.Dim3{X: uint32(len(chunks))}, 32, []unsafe.Pointer{unsafe.Pointer(&p.desc), unsafe.Pointer(&p.n)}},
	} {
		t0 := time.Now()
		for range 3 {
			if err := cuda.LaunchKernel(k.f, k.grid, cuda.Dim3{X: k.thr}, 0, s, k.args); err != nil {
				b.Fatal(err)
			}
		}
		if err := cuda.StreamSynchronize(s); err != nil {
			b.Fatal(err)
		}
		b.Logf("%s: %.2f ms", k.name, float64(time.Since(t0).Microseconds())/3000)
	}
}

// sum returns the sum of v.
func sum(v []int) int {
	t := 0
	for _, x := range v {
		t += x
	}
	return t
}
