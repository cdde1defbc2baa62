package zarr

import (
	"bytes"
	"context"
	"fmt"
	"math/rand/v2"
	"path/filepath"
	"testing"
	"time"

	"github.com/kvikgo/kvik/internal/formatkit/zarrtune"
	"github.com/kvikgo/kvik/internal/testkit/fielddata"
	"github.com/kvikgo/kvik/internal/testkit/s3test"
)

// BenchmarkReadRegionZstd reads a 64 MiB zstd-compressed float32 array
// into host memory with 1..8 decode workers (ratios against workers=1 are
// the figure to compare; see bench/zarrbench for device reads).
func BenchmarkReadRegionZstd(b *testing.B) {
	s, err := NewDirStore(b.TempDir())
	if err != nil {
		b.Fatal(err)
	}
	shape := []int{1024, 16384}
	a, err := Create(bg, s, "z", Metadata{Shape: shape, ChunkShape: []int{64, 16384}, DataType: DataType{Kind: Float, Size: 4},
		Codecs: []Codec{{Name: "bytes"}, {Name: "zstd", Configuration: map[string]any{"level": 1}}}})
	if err != nil {
		b.Fatal(err)
	}
	src := randValues(rand.New(rand.NewPCG(1, 1)), DataType{Kind: Float, Size: 4}, numElements(shape))
	if err := a.WriteRegion(bg, []int{0, 0}, shape, src); err != nil {
		b.Fatal(err)
	}
	dst := make([]byte, len(src))
	for _, w := range []int{1, 2, 4, 8} {
		b.Run(fmt.Sprintf("workers=%d", w), func(b *testing.B) {
			a.SetWorkers(w)
			b.SetBytes(int64(len(dst)))
			for i := 0; i < b.N; i++ {
				if err := a.ReadRegion(bg, []int{0, 0}, shape, dst); err != nil {
					b.Fatal(err)
				}
			}
		})
	}
}

// BenchmarkRemoteRegion reads a 64 MiB uncompressed array of 1 MiB
// chunks from versitygw on loopback into host memory: the concurrent
// region read against a loop that fetches one chunk at a time (see
// bench/zarr_remote_gpu.sh for device reads at 1 GiB).
func BenchmarkRemoteRegion(b *testing.B) {
	srv := s3test.Start(b)
	shape, chunks := []int{64 * 256, 1024}, []int{256, 1024}
	local, err := NewDirStore(filepath.Join(srv.Dir, s3test.Bucket, "b.zarr"))
	if err != nil {
		b.Fatal(err)
	}
	a, err := Create(bg, local, "", Metadata{Shape: shape, ChunkShape: chunks, DataType: DataType{Kind: Float, Size: 4}})
	if err != nil {
		b.Fatal(err)
	}
	src := randValues(rand.New(rand.NewPCG(1, 1)), DataType{Kind: Float, Size: 4}, numElements(shape))
	if err := a.WriteRegion(bg, []int{0, 0}, shape, src); err != nil {
		b.Fatal(err)
	}
	s, err := OpenURL(bg, srv.URLOf("b.zarr"), WithRemoteOptions(srv.Opts()...))
	if err != nil {
		b.Fatal(err)
	}
	defer s.Close()
	ra, err := Open(bg, s, "")
	if err != nil {
		b.Fatal(err)
	}
	dst := make([]byte, len(src))
	b.Run("region", func(b *testing.B) {
		b.SetBytes(int64(len(dst)))
		for b.Loop() {
			if err := ra.ReadRegion(bg, []int{0, 0}, shape, dst); err != nil {
				b.Fatal(err)
			}
		}
	})
	b.Run("chunk-loop", func(b *testing.B) {
		b.SetBytes(int64(len(dst)))
		n := chunks[0] * chunks[1] * 4
		for b.Loop() {
			for c := 0; c < shape[0]/chunks[0]; c++ {
				if _, err := s.Get(bg, ra.ChunkKey([]int{c, 0}), dst[c*n:c*n:(c+1)*n]); err != nil {
					b.Fatal(err)
				}
			}
		}
	})
	if !bytes.Equal(dst, src) {
		b.Fatal("read back differs")
	}
}

// BenchmarkDecodeSmallChunk decodes a 32-byte chunk with each deflate
// codec and zstd: with small inner chunks (a shard of many), setting up
// a decoder costs more than decoding.
func BenchmarkDecodeSmallChunk(b *testing.B) {
	data := []byte("abcdefghijklmnopabcdefghijklmnop")
	for _, c := range []struct {
		name string
		c    interface {
			encode(src, dst []byte) ([]byte, error)
			decode(src, dst []byte, limit int) ([]byte, error)
		}
	}{{"gzip", gzipCodec{level: 5}}, {"zlib", zlibCodec{level: 5}}, {"zstd", zstdCodec{level: 3}}} {
		enc, err := c.c.encode(data, nil)
		if err != nil {
			b.Fatal(err)
		}
		b.Run(c.name, func(b *testing.B) {
			b.ReportAllocs()
			dst := make([]byte, 0, len(data))
			for b.Loop() {
				if _, err := c.c.decode(enc, dst, len(data)); err != nil {
					b.Fatal(err)
				}
			}
		})
	}
}

// rotateSink is a device sink without a device: band buffers in
// rotation, each free again as soon as it is filled, so that
// BenchmarkReadBands measures the host side of device reads alone.
type rotateSink struct{ free chan []byte }

func (s rotateSink) take(_ context.Context, b *band) ([]byte, error) {
	buf := <-s.free
	return buf[:numElements(b.box.count)*4], nil
}
func (s rotateSink) filled(b *band) error { s.free <- b.buf[:cap(b.buf)]; return nil }
func (rotateSink) close() error           { return nil }

// BenchmarkReadBands reads a 64 MiB float32 array of 1 MiB chunks (512 x
// 512, a smooth field plus noise) the way ReadRegionDevice does, with
// the band buffers in each layout (region: chunks read and decoded into
// the band's rows; cells: each chunk whole in its slot), minus the copies
// to the device; uncompressed and zstd.
func BenchmarkReadBands(b *testing.B) {
	shape := []int{4096, 4096}
	data := fielddata.Float32(shape[0], shape[1], 1)
	for _, codec := range []string{"raw", "zstd"} {
		s, err := NewDirStore(b.TempDir())
		if err != nil {
			b.Fatal(err)
		}
		m := Metadata{Shape: shape, ChunkShape: []int{512, 512}, DataType: DataType{Kind: Float, Size: 4}}
		if codec == "zstd" {
			m.Codecs = []Codec{{Name: "bytes"}, {Name: "zstd", Configuration: map[string]any{"level": 3}}}
		}
		a, err := Create(bg, s, "a", m)
		if err != nil {
			b.Fatal(err)
		}
		if err := a.WriteRegion(bg, []int{0, 0}, shape, data); err != nil {
			b.Fatal(err)
		}
		r, _, _ := a.region([]int{0, 0}, shape)
		size, n := bandBuffers(1<<20, 8)
		for layout, name := range map[int32]string{zarrtune.Region: "region", zarrtune.Cells: "cells"} {
			b.Run(codec+"/"+name, func(b *testing.B) {
				sink := rotateSink{free: make(chan []byte, n)}
				for range n {
					sink.free <- make([]byte, size)
				}
				b.SetBytes(int64(len(data)))
				b.ReportAllocs()
				for b.Loop() {
					p, err := a.bandPlan(bg, r, size, func(bd *band) { layoutBands([]*band{bd}, r.count, 4, layout) })
					if err != nil {
						b.Fatal(err)
					}
					if err := a.readBands(bg, p, sink, nil); err != nil {
						b.Fatal(err)
					}
				}
			})
		}
	}
}

// BenchmarkDevicePlan plans a device read of a whole 1 GiB array of
// 1 MiB Blosc chunks, as ReadRegionDevice does before its workers start
// (1.2 ms of one core on an H200 host was 1.5% of such a read).
func BenchmarkDevicePlan(b *testing.B) {
	s, _ := NewDirStore(b.TempDir())
	m := Metadata{Shape: []int{16384, 16384}, ChunkShape: []int{512, 512}, DataType: DataType{Kind: Float, Size: 4},
		Codecs: []Codec{{Name: "bytes", Configuration: map[string]any{"endian": "little"}}, {Name: "blosc", Configuration: map[string]any{"cname": "lz4", "clevel": 5, "shuffle": "shuffle", "typesize": 4, "blocksize": 0}}}}
	a, err := Create(bg, s, "", m)
	if err != nil {
		b.Fatal(err)
	}
	r, _, _ := a.region([]int{0, 0}, []int{16384, 16384})
	es := 4
	for b.Loop() {
		bufSize, _ := bandBuffers(numElements(a.cellShape())*es, 0)
		out := view{shape: r.count, es: es}
		p, _ := a.bandPlan(bg, r, bufSize, func(bd *band) {
			a.directBand(bd, out)
			layoutBands([]*band{bd}, r.count, es, zarrtune.DeviceLayout.Load())
		})
		workerStaged(p.bands, es)
	}
}

// latencyStore answers each ReadRange after 10 ms, as a distant S3
// does, up to MaxRequests at once.
type latencyStore struct {
	Store
	slots chan struct{}
}

func (s latencyStore) MaxRequests() int { return cap(s.slots) }

func (s latencyStore) ReadRange(ctx context.Context, key string, off int64, p []byte) (int64, error) {
	s.slots <- struct{}{}
	defer func() { <-s.slots }()
	time.Sleep(10 * time.Millisecond)
	return s.Store.ReadRange(ctx, key, off, p)
}

// BenchmarkShardIndexes reads a 4 MiB array of 256 small shards from a
// store of 10 ms requests, 32 at once, into host memory and in 64 KiB
// bands (as into device memory): "eager" reads every shard index before
// any chunk (zarrtune.EagerShardPlan), "ahead" plans bands as their
// indexes arrive (shardPlan). Reading the indexes after the first band's
// a quarter of the slots at a time took 1.9x as long as eager here.
func BenchmarkShardIndexes(b *testing.B) {
	s, err := NewDirStore(b.TempDir())
	if err != nil {
		b.Fatal(err)
	}
	m := Metadata{Shape: []int{4096, 256}, ChunkShape: []int{16, 256}, DataType: DataType{Kind: Float, Size: 4},
		Codecs: shardCodecs([]int{4, 256}, false, []Codec{{Name: "bytes", Configuration: map[string]any{"endian": "little"}}})}
	a, err := Create(bg, s, "a", m)
	if err != nil {
		b.Fatal(err)
	}
	vals := randValues(rand.New(rand.NewPCG(1, 2)), m.DataType, numElements(m.Shape))
	if err := a.WriteRegion(bg, []int{0, 0}, m.Shape, vals); err != nil {
		b.Fatal(err)
	}
	rd, err := Open(bg, latencyStore{s, make(chan struct{}, 32)}, "a")
	if err != nil {
		b.Fatal(err)
	}
	r, _, _ := rd.region([]int{0, 0}, m.Shape)
	out := make([]byte, len(vals))
	for _, eager := range []bool{true, false} {
		name := map[bool]string{true: "eager", false: "ahead"}[eager]
		b.Run(name+"/host", func(b *testing.B) {
			zarrtune.EagerShardPlan.Store(eager)
			defer zarrtune.EagerShardPlan.Store(false)
			b.SetBytes(int64(len(vals)))
			for b.Loop() {
				if err := rd.ReadRegion(bg, []int{0, 0}, m.Shape, out); err != nil {
					b.Fatal(err)
				}
			}
		})
		b.Run(name+"/bands", func(b *testing.B) {
			zarrtune.EagerShardPlan.Store(eager)
			defer zarrtune.EagerShardPlan.Store(false)
			b.SetBytes(int64(len(vals)))
			for b.Loop() {
				p, err := rd.bandPlan(bg, r, 64<<10, nil)
				if err != nil {
					b.Fatal(err)
				}
				free := make(chan []byte, 8)
				for range cap(free) {
					free <- make([]byte, 64<<10)
				}
				if err := rd.readBands(bg, p, rotateSink{free: free}, nil); err != nil {
					b.Fatal(err)
				}
			}
		})
	}
}
