package zarr

import (
	"bytes"
	"encoding/binary"
	"fmt"
	"hash/crc32"
	"math/rand/v2"
	"slices"
	"strconv"
	"strings"
	"testing"

	"github.com/klauspost/compress/gzip"
	"github.com/klauspost/compress/zlib"
	"github.com/klauspost/compress/zstd"

	"github.com/kvikgo/kvik/cuda"
	"github.com/kvikgo/kvik/internal/formatkit/zarrtune"
	"github.com/kvikgo/kvik/internal/kernels"
	"github.com/kvikgo/kvik/internal/testkit/fielddata"
)

// TestDeviceZstdFallback: chunks of a plain zstd array that the GPU
// leaves to the CPU within one device read (frames with a checksum) read
// as the host read reads them, the GPU decoding the rest
// of the chunks; a corrupt chunk fails the device read with the host
// read's error; with zarrtune.CPUDecode the GPU decodes none.
func TestDeviceZstdFallback(t *testing.T) {
	ctx := needGPU(t)
	zarrtune.GPUDecodeShare.Store(1000) // every chunk row the GPU's
	defer zarrtune.GPUDecodeShare.Store(0)
	m := deviceCases["zstd-rows"]
	a, vals := newWrittenArray(t, m, 11)
	s := a.store
	zero := make([]int, len(m.Shape))
	chunk := numElements(m.ChunkShape) * m.DataType.Size
	enc, err := zstd.NewWriter(nil) // klauspost writes a checksum by default
	if err != nil {
		t.Fatal(err)
	}
	defer enc.Close()
	c0, c1 := vals[:chunk], vals[chunk:2*chunk]
	if err := s.Set(bg, a.ChunkKey([]int{0, 0}), enc.EncodeAll(c0, nil)); err != nil {
		t.Fatal(err)
	}
	if err := s.Set(bg, a.ChunkKey([]int{1, 0}), enc.EncodeAll(c1, nil)); err != nil {
		t.Fatal(err)
	}
	n := len(vals)
	buf := devAlloc(t, ctx, n)
	for _, cpu := range []bool{false, true} {
		zarrtune.CPUDecode.Store(cpu)
		before := gpuDecodedChunks.Load()
		if err := a.ReadRegionDevice(bg, zero, m.Shape, buf.Ptr()); err != nil {
			t.Fatal(err)
		}
		zarrtune.CPUDecode.Store(false)
		if got := fromDevice(t, ctx, buf.Ptr(), n); !bytes.Equal(got, vals) {
			t.Fatalf("CPUDecode %v: the device read differs from the array", cpu)
		}
		// 10 chunk rows: two left to the CPU, the last cut by the array's edge.
		if got, want := gpuDecodedChunks.Load()-before, map[bool]int64{false: 7, true: 0}[cpu]; got != want {
			t.Errorf("CPUDecode %v: the GPU decoded %d chunks, want %d", cpu, got, want)
		}
	}
	bad, err := s.Get(bg, a.ChunkKey([]int{4, 0}), nil)
	if err != nil {
		t.Fatal(err)
	}
	for i := len(bad) / 3; i < len(bad)/3+16; i++ {
		bad[i] ^= 0x5a
	}
	if err := s.Set(bg, a.ChunkKey([]int{4, 0}), bad); err != nil {
		t.Fatal(err)
	}
	// Without a checksum zstd may decode changed bytes to other bytes:
	// the device read must then read what the host read reads.
	host := make([]byte, n)
	hostErr := a.ReadRegion(bg, zero, m.Shape, host)
	devErr := a.ReadRegionDevice(bg, zero, m.Shape, buf.Ptr())
	switch {
	case hostErr == nil && devErr == nil:
		if !bytes.Equal(fromDevice(t, ctx, buf.Ptr(), n), host) {
			t.Fatal("a changed chunk: the device read differs from the host read")
		}
	case hostErr == nil || devErr == nil || hostErr.Error() != devErr.Error():
		t.Fatalf("a corrupt chunk: the device read's error %v, the host read's %v", devErr, hostErr)
	}
}

// TestDeviceGPUSplit: device reads of zstd, gzip and zlib arrays
// (chunks, inner chunks of shards) whose first rows of chunks the GPU
// decodes while the CPU
// reads the others, at shares from a row to all, over random regions,
// read what host reads read, the first chunk missing (its fill value),
// and a whole shard (a missing piece of the shard's shape, larger than
// an inner chunk's slot in the batch's memory); the GPU decodes chunks
// of the whole array wherever its share is a row or more, none of a
// read below gpuDecodeMin by default, none where device memory runs out
// (its rows read by the CPU's path), none with SetGPUDecode(false).
func TestDeviceGPUSplit(t *testing.T) {
	ctx := needGPU(t)
	defer zarrtune.GPUDecodeShare.Store(0)
	rng := rand.New(rand.NewPCG(5, 40))
	for i, name := range []string{"zstd-rows", "zstd-tiles", "sharded-zstd", "gzip-rows", "v2-zlib", "sharded"} {
		m := deviceCases[name]
		a, vals := newWrittenArray(t, m, uint64(40+i))
		zero := make([]int, len(m.Shape))
		cell := a.cellShape()
		fillBox(t, a, vals, zero, cell)
		if a.pipe.sharded() != nil { // a shard missing too, where a frame's slot is too small for it
			fillBox(t, a, vals, m.ChunkShape, m.ChunkShape)
		}
		buf := devAlloc(t, ctx, len(vals))
		// The default leaves a read this small to the CPU; out of device
		// memory, the GPU's rows are read by the CPU's path; with
		// SetGPUDecode(false) every chunk is the CPU's.
		for _, c := range []struct {
			share        int64
			noMem, noGPU bool
		}{{0, false, false}, {1000, true, false}, {1000, false, true}} {
			zarrtune.GPUDecodeShare.Store(c.share)
			gpuNoMemory.Store(c.noMem)
			a.SetGPUDecode(!c.noGPU)
			before := gpuDecodedChunks.Load()
			err := a.ReadRegionDevice(bg, zero, m.Shape, buf.Ptr())
			gpuNoMemory.Store(false)
			a.SetGPUDecode(true)
			if err != nil {
				t.Fatalf("%s, %+v: %v", name, c, err)
			}
			if !bytes.Equal(fromDevice(t, ctx, buf.Ptr(), len(vals)), vals) {
				t.Fatalf("%s, %+v: the device read differs from the array", name, c)
			}
			if n := gpuDecodedChunks.Load() - before; n != 0 {
				t.Errorf("%s, %+v: the GPU decoded %d chunks", name, c, n)
			}
		}
		for _, share := range []int64{1, 150, 300, 500, 999, 1000} {
			zarrtune.GPUDecodeShare.Store(share)
			for range 8 {
				start, stop := make([]int, len(m.Shape)), make([]int, len(m.Shape))
				for d, n := range m.Shape {
					start[d] = rng.IntN(n)
					stop[d] = start[d] + 1 + rng.IntN(n-start[d])
				}
				whole := rng.IntN(3) == 0
				if whole {
					copy(start, zero)
					copy(stop, m.Shape)
				}
				host := make([]byte, len(vals))
				size := numElements(boxCount(start, stop)) * m.DataType.Size
				if err := a.ReadRegion(bg, start, stop, host[:size]); err != nil {
					t.Fatal(err)
				}
				before := gpuDecodedChunks.Load()
				if err := a.ReadRegionDevice(bg, start, stop, buf.Ptr()); err != nil {
					t.Fatalf("%s, share %d, [%v, %v): %v", name, share, start, stop, err)
				}
				if !bytes.Equal(fromDevice(t, ctx, buf.Ptr(), size), host[:size]) {
					t.Fatalf("%s, share %d, [%v, %v): the device read differs from the host read", name, share, start, stop)
				}
				// Of the whole array, the GPU's rows hold whole chunks.
				c0 := cell[0]
				rows := (stop[0]+c0-1)/c0 - start[0]/c0
				if gpu := gpuDecodedChunks.Load() - before; whole && (int64(rows)*share+500)/1000 > 0 && gpu == 0 {
					t.Errorf("%s, share %d, [%v, %v): the GPU decoded no chunk of %d rows", name, share, start, stop, rows)
				}
			}
		}
	}
}

// TestSetGPUDecode: the GPU may decode chunks of plain zstd, gzip and
// zlib (with the kernel of their codec) and unshuffle Blosc's by
// default, neither with SetGPUDecode(false), nor chunks of other chains.
func TestSetGPUDecode(t *testing.T) {
	want := map[string]*gpuKernel{"zstd-rows": &gpuZstdKernel, "v2-zstd": &gpuZstdKernel, "sharded-zstd": &gpuZstdKernel,
		"sharded": &gpuDeflateKernel[kernels.Gzip], "gzip-rows": &gpuDeflateKernel[kernels.Gzip], "v2-zlib": &gpuDeflateKernel[kernels.Zlib]}
	for _, name := range []string{"zstd-rows", "v2-zstd", "sharded-zstd", "sharded", "gzip-rows", "v2-zlib", "blosc", "zstd", "raw-small", "v2-F-zlib"} {
		a, _ := newFilledArray(t, deviceCases[name])
		for _, on := range []bool{true, false} {
			a.SetGPUDecode(on)
			k := want[name]
			if !on {
				k = nil
			}
			if a.gpuCodec() != k || a.gpuUnshuffles() != (on && name == "blosc") {
				t.Errorf("%s, SetGPUDecode(%v): kernel %p (want %p), unshuffle %v", name, on, a.gpuCodec(), k, a.gpuUnshuffles())
			}
		}
	}
}

// fillBox writes the fill value over the box at start of a, a 2-D
// array whose elements are vals, and in vals: a cell (chunk, inner chunk
// of a shard) or a shard so filled is then missing from the store (or
// from its shard's index).
func fillBox(t *testing.T, a *Array, vals []byte, start, count []int) {
	t.Helper()
	es := a.meta.DataType.Size
	fill := chunkFill(a.pipe.fill, count)
	if err := a.WriteRegion(bg, start, []int{start[0] + count[0], start[1] + count[1]}, fill); err != nil {
		t.Fatal(err)
	}
	row := count[1] * es
	for y := range count[0] {
		copy(vals[((start[0]+y)*a.meta.Shape[1]+start[1])*es:], fill[y*row:(y+1)*row])
	}
}

// TestRemoteDeviceGPUHostile: a server sends hostile zstd frames and
// gzip and zlib streams, as a chunk of a plain array and as an inner
// chunk of a shard (its index rewritten to match), to device reads whose
// every row of chunks is the GPU's: frames cut short, with bits flipped,
// trailing bytes, two frames, a skippable frame before, a checksum, one
// that decodes to more than a chunk, garbage, nothing; streams likewise,
// with a wrong checksum or size, header fields, two members. Each device
// read reads what the host read of the same bytes reads, or fails with
// its error; the GPU decodes the other chunks.
func TestRemoteDeviceGPUHostile(t *testing.T) {
	ctx := needGPU(t)
	zarrtune.GPUDecodeShare.Store(1000)
	defer zarrtune.GPUDecodeShare.Store(0)
	rng := rand.New(rand.NewPCG(3, 40))
	zstdLE := []Codec{{Name: "bytes"}, {Name: "zstd", Configuration: map[string]any{"level": 3}}}
	gzipLE := []Codec{{Name: "bytes"}, {Name: "gzip", Configuration: map[string]any{"level": 5}}}
	for name, m := range map[string]Metadata{
		"zstd":         {Shape: []int{64, 1024}, ChunkShape: []int{8, 1024}, Codecs: zstdLE},
		"zstd-sharded": {Shape: []int{64, 1024}, ChunkShape: []int{32, 1024}, Codecs: shardCodecs([]int{8, 1024}, false, zstdLE)},
		"gzip":         {Shape: []int{64, 1024}, ChunkShape: []int{8, 1024}, Codecs: gzipLE},
		"gzip-sharded": {Shape: []int{64, 1024}, ChunkShape: []int{32, 1024}, Codecs: shardCodecs([]int{8, 1024}, false, gzipLE)},
		"zlib-v2":      {ZarrFormat: 2, Shape: []int{64, 1024}, ChunkShape: []int{8, 1024}, Compressor: &Codec{Name: "zlib", Configuration: map[string]any{"level": 1}}},
	} {
		t.Run(name, func(t *testing.T) {
			data := fielddata.Float32(m.Shape[0], m.Shape[1], 12)
			srv, a := serveArray(t, localArrayOf(t, m, data))
			key := a.ChunkKey([]int{1, 0})
			good, _ := srv.file(key)
			// The frame spoiled: the chunk's, or the shard's second inner chunk.
			serve := func(frame []byte) { srv.setFile(key, frame) }
			frame := good
			if sc := a.pipe.sharded(); sc != nil {
				inner := splitShard(t, good, sc.nInner())
				frame = inner[1]
				serve = func(f []byte) {
					inner := append([][]byte(nil), inner...)
					inner[1] = f
					srv.setFile(key, buildShard(inner))
				}
			}
			cell := numElements(a.cellShape()) * 4
			buf := devAlloc(t, ctx, len(data))
			host := make([]byte, len(data))
			spoilt := hostileFrames
			if !strings.HasPrefix(name, "zstd") {
				spoilt = hostileStreams
			}
			for _, c := range spoilt(t, rng, frame, data[:cell]) {
				serve(c.b)
				hostErr := a.ReadRegion(bg, []int{0, 0}, m.Shape, host)
				before := gpuDecodedChunks.Load()
				devErr := a.ReadRegionDevice(bg, []int{0, 0}, m.Shape, buf.Ptr())
				switch {
				case hostErr == nil && devErr == nil:
					if !bytes.Equal(fromDevice(t, ctx, buf.Ptr(), len(data)), host) {
						t.Errorf("%s: the device read differs from the host read", c.name)
					}
				case hostErr == nil || devErr == nil || hostErr.Error() != devErr.Error():
					t.Errorf("%s: the device read's error %v, the host read's %v", c.name, devErr, hostErr)
				}
				if gpuDecodedChunks.Load() == before {
					t.Errorf("%s: the GPU decoded no chunk", c.name)
				}
			}
			serve(frame)
			if err := a.ReadRegionDevice(bg, []int{0, 0}, m.Shape, buf.Ptr()); err != nil || !bytes.Equal(fromDevice(t, ctx, buf.Ptr(), len(data)), data) {
				t.Fatalf("the mended array: %v, or the device read differs from the array", err)
			}
		})
	}
}

// hostileFrame is a spoiled zstd frame, named.
type hostileFrame struct {
	name string
	b    []byte
}

// hostileFrames returns spoilt forms of frame, a zstd frame of a chunk
// whose decoded bytes have the size of vals.
func hostileFrames(t *testing.T, rng *rand.Rand, frame, vals []byte) []hostileFrame {
	t.Helper()
	enc := func(ck bool, b []byte) []byte {
		e, err := zstd.NewWriter(nil, zstd.WithEncoderCRC(ck))
		if err != nil {
			t.Fatal(err)
		}
		defer e.Close()
		return e.EncodeAll(b, nil)
	}
	skip := binary.LittleEndian.AppendUint32(nil, 0x184D2A50)
	skip = binary.LittleEndian.AppendUint32(skip, 3)
	return append(spoilt(rng, frame, 4), // after the magic: the frame header
		hostileFrame{"magic only", frame[:4]},
		hostileFrame{"header only", frame[:6]},
		hostileFrame{"a skippable frame before", append(append(skip, 1, 2, 3), frame...)},
		hostileFrame{"a checksum", enc(true, vals)},
		hostileFrame{"decodes to more than a chunk", enc(false, append(bytes.Clone(vals), vals[:100]...))},
		hostileFrame{"decodes to less than a chunk", enc(false, vals[:len(vals)-4])})
}

// spoilt returns the forms of b, a stored chunk, that a device read of
// any codec must take as the host read does: nothing, cut in half, its
// last byte cut, a byte after it, twice, garbage of its size, and 24
// with a bit flipped, the first four in the bytes from header on.
func spoilt(rng *rand.Rand, b []byte, header int) []hostileFrame {
	garbage := make([]byte, len(b))
	for i := range garbage {
		garbage[i] = byte(rng.Uint32())
	}
	out := []hostileFrame{
		{"empty", []byte{}},
		{"cut in half", b[:len(b)/2]},
		{"last byte cut", b[:len(b)-1]},
		{"a trailing byte", append(bytes.Clone(b), 0)},
		{"twice", append(bytes.Clone(b), b...)},
		{"garbage", garbage},
	}
	for k := range 24 {
		bad := bytes.Clone(b)
		i := rng.IntN(len(bad))
		if k < 4 {
			i = header + k
		}
		bad[i] ^= 1 << rng.IntN(8)
		out = append(out, hostileFrame{fmt.Sprintf("bit flipped at %d", i), bad})
	}
	return out
}

// hostileStreams returns spoilt forms of s, a gzip or zlib stream of a
// chunk whose decoded bytes have the size of vals.
func hostileStreams(t *testing.T, rng *rand.Rand, s, vals []byte) []hostileFrame {
	t.Helper()
	gz := s[0] == 0x1f
	enc := func(b []byte, hdr func(*gzip.Header)) []byte {
		var w bytes.Buffer
		if !gz {
			z, _ := zlib.NewWriterLevel(&w, 6)
			z.Write(b)
			z.Close()
			return w.Bytes()
		}
		g, _ := gzip.NewWriterLevel(&w, 6)
		if hdr != nil {
			hdr(&g.Header)
		}
		g.Write(b)
		g.Close()
		return w.Bytes()
	}
	sum := -4 // the Adler-32, or gzip's CRC-32 (then its size)
	if gz {
		sum = -8
	}
	flip := func(i int) []byte {
		b := bytes.Clone(s)
		b[(i+len(b))%len(b)] ^= 0x10
		return b
	}
	out := append(spoilt(rng, s, 2), // after the magic (gzip) or CMF and FLG (zlib)
		hostileFrame{"header only", s[:min(len(s), 10)]},
		hostileFrame{"checksum wrong", flip(sum)},
		hostileFrame{"trailer's last byte wrong", flip(-1)},
		hostileFrame{"decodes to more than a chunk", enc(append(bytes.Clone(vals), vals[:100]...), nil)},
		hostileFrame{"decodes to less than a chunk", enc(vals[:len(vals)-4], nil)})
	if gz {
		out = append(out,
			hostileFrame{"size wrong", flip(-3)},
			hostileFrame{"a name, a comment, extra bytes", enc(vals, func(h *gzip.Header) { h.Name, h.Comment, h.Extra = "c", "x", []byte{1, 2, 3} })},
			hostileFrame{"a header CRC", func() []byte { b := bytes.Clone(s); b[3] |= 2; return b }()},
			hostileFrame{"reserved flags", func() []byte { b := bytes.Clone(s); b[3] |= 0x80; return b }()})
	} else {
		out = append(out, hostileFrame{"a preset dictionary", func() []byte { b := bytes.Clone(s); b[1] |= 0x20; return b }()})
	}
	return out
}

// splitShard returns the n inner chunks of shard, its index at the end
// with a crc32c (nil for a missing one).
func splitShard(t *testing.T, shard []byte, n int) [][]byte {
	t.Helper()
	idx := shard[len(shard)-16*n-4:]
	out := make([][]byte, n)
	for i := range out {
		off, size := binary.LittleEndian.Uint64(idx[16*i:]), binary.LittleEndian.Uint64(idx[16*i+8:])
		if off != missingEntry {
			out[i] = shard[off : off+size]
		}
	}
	return out
}

// buildShard returns a shard of inner, back to back, then their index
// and its crc32c (nil: missing).
func buildShard(inner [][]byte) []byte {
	var b, idx []byte
	for _, c := range inner {
		off, n := uint64(len(b)), uint64(len(c))
		if c == nil {
			off, n = missingEntry, missingEntry
		}
		idx = binary.LittleEndian.AppendUint64(idx, off)
		idx = binary.LittleEndian.AppendUint64(idx, n)
		b = append(b, c...)
	}
	b = append(b, idx...)
	return binary.LittleEndian.AppendUint32(b, crc32.Checksum(idx, crc32.MakeTable(crc32.Castagnoli)))
}

// TestStageStored: parts of random sizes, empty ones and ones larger
// than a pinned buffer among them, reach the device back to back.
func TestStageStored(t *testing.T) {
	ctx := needGPU(t)
	rng := rand.New(rand.NewPCG(8, 40))
	const size = 64 << 10
	for round := range 20 {
		stored := make([]fetched, 1+rng.IntN(40))
		var want []byte
		for i := range stored {
			n := rng.IntN(size / 3)
			switch rng.IntN(8) {
			case 0:
				n = 0
			case 1:
				n = size + 1 + rng.IntN(size)
			case 2:
				n = size
			}
			b := make([]byte, n)
			for j := range b {
				b[j] = byte(rng.Uint32())
			}
			stored[i] = fetched{b: b}
			want = append(want, b...)
		}
		dev := devAlloc(t, ctx, len(want))
		err := cuda.WithContext(ctx, func() error {
			s, err := cuda.StreamCreate(cuda.StreamNonBlocking)
			if err != nil {
				return err
			}
			defer cuda.StreamDestroy(s)
			bufs, err := stageStored(bg, stored, dev.Ptr(), size, s)
			if err == nil {
				err = cuda.StreamSynchronize(s)
			}
			for _, p := range bufs {
				p.Release()
			}
			return err
		})
		if err != nil {
			t.Fatal(err)
		}
		if !bytes.Equal(fromDevice(t, ctx, dev.Ptr(), len(want)), want) {
			t.Fatalf("round %d: %d parts: the device's bytes differ", round, len(stored))
		}
	}
}

// TestStagePlaces: the parts a pinned buffer holds are consecutive, back
// to back from its start as on the device, within its size; parts larger
// than a buffer are in none; every buffer holds a part.
func TestStagePlaces(t *testing.T) {
	rng := rand.New(rand.NewPCG(9, 40))
	for round := range 500 {
		size := 1 + rng.IntN(100)
		sizes := make([]int, rng.IntN(30))
		for i := range sizes {
			switch rng.IntN(6) {
			case 0:
				sizes[i] = 0
			case 1:
				sizes[i] = size + 1 + rng.IntN(size)
			default:
				sizes[i] = rng.IntN(size + 1)
			}
		}
		places, fill := stagePlaces(sizes, size)
		used := make([]int, len(fill))
		last := -1 // the buffer of the last part placed in one
		for i, pl := range places {
			switch {
			case sizes[i] > size:
				if pl.buf != -1 {
					t.Fatalf("round %d: part %d of %d bytes in buffer %d of %d", round, i, sizes[i], pl.buf, size)
				}
				last = -2 // the next part placed starts a buffer
				continue
			case pl.buf < 0 || pl.buf >= len(fill):
				t.Fatalf("round %d: part %d of %d bytes in buffer %d of %d", round, i, sizes[i], pl.buf, len(fill))
			case pl.buf != last && (pl.buf != last+1 && last >= -1 || pl.off != 0 || used[pl.buf] != 0):
				t.Fatalf("round %d: part %d starts buffer %d at %d after buffer %d", round, i, pl.buf, pl.off, last)
			case pl.off != used[pl.buf]:
				t.Fatalf("round %d: part %d at %d of buffer %d, after %d bytes", round, i, pl.off, pl.buf, used[pl.buf])
			}
			used[pl.buf] += sizes[i]
			last = pl.buf
		}
		for k := range fill {
			if used[k] != fill[k] || fill[k] > size {
				t.Fatalf("round %d: buffer %d: fill %d, parts %d, size %d", round, k, fill[k], used[k], size)
			}
		}
	}
}

// TestGPUBatches: batches hold at most per pieces, a missing shard
// counting as the chunks its selection fills (one larger than per alone
// in its batch), every piece once and in order, each span's bytes
// holding its pieces within its shard's span.
func TestGPUBatches(t *testing.T) {
	rng := rand.New(rand.NewPCG(10, 40))
	const chunk = 64
	for round := range 300 {
		var spans []span
		var want []int64 // the pieces' offsets, in order; a missing shard's below 0
		weight := map[int64]int{}
		off := int64(0)
		for k := range rng.IntN(12) {
			if rng.IntN(4) == 0 {
				sel := 1 + rng.IntN(20*chunk)
				p := piece{key: fmt.Sprint(k), off: -int64(k + 1), n: -1, missing: true, sel: box{count: []int{sel}}}
				spans = append(spans, span{key: p.key, off: p.off, n: -1, pieces: []piece{p}})
				want = append(want, p.off)
				weight[p.off] = (sel + chunk - 1) / chunk
				continue
			}
			sp := span{key: fmt.Sprint(k), off: off}
			for range 1 + rng.IntN(40) {
				n := 1 + rng.Int64N(50)
				sp.pieces = append(sp.pieces, piece{key: sp.key, off: off, n: n})
				want = append(want, off)
				weight[off] = 1
				off += n + rng.Int64N(3)
			}
			last := sp.pieces[len(sp.pieces)-1]
			sp.n = last.off + last.n - sp.off
			sp.lo, sp.hi = 0, off // as wholeShard sets them
			spans = append(spans, sp)
		}
		per := 1 + rng.IntN(16)
		var got []int64
		for b, batch := range gpuBatches(spans, per, chunk, 1) {
			n, pieces := 0, 0
			for _, sp := range batch {
				for _, p := range sp.pieces {
					if p.key != sp.key || !p.missing && (p.off < sp.off || p.off+p.n > sp.off+sp.n) {
						t.Fatalf("round %d, batch %d: piece [%d, +%d) outside span [%d, +%d)", round, b, p.off, p.n, sp.off, sp.n)
					}
					got = append(got, p.off)
					n += weight[p.off]
					pieces++
				}
				if sp.hi > 0 && len(sp.pieces) < len(spans[mustAtoi(t, sp.key)].pieces) {
					t.Fatalf("round %d, batch %d: a part of a span asks for the whole shard", round, b)
				}
			}
			if pieces == 0 || n > per && pieces > 1 {
				t.Fatalf("round %d, batch %d: %d pieces weighing %d, at most %d", round, b, pieces, n, per)
			}
		}
		if !slices.Equal(got, want) {
			t.Fatalf("round %d: pieces %v, want %v", round, got, want)
		}
	}
}

func mustAtoi(t *testing.T, s string) int {
	t.Helper()
	n, err := strconv.Atoi(s)
	if err != nil {
		t.Fatal(err)
	}
	return n
}

// TestScratchSlots: in a device read's GPU batch of a sharded array with
// a missing shard, each piece's place in the batch's memory holds its
// selection and a chunk, none overlapping another.
func TestScratchSlots(t *testing.T) {
	m := deviceCases["sharded-zstd"]
	a, vals := newWrittenArray(t, m, 44)
	fillBox(t, a, vals, m.ChunkShape, m.ChunkShape)
	ps, err := a.plan(bg, box{start: make([]int, 2), count: m.Shape})
	if err != nil {
		t.Fatal(err)
	}
	es := m.DataType.Size
	chunk := numElements(a.cellShape()) * es
	slot := scratchSlots(ps, chunk, es)
	large := false
	for i, pc := range ps {
		n := int(slot[i+1] - slot[i])
		sel := numElements(pc.sel.count) * es
		if n < chunk || n < sel {
			t.Fatalf("piece %d (%s, missing %v): %d bytes for a selection of %d, chunks of %d", i, pc.key, pc.missing, n, sel, chunk)
		}
		large = large || sel > chunk
	}
	if !large {
		t.Fatal("no piece larger than an inner chunk: the missing shard was not one piece")
	}
}
