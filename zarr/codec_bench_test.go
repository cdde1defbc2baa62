package zarr

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
	"sync/atomic"
	"syscall"
	"testing"
	"time"

	"github.com/kvikgo/kvik/internal/testkit/fielddata"
)

// benchCodecs are the codec chains of BenchmarkCodecs and of
// bench/zarrbench: 1 MiB chunks of float32 (512 x 512).
var benchCodecs = []struct {
	name   string
	codecs []Codec
}{
	{"raw", nil},
	{"zstd", []Codec{{Name: "bytes"}, {Name: "zstd", Configuration: map[string]any{"level": 3}}}},
	{"blosc-lz4", []Codec{{Name: "bytes"}, {Name: "blosc", Configuration: map[string]any{"cname": "lz4", "clevel": 5, "shuffle": "shuffle", "typesize": 4, "blocksize": 0}}}},
	{"blosc-zstd", []Codec{{Name: "bytes"}, {Name: "blosc", Configuration: map[string]any{"cname": "zstd", "clevel": 3, "shuffle": "shuffle", "typesize": 4, "blocksize": 0}}}},
	{"gzip", []Codec{{Name: "bytes"}, {Name: "gzip", Configuration: map[string]any{"level": 5}}}},
	{"sharded-zstd", shardCodecs([]int{512, 512}, false, []Codec{{Name: "bytes"}, {Name: "zstd", Configuration: map[string]any{"level": 3}}})},
}

// BenchmarkCodecs measures, for a 64 MiB float32 array of 1 MiB chunks
// (a smooth field plus noise) in each codec of benchCodecs: decode and
// encode of the stored chunks on all cores (the ceilings: decoded bytes
// per second), a whole-array region read into host memory and a
// whole-array write, from a DirStore.
func BenchmarkCodecs(b *testing.B) {
	const side = 4096
	shape := []int{side, side}
	src := fielddata.Float32(side, side, 1)
	for _, c := range benchCodecs {
		b.Run(c.name, func(b *testing.B) {
			chunks := []int{512, 512}
			if c.name == "sharded-zstd" {
				chunks = []int{2048, 2048}
			}
			s, err := NewDirStore(b.TempDir())
			if err != nil {
				b.Fatal(err)
			}
			a, err := Create(bg, s, "a", Metadata{Shape: shape, ChunkShape: chunks, DataType: DataType{Kind: Float, Size: 4}, Codecs: c.codecs})
			if err != nil {
				b.Fatal(err)
			}
			if err := a.WriteRegion(bg, []int{0, 0}, shape, src); err != nil {
				b.Fatal(err)
			}
			keys, err := s.List(bg, "a/c/")
			if err != nil {
				b.Fatal(err)
			}
			stored := make([][]byte, len(keys))
			var total int
			for i, k := range keys {
				if stored[i], err = s.Get(bg, k, nil); err != nil {
					b.Fatal(err)
				}
				total += len(stored[i])
			}
			chunkBytes := numElements(chunks) * 4
			decoded := make([][]byte, len(keys))
			b.Run("decode", func(b *testing.B) {
				b.ReportMetric(float64(len(src))/float64(total), "ratio")
				b.SetBytes(int64(chunkBytes))
				var next atomic.Int64
				b.RunParallel(func(pb *testing.PB) {
					dst := make([]byte, chunkBytes)
					for pb.Next() {
						i := int(next.Add(1)-1) % len(stored)
						if err := a.DecodeChunk(stored[i], dst); err != nil {
							b.Error(err)
							return
						}
					}
				})
			})
			for i := range decoded {
				decoded[i] = make([]byte, chunkBytes)
				if err := a.DecodeChunk(stored[i], decoded[i]); err != nil {
					b.Fatal(err)
				}
			}
			b.Run("encode", func(b *testing.B) {
				b.SetBytes(int64(chunkBytes))
				var next atomic.Int64
				b.RunParallel(func(pb *testing.PB) {
					for pb.Next() {
						i := int(next.Add(1)-1) % len(decoded)
						if _, err := a.EncodeChunk(decoded[i]); err != nil {
							b.Error(err)
							return
						}
					}
				})
			})
			b.Run("read", func(b *testing.B) {
				dst := make([]byte, len(src))
				b.SetBytes(int64(len(src)))
				for b.Loop() {
					if err := a.ReadRegion(context.Background(), []int{0, 0}, shape, dst); err != nil {
						b.Fatal(err)
					}
				}
				if string(dst) != string(src) {
					b.Fatal("read back differs")
				}
			})
			b.Run("write", func(b *testing.B) {
				b.SetBytes(int64(len(src)))
				for b.Loop() {
					if err := a.WriteRegion(context.Background(), []int{0, 0}, shape, src); err != nil {
						b.Fatal(err)
					}
				}
			})
		})
	}
}

// BenchmarkZstdImpls compares the zstd implementations on one core:
// decode and encode of 1 MiB chunks of float32 field data (a smooth
// field plus noise, 512 x 512) at level 3, as zstd chunks and as
// Blosc-zstd chunks with byte shuffle (decoded bytes per second, and per
// second of the process's CPU time, cpu-MB/s, which other load on a
// shared machine does not change). The ratio of native to go is what
// KVIK_ZSTD=auto gains where libzstd loads; BenchmarkCodecs, run with
// KVIK_ZSTD=go and without, shows it on every core and through reads and
// writes.
func BenchmarkZstdImpls(b *testing.B) {
	impls := bothZstd(b)
	const n = 8
	chunks := make([][]byte, n)
	for i := range chunks {
		chunks[i] = fielddata.Float32(512, 512, uint64(i+1))
	}
	for _, im := range impls {
		for _, c := range []struct {
			name  string
			codec bytesCodec
		}{
			{"zstd", zstdCodec{level: 3, impl: im.z}},
			{"blosc-zstd", bloscCodec{cname: "zstd", clevel: 3, shuffle: 1, typesize: 4, zstd: im.z}},
		} {
			stored := make([][]byte, n)
			var total int
			for i, src := range chunks {
				var err error
				if stored[i], err = c.codec.encode(src, nil); err != nil {
					b.Fatal(err)
				}
				total += len(stored[i])
			}
			b.Run(c.name+"/"+im.name+"/decode", func(b *testing.B) {
				b.SetBytes(int64(len(chunks[0])))
				dst := make([]byte, len(chunks[0]))
				i := 0
				defer cpuRate(b, len(dst))()
				for b.Loop() {
					out, err := c.codec.decode(stored[i%n], dst, len(dst))
					if err != nil || len(out) != len(dst) {
						b.Fatal(len(out), err)
					}
					i++
				}
				b.ReportMetric(float64(n*len(chunks[0]))/float64(total), "ratio")
			})
			b.Run(c.name+"/"+im.name+"/encode", func(b *testing.B) {
				b.SetBytes(int64(len(chunks[0])))
				i := 0
				defer cpuRate(b, len(chunks[0]))()
				for b.Loop() {
					if _, err := c.codec.encode(chunks[i%n], nil); err != nil {
						b.Fatal(err)
					}
					i++
				}
			})
		}
	}
}

// cpuRate returns a function that reports, once b's loop is done, the
// bytes per op it processed per second of the process's CPU time since
// cpuRate was called ("cpu-MB/s").
func cpuRate(b *testing.B, bytes int) func() {
	cpu := func() time.Duration {
		var ru syscall.Rusage
		syscall.Getrusage(syscall.RUSAGE_SELF, &ru)
		return time.Duration(ru.Utime.Nano() + ru.Stime.Nano())
	}
	c0 := cpu()
	return func() { b.ReportMetric(float64(b.N)*float64(bytes)/1e6/(cpu()-c0).Seconds(), "cpu-MB/s") }
}

// BenchmarkWriteOverEncode measures what a write costs beyond its codec:
// for the array of BenchmarkCodecs in each compressed codec, each
// iteration encodes every chunk in memory (EncodeChunk on the write's
// workers: the encode ceiling), then writes the whole array into a new
// DirStore (WriteRegion). The two alternate, so that both see the same
// load; write/encode is the write's rate over the ceiling's, and
// cpu-write/encode the same in the process's CPU time (user and system),
// which other processes on a shared machine change less.
func BenchmarkWriteOverEncode(b *testing.B) {
	const side = 4096
	shape := []int{side, side}
	src := fielddata.Float32(side, side, 1)
	for _, c := range benchCodecs[1:] {
		b.Run(c.name, func(b *testing.B) {
			m := Metadata{Shape: shape, ChunkShape: []int{512, 512}, DataType: DataType{Kind: Float, Size: 4}, Codecs: c.codecs}
			if c.name == "sharded-zstd" {
				m.ChunkShape = []int{2048, 2048}
			}
			root := b.TempDir()
			newArray := func(name string) *Array { return newDirArray(b, m, filepath.Join(root, name)) }
			a := newArray("ceiling")
			var chunks [][]byte
			forChunks(m.ChunkShape, a.grid, box{start: []int{0, 0}, count: shape}, func(t chunkTask) error {
				ch := make([]byte, numElements(m.ChunkShape)*4)
				copyBox(view{buf: ch, shape: m.ChunkShape, es: 4, start: t.sel.start}, view{buf: src, shape: shape, es: 4, start: t.dstStart}, t.sel.count)
				chunks = append(chunks, ch)
				return nil
			})
			var enc, write, encCPU, writeCPU time.Duration
			for b.Loop() {
				t, c := time.Now(), cpuTime(b)
				if err := a.run(bg, len(chunks), func(_ context.Context, _, i int) error {
					_, err := a.EncodeChunk(chunks[i])
					return err
				}); err != nil {
					b.Fatal(err)
				}
				enc, encCPU = enc+time.Since(t), encCPU+cpuTime(b)-c
				w := newArray("write")
				t, c = time.Now(), cpuTime(b)
				if err := w.WriteRegion(bg, []int{0, 0}, shape, src); err != nil {
					b.Fatal(err)
				}
				write, writeCPU = write+time.Since(t), writeCPU+cpuTime(b)-c
			}
			n := float64(len(src)) * float64(b.N)
			b.ReportMetric(n/enc.Seconds()/1e6, "encode-MB/s")
			b.ReportMetric(n/write.Seconds()/1e6, "write-MB/s")
			b.ReportMetric(enc.Seconds()/write.Seconds(), "write/encode")
			b.ReportMetric(encCPU.Seconds()/writeCPU.Seconds(), "cpu-write/encode")
		})
	}
}

// cpuTime returns the CPU time (user and system) the process has used.
func cpuTime(b *testing.B) time.Duration {
	var ru syscall.Rusage
	if err := syscall.Getrusage(syscall.RUSAGE_SELF, &ru); err != nil {
		b.Fatal(err)
	}
	return time.Duration(ru.Utime.Nano() + ru.Stime.Nano())
}

// BenchmarkBloscEncodeRuns encodes float32 chunks (a smooth field plus
// noise) of a 64 MiB region, 8192 wide, with Blosc LZ4 and byte shuffle,
// in an order that leaves each cold in the caches: gathered into a chunk
// buffer first, then encoded (what a write did); shuffled straight from
// the region's rows (encodeRuns, what a write does, prefetching the rows
// ahead); and, for comparison, each chunk's copy already contiguous (the
// encode ceiling's input). 128 x 128 chunks have rows of 512 bytes, 512 x
// 512 of 2 KiB.
func BenchmarkBloscEncodeRuns(b *testing.B) {
	const rows, side = 2048, 8192
	region := fielddata.Float32(rows, side, 1)
	c := bloscCodec{cname: "lz4", clevel: 5, shuffle: 1, typesize: 4}
	v := view{buf: region, shape: []int{rows, side}, es: 4}
	for _, chunk := range []int{128, 512} {
		buf, out := make([]byte, chunk*chunk*4), make([]byte, chunk*chunk*4)
		n := rows / chunk * (side / chunk)
		at := func(i int) []int { return cellOrigin(i*7919%n, rows, side, chunk) } // 7919: a prime, for a scattered order
		count := []int{chunk, chunk}
		copies := make([][]byte, n)
		for i := range copies {
			copies[i] = make([]byte, len(buf))
			copyBox(view{buf: copies[i], shape: count, es: 4, start: []int{0, 0}}, v.sub(cellOrigin(i, rows, side, chunk)), count)
		}
		run := func(name string, f func(i int) error) {
			b.Run(fmt.Sprintf("%s-%d", name, chunk), func(b *testing.B) {
				b.SetBytes(int64(len(buf)))
				i := 0
				for b.Loop() {
					if err := f(i); err != nil {
						b.Fatal(err)
					}
					i++
				}
			})
		}
		run("gathered", func(i int) error {
			copyBox(view{buf: buf, shape: count, es: 4, start: []int{0, 0}}, v.sub(at(i)), count)
			_, err := c.encode(buf, out)
			return err
		})
		run("runs", func(i int) error {
			_, err := c.encodeRuns(runsOf(v.sub(at(i)), count), out)
			return err
		})
		run("contiguous", func(i int) error {
			_, err := c.encode(copies[i*7919%n], out)
			return err
		})
	}
}

// BenchmarkBloscDecodeRuns decodes 512 x 512 float32 Blosc LZ4 chunks
// (byte shuffle) into their places in a 128 MiB region, 16384 wide, in
// turn: into a chunk buffer, then copied (what a host read did), and
// unshuffled straight into the region's rows (decodeRuns), with the
// vector unshuffle (AVX2) and without.
func BenchmarkBloscDecodeRuns(b *testing.B) {
	const rows, side, chunk = 2048, 16384, 512
	c := bloscCodec{cname: "lz4", clevel: 5, shuffle: 1, typesize: 4}
	enc, err := c.encode(fielddata.Float32(chunk, chunk, 1), nil)
	if err != nil {
		b.Fatal(err)
	}
	region := make([]byte, rows*side*4)
	v := view{buf: region, shape: []int{rows, side}, es: 4}
	buf := make([]byte, chunk*chunk*4)
	at := func(i int) []int { return cellOrigin(i, rows, side, chunk) }
	count := []int{chunk, chunk}
	b.Run("copied", func(b *testing.B) {
		b.SetBytes(int64(len(buf)))
		i := 0
		for b.Loop() {
			if _, err := c.decode(enc, buf, len(buf)); err != nil {
				b.Fatal(err)
			}
			copyBox(v.sub(at(i)), view{buf: buf, shape: count, es: 4, start: []int{0, 0}}, count)
			i++
		}
	})
	vector := vectorInterleave
	b.Cleanup(func() { vectorInterleave = vector })
	for _, vec := range []bool{false, true} {
		if vec && !vector {
			continue
		}
		b.Run(fmt.Sprintf("runs/vector=%t", vec), func(b *testing.B) {
			vectorInterleave = vec
			b.SetBytes(int64(len(buf)))
			i := 0
			for b.Loop() {
				if err := c.decodeRuns(enc, runsOf(v.sub(at(i)), count)); err != nil {
					b.Fatal(err)
				}
				i++
			}
		})
	}
}

// cellOrigin returns the origin of cell i, taken in turn and wrapping, of
// a rows x side region in cells of chunk x chunk.
func cellOrigin(i, rows, side, chunk int) []int {
	i %= rows / chunk * side / chunk
	return []int{i / (side / chunk) * chunk, i % (side / chunk) * chunk}
}

// smallChunks runs f as a sub-benchmark of b for benchCodecs' raw and
// blosc-lz4, with a 16 MiB float32 array's metadata of 64 KiB chunks
// (128 x 128) and its values (a smooth field plus noise), and a new
// DirStore's directory under b.TempDir() (TMPDIR=/dev/shm: tmpfs, as
// bench/zarrbench). With chunks this small a read's or write's cost
// beyond its codec is the files' and the pipeline's, per chunk, which
// cpu-MB/s shows where the machine's other load moves MB/s.
func smallChunks(b *testing.B, f func(b *testing.B, m Metadata, src []byte, dir string)) {
	const side, chunk = 2048, 128
	src := fielddata.Float32(side, side, 1)
	for _, c := range []int{0, 2} {
		b.Run(benchCodecs[c].name, func(b *testing.B) {
			m := Metadata{Shape: []int{side, side}, ChunkShape: []int{chunk, chunk}, DataType: DataType{Kind: Float, Size: 4}, Codecs: benchCodecs[c].codecs}
			b.SetBytes(int64(len(src)))
			f(b, m, src, filepath.Join(b.TempDir(), "s"))
		})
	}
}

// newDirArray creates the array of m in a new DirStore at dir (anything
// there removed first).
func newDirArray(b *testing.B, m Metadata, dir string) *Array {
	if err := os.RemoveAll(dir); err != nil {
		b.Fatal(err)
	}
	s, err := NewDirStore(dir)
	if err != nil {
		b.Fatal(err)
	}
	a, err := Create(bg, s, "a", m)
	if err != nil {
		b.Fatal(err)
	}
	return a
}

// BenchmarkWriteSmallChunks writes the array of smallChunks into a new
// DirStore, each time.
func BenchmarkWriteSmallChunks(b *testing.B) {
	smallChunks(b, func(b *testing.B, m Metadata, src []byte, dir string) {
		var cpu time.Duration
		for b.Loop() {
			b.StopTimer()
			a := newDirArray(b, m, dir)
			b.StartTimer()
			c := cpuTime(b)
			if err := a.WriteRegion(bg, []int{0, 0}, m.Shape, src); err != nil {
				b.Fatal(err)
			}
			cpu += cpuTime(b) - c
		}
		b.ReportMetric(float64(b.N)*float64(len(src))/1e6/cpu.Seconds(), "cpu-MB/s")
	})
}

// BenchmarkReadSmallChunks reads the array of smallChunks whole into
// host memory.
func BenchmarkReadSmallChunks(b *testing.B) {
	smallChunks(b, func(b *testing.B, m Metadata, src []byte, dir string) {
		a := newDirArray(b, m, dir)
		if err := a.WriteRegion(bg, []int{0, 0}, m.Shape, src); err != nil {
			b.Fatal(err)
		}
		dst := make([]byte, len(src))
		report := cpuRate(b, len(src))
		for b.Loop() {
			if err := a.ReadRegion(bg, []int{0, 0}, m.Shape, dst); err != nil {
				b.Fatal(err)
			}
		}
		report()
	})
}
