package zarr

import (
	"context"
	"errors"
	"math/rand/v2"
	"slices"
	"strings"
	"testing"

	"github.com/kvikgo/kvik/cuda"
	"github.com/kvikgo/kvik/internal/formatkit/zarrtune"
)

// TestDeviceWriteGPUBlosc writes Blosc LZ4 arrays from device memory
// (2-D and 3-D, elements of 1 to 8 bytes, shuffled or not, fill values,
// chunks cut by the array's edge, regions that cut chunks, chunks all of
// the fill value, random block sizes) twice, in the same random rounds:
// encoded on the GPU (the whole chunks a region covers) and, with
// zarrtune.CPUEncode, on the CPU; and from host memory, encoded on the
// GPU of SetEncodeDevice. Each reads back as the model says after every
// round, and they store the same chunks; each chunk the GPU wrote
// decodes to the bytes of the CPU's.
func TestDeviceWriteGPUBlosc(t *testing.T) {
	ctx := needGPU(t)
	rng := rand.New(rand.NewPCG(40, 41))
	cases := []struct {
		name         string
		dt           DataType
		shuffle      string
		shape, chunk []int
		fill         any
		v2, big      bool // a v2 array (numcodecs' blosc), big-endian
	}{
		{"f32-2d", DataType{Kind: Float, Size: 4}, "shuffle", []int{37, 150}, []int{8, 32}, 0.0, false, false},
		{"u16-2d-noshuffle", DataType{Kind: Uint, Size: 2}, "noshuffle", []int{64, 64}, []int{16, 16}, 7, false, false},
		{"i64-3d", DataType{Kind: Int, Size: 8}, "shuffle", []int{6, 20, 30}, []int{1, 5, 30}, -1, false, false},
		{"u8-3d", DataType{Kind: Uint, Size: 1}, "shuffle", []int{6, 20, 30}, []int{2, 20, 7}, 0, false, false},
		{"i32-1d", DataType{Kind: Int, Size: 4}, "shuffle", []int{10000}, []int{1000}, 3, false, false},
		{"v2-f64", DataType{Kind: Float, Size: 8}, "shuffle", []int{50, 40}, []int{10, 40}, nil, true, false},
		{"v2-i16-big", DataType{Kind: Int, Size: 2}, "shuffle", []int{50, 40}, []int{10, 8}, 1, true, true},
		{"sharded-f32", DataType{Kind: Float, Size: 4}, "shuffle", []int{45, 130}, []int{16, 64}, 0.0, false, false},
		{"sharded-u16-3d", DataType{Kind: Uint, Size: 2}, "noshuffle", []int{6, 20, 30}, []int{2, 10, 30}, 5, false, false},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			s, err := NewDirStore(t.TempDir())
			if err != nil {
				t.Fatal(err)
			}
			es := c.dt.Size
			bs := []int{0, es * (1 + rng.IntN(300)), 1 << 20}[rng.IntN(3)]
			m := Metadata{Shape: c.shape, ChunkShape: c.chunk, DataType: c.dt, FillValue: c.fill,
				Codecs: []Codec{{Name: "bytes", Configuration: map[string]any{"endian": "little"}},
					{Name: "blosc", Configuration: map[string]any{"cname": "lz4", "clevel": 5, "shuffle": c.shuffle, "typesize": es, "blocksize": bs}}}}
			if strings.HasPrefix(c.name, "sharded") {
				// Shards of inner chunks of half the shard's first two
				// sides, the index at either end.
				inner := slices.Clone(c.chunk)
				inner[0] /= 2
				inner[1] /= 2
				m.Codecs = shardCodecs(inner, rng.IntN(2) == 0, m.Codecs)
			}
			if c.v2 {
				shuffle := map[string]int{"noshuffle": 0, "shuffle": 1}[c.shuffle]
				m = Metadata{ZarrFormat: 2, Shape: c.shape, ChunkShape: c.chunk, DataType: c.dt, FillValue: c.fill, BigEndian: c.big,
					Compressor: &Codec{Name: "blosc", Configuration: map[string]any{"cname": "lz4", "clevel": 5, "shuffle": shuffle, "blocksize": bs}}}
			}
			gpu, err := Create(bg, s, "gpu", m)
			if err != nil {
				t.Fatal(err)
			}
			cpu, err := Create(bg, s, "cpu", m)
			if err != nil {
				t.Fatal(err)
			}
			host, err := Create(bg, s, "host", m)
			if err != nil {
				t.Fatal(err)
			}
			host.SetEncodeDevice(0)
			if _, ok := gpu.gpuBlosc(); ok == c.big {
				t.Fatalf("%s: encoded on the GPU: %v", c.name, ok)
			}
			// Batches of 1 to 40 chunks (and none of the minimum of a
			// GPU encode), so that a write runs several.
			n := numElements(gpu.cellShape()) * es
			zarrtune.GPUEncodeBytes.Store(int64((1 + rng.IntN(40)) * n))
			t.Cleanup(func() { zarrtune.GPUEncodeBytes.Store(0) })
			fill := gpu.pipe.fill
			ref := model{shape: c.shape, es: es, buf: chunkFill(fill, c.shape)}
			var encoded, fromHost int64 // chunks the GPU encoded and stored
			for round := range 4 {
				start, stop := make([]int, len(c.shape)), slices.Clone(c.shape)
				if round > 0 {
					for d, n := range c.shape {
						start[d] = rng.IntN(n)
						stop[d] = start[d] + 1 + rng.IntN(n-start[d])
					}
				}
				src := regionData(rng, c.dt, fill, start, stop, round)
				ref.write(start, stop, src)
				for _, a := range []*Array{gpu, cpu, host} {
					if a == cpu {
						zarrtune.CPUEncode.Store(true)
					}
					before := gpuEncodedChunks.Load()
					var err error
					if a == host {
						err = a.WriteRegion(bg, start, stop, src)
					} else {
						err = writeFromDevice(ctx, a, start, stop, src)
					}
					zarrtune.CPUEncode.Store(false)
					if err != nil {
						t.Fatal(err)
					}
					if a == host {
						fromHost += gpuEncodedChunks.Load() - before
					} else {
						encoded += gpuEncodedChunks.Load() - before
					}
					if a == cpu && gpuEncodedChunks.Load() != before {
						t.Fatalf("the GPU encoded chunks of a write told to encode on the CPU")
					}
					checkModel(t, a, ref)
				}
				compareChunks(t, s, gpu, cpu)
				compareChunks(t, s, host, cpu)
			}
			// The GPU encodes every whole chunk of a host write (gathered
			// on the CPU), those of a device write whose rows lie evenly
			// apart.
			if want := c.name != "u8-3d" && !c.big; (encoded > 0) != want {
				t.Fatalf("%s: the GPU encoded and stored %d chunks", c.name, encoded)
			}
			if (fromHost > 0) == c.big {
				t.Fatalf("%s: the GPU encoded and stored %d chunks of host writes", c.name, fromHost)
			}
		})
	}
}

// regionData returns the bytes of region [start, stop) of an array of
// dt: a slope plus noise, in runs of the fill value now and then (whole
// chunks of it in some rounds).
func regionData(rng *rand.Rand, dt DataType, fill []byte, start, stop []int, round int) []byte {
	n := 1
	for d := range start {
		n *= stop[d] - start[d]
	}
	es := dt.Size
	out := make([]byte, 0, n*es)
	for i := range n {
		if round%2 == 1 && i/500%3 == 0 {
			out = append(out, fill...)
			continue
		}
		v := uint64(i/7) + uint64(rng.IntN(4))
		for k := range es {
			out = append(out, byte(v>>(8*k)))
		}
	}
	return out
}

// writeFromDevice writes src to a's region [start, stop) from device
// memory.
func writeFromDevice(ctx cuda.Context, a *Array, start, stop []int, src []byte) error {
	return cuda.WithContext(ctx, func() error {
		buf, err := cuda.MemAlloc(max(len(src), 1))
		if err != nil {
			return err
		}
		defer buf.Close()
		if err := cuda.MemcpyHtoD(buf.Ptr(), src); err != nil {
			return err
		}
		return a.WriteRegionDevice(context.Background(), start, stop, buf.Ptr())
	})
}

// compareChunks checks that arrays gpu and cpu of store s store the same
// chunks, each decoding to the same bytes.
func compareChunks(t *testing.T, s *DirStore, gpu, cpu *Array) {
	t.Helper()
	gp, cp := gpu.path, cpu.path
	list := func(prefix string) []string {
		keys, err := s.List(bg, prefix)
		if err != nil {
			t.Fatal(err)
		}
		var out []string
		for _, k := range keys {
			if !IsMetadataKey(k) {
				out = append(out, k[len(prefix):])
			}
		}
		slices.Sort(out)
		return out
	}
	g, c := list(gp), list(cp)
	if !slices.Equal(g, c) {
		t.Fatalf("chunks stored: GPU %v, CPU %v", g, c)
	}
	n := numElements(gpu.meta.ChunkShape) * gpu.meta.DataType.Size
	for _, k := range g {
		var dec [2][]byte
		for i, p := range []string{gp, cp} {
			enc, err := s.Get(bg, p+k, nil)
			if err != nil {
				t.Fatal(err)
			}
			dec[i] = make([]byte, n)
			if err := gpu.DecodeChunk(enc, dec[i]); err != nil {
				t.Fatalf("%s%s: %v", p, k, err)
			}
		}
		if !slices.Equal(dec[0], dec[1]) {
			t.Fatalf("chunk %s: the GPU's decodes to other bytes than the CPU's", k)
		}
	}
}

// TestChunkRows checks chunkRows against view.runs for chunks of random
// regions of 1 to 4 dimensions: where it finds rows, they are the
// chunk's bytes in the region, in order; in 1-D and 2-D it always does.
func TestChunkRows(t *testing.T) {
	rng := rand.New(rand.NewPCG(42, 43))
	found := 0
	for range 3000 {
		nd := 1 + rng.IntN(4)
		shape, start, count := make([]int, nd), make([]int, nd), make([]int, nd)
		for d := range nd {
			shape[d] = 1 + rng.IntN(7)
			start[d] = rng.IntN(shape[d])
			count[d] = 1 + rng.IntN(shape[d]-start[d])
			if rng.IntN(3) == 0 { // whole along d
				start[d], count[d] = 0, shape[d]
			}
		}
		es := []int{1, 2, 4, 8}[rng.IntN(4)]
		in := view{shape: shape, es: es}
		t0 := chunkTask{sel: box{start: make([]int, nd), count: count}, dstStart: start}
		var want []int
		in.sub(start).runs(count, func(off, n int) error {
			for i := range n {
				want = append(want, off+i)
			}
			return nil
		})
		off, rows, width, pitch, ok := chunkRows(in, t0)
		if !ok {
			if nd <= 2 {
				t.Fatalf("shape %v, chunk %v at %v: no rows", shape, count, start)
			}
			continue
		}
		found++
		var got []int
		for r := range rows {
			for i := range width {
				got = append(got, off+r*pitch+i)
			}
		}
		if !slices.Equal(got, want) {
			t.Fatalf("shape %v, chunk %v at %v (es %d): %d rows of %d, %d apart from %d; the chunk's bytes are %v", shape, count, start, es, rows, width, pitch, off, want)
		}
	}
	t.Logf("%d of 3000 chunks in rows", found)
}

// TestGPUBloscChains checks which arrays a device write has the GPU
// encode (gpuBlosc): Blosc's lz4 at a level above 0, byte shuffle or
// none, elements of 1, 2, 4 or 8 bytes stored little-endian (or of one
// byte), the chain's (or the shards' inner chain's) only codec after
// the bytes; nothing else.
func TestGPUBloscChains(t *testing.T) {
	blosc := func(cname string, clevel int, shuffle any, typesize int) Codec {
		return Codec{Name: "blosc", Configuration: map[string]any{"cname": cname, "clevel": clevel, "shuffle": shuffle, "typesize": typesize, "blocksize": 0}}
	}
	le := Codec{Name: "bytes", Configuration: map[string]any{"endian": "little"}}
	be := Codec{Name: "bytes", Configuration: map[string]any{"endian": "big"}}
	f32, f64, i16, u8, c128 := DataType{Kind: Float, Size: 4}, DataType{Kind: Float, Size: 8}, DataType{Kind: Int, Size: 2}, DataType{Kind: Uint, Size: 1}, DataType{Kind: Complex, Size: 16}
	v2blosc := func(cname string, shuffle int) *Codec {
		return &Codec{Name: "blosc", Configuration: map[string]any{"cname": cname, "clevel": 5, "shuffle": shuffle, "blocksize": 0}}
	}
	cases := []struct {
		name string
		m    Metadata
		want bool
	}{
		{"lz4-shuffle", Metadata{DataType: f32, Codecs: []Codec{le, blosc("lz4", 5, "shuffle", 4)}}, true},
		{"lz4-noshuffle-f64", Metadata{DataType: f64, Codecs: []Codec{le, blosc("lz4", 1, "noshuffle", 8)}}, true},
		{"lz4-u8", Metadata{DataType: u8, Codecs: []Codec{le, blosc("lz4", 9, "shuffle", 1)}}, true},
		{"lz4-big-u8", Metadata{DataType: u8, Codecs: []Codec{be, blosc("lz4", 5, "shuffle", 1)}}, true},
		{"lz4-bitshuffle", Metadata{DataType: f32, Codecs: []Codec{le, blosc("lz4", 5, "bitshuffle", 4)}}, false},
		{"lz4hc", Metadata{DataType: f32, Codecs: []Codec{le, blosc("lz4hc", 5, "shuffle", 4)}}, false},
		{"zstd", Metadata{DataType: f32, Codecs: []Codec{le, blosc("zstd", 5, "shuffle", 4)}}, false},
		{"level-0", Metadata{DataType: f32, Codecs: []Codec{le, blosc("lz4", 0, "shuffle", 4)}}, false},
		{"typesize-2-of-4", Metadata{DataType: f32, Codecs: []Codec{le, blosc("lz4", 5, "shuffle", 2)}}, false},
		{"big-i16", Metadata{DataType: i16, Codecs: []Codec{be, blosc("lz4", 5, "shuffle", 2)}}, false},
		{"complex128", Metadata{DataType: c128, Codecs: []Codec{le, blosc("lz4", 5, "shuffle", 16)}}, false},
		{"transpose", Metadata{DataType: f32, Codecs: []Codec{{Name: "transpose", Configuration: map[string]any{"order": "F"}}, le, blosc("lz4", 5, "shuffle", 4)}}, false},
		{"then-crc32c", Metadata{DataType: f32, Codecs: []Codec{le, blosc("lz4", 5, "shuffle", 4), {Name: "crc32c"}}}, false},
		{"sharded", Metadata{DataType: f32, Codecs: shardCodecs([]int{2, 2}, false, []Codec{le, blosc("lz4", 5, "shuffle", 4)})}, true},
		{"sharded-index-first", Metadata{DataType: f32, Codecs: shardCodecs([]int{2, 4}, true, []Codec{le, blosc("lz4", 5, "noshuffle", 4)})}, true},
		{"sharded-zstd", Metadata{DataType: f32, Codecs: shardCodecs([]int{2, 2}, false, []Codec{le, blosc("zstd", 5, "shuffle", 4)})}, false},
		{"sharded-then-crc32c", Metadata{DataType: f32, Codecs: shardCodecs([]int{2, 2}, false, []Codec{le, blosc("lz4", 5, "shuffle", 4), {Name: "crc32c"}})}, false},
		{"v2", Metadata{ZarrFormat: 2, DataType: i16, Compressor: v2blosc("lz4", 1)}, true},
		{"v2-big", Metadata{ZarrFormat: 2, DataType: i16, BigEndian: true, Compressor: v2blosc("lz4", 1)}, false},
		{"v2-F", Metadata{ZarrFormat: 2, DataType: i16, Order: 'F', Compressor: v2blosc("lz4", 1)}, false},
		{"v2-filter", Metadata{ZarrFormat: 2, DataType: i16, Filters: []Codec{{Name: "delta", Configuration: map[string]any{"dtype": "<i2"}}}, Compressor: v2blosc("lz4", 1)}, false},
	}
	for _, c := range cases {
		s, err := NewDirStore(t.TempDir())
		if err != nil {
			t.Fatal(err)
		}
		c.m.Shape, c.m.ChunkShape = []int{8, 8}, []int{4, 4}
		a, err := Create(bg, s, "a", c.m)
		if err != nil {
			t.Fatalf("%s: %v", c.name, err)
		}
		if _, ok := a.gpuBlosc(); ok != c.want {
			t.Errorf("%s: the GPU encodes %v, want %v", c.name, ok, c.want)
		}
		if c.want {
			a.SetGPUEncode(false)
			if _, ok := a.gpuBlosc(); ok {
				t.Errorf("%s: the GPU encodes after SetGPUEncode(false)", c.name)
			}
		}
	}
}

// TestSetEncodeDevice writes a Blosc LZ4 array from host memory with
// SetEncodeDevice: on a machine with a CUDA driver the GPU encodes its
// chunks and an ordinal the driver does not know fails the write
// (cuda.ErrorInvalidDevice); without one the CPU encodes them all. The
// array reads back as written either way, and d < 0 keeps the CPU.
func TestSetEncodeDevice(t *testing.T) {
	rng := rand.New(rand.NewPCG(44, 45))
	driver := cuda.Init() == nil
	zarrtune.GPUEncodeBytes.Store(int64((1 + rng.IntN(40)) << 12))
	t.Cleanup(func() { zarrtune.GPUEncodeBytes.Store(0) })
	m := Metadata{Shape: []int{40000 + rng.IntN(999)}, ChunkShape: []int{1000}, DataType: DataType{Kind: Int, Size: 4},
		Codecs: []Codec{{Name: "bytes", Configuration: map[string]any{"endian": "little"}},
			{Name: "blosc", Configuration: map[string]any{"cname": "lz4", "clevel": 5, "shuffle": "shuffle", "typesize": 4}}}}
	for _, d := range []int{0, -1, 1 << 20} {
		a, _ := newFilledArray(t, m)
		a.SetEncodeDevice(d)
		src := regionData(rng, m.DataType, a.pipe.fill, []int{0}, m.Shape, 0)
		before := gpuEncodedChunks.Load()
		err := a.WriteRegion(bg, []int{0}, m.Shape, src)
		gpu := gpuEncodedChunks.Load() - before
		if d == 1<<20 && driver {
			if !errors.Is(err, cuda.ErrorInvalidDevice) {
				t.Fatalf("device %d: %v, want cuda.ErrorInvalidDevice", d, err)
			}
			continue
		}
		if err != nil {
			t.Fatalf("device %d: %v", d, err)
		}
		if want := driver && d == 0; (gpu > 0) != want {
			t.Fatalf("device %d (driver %v): the GPU encoded %d chunks", d, driver, gpu)
		}
		got := make([]byte, len(src))
		if err := a.ReadRegion(bg, []int{0}, m.Shape, got); err != nil {
			t.Fatal(err)
		}
		if !slices.Equal(got, src) {
			t.Fatalf("device %d: the array reads back other bytes", d)
		}
	}
}
