package zarr

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"io/fs"
	"math/rand/v2"
	"net"
	"os"
	"path"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	"golang.org/x/sys/unix"

	"github.com/kvikgo/kvik"
	"github.com/kvikgo/kvik/internal/formatkit/zarrtune"
	"github.com/kvikgo/kvik/internal/testkit/fielddata"
)

// writeCodecs are chains whose last codec encodes into the buffer it is
// given: each compressor, a checksum, big-endian bytes, shards with the
// index at either end.
var writeCodecs = map[string][]Codec{
	"zstd":         {{Name: "bytes"}, {Name: "zstd", Configuration: map[string]any{"level": 3, "checksum": true}}},
	"gzip":         {{Name: "bytes"}, {Name: "gzip", Configuration: map[string]any{"level": 5}}},
	"blosc-lz4":    {{Name: "bytes"}, {Name: "blosc", Configuration: map[string]any{"cname": "lz4", "clevel": 5, "shuffle": "shuffle", "typesize": 4}}},
	"blosc-zstd":   {{Name: "bytes"}, {Name: "blosc", Configuration: map[string]any{"cname": "zstd", "clevel": 3, "shuffle": "bitshuffle", "typesize": 4, "blocksize": 1000}}},
	"blosc-zlib":   {{Name: "bytes"}, {Name: "blosc", Configuration: map[string]any{"cname": "zlib", "clevel": 1, "shuffle": "noshuffle", "typesize": 4}}},
	"crc32c":       {{Name: "bytes"}, {Name: "crc32c"}},
	"big-endian":   {{Name: "bytes", Configuration: map[string]any{"endian": "big"}}},
	"shard-end":    shardCodecs([]int{8, 8}, false, roundTripCodecs["zstd+crc"]),
	"shard-start":  shardCodecs([]int{8, 8}, true, []Codec{{Name: "bytes"}, {Name: "gzip", Configuration: map[string]any{"level": 1}}}),
	"gzip+crc32c":  {{Name: "bytes"}, {Name: "gzip", Configuration: map[string]any{"level": 1}}, {Name: "crc32c"}},
	"transpose+lz": {{Name: "transpose", Configuration: map[string]any{"order": []int{1, 0}}}, {Name: "bytes"}, {Name: "blosc", Configuration: map[string]any{"cname": "lz4"}}},
}

// TestEncodeIntoDst encodes chunks of each chain into buffers of several
// sizes, full of other bytes, and compares them with the chunk encoded
// into a new buffer: the same bytes, never in the chunk's memory.
func TestEncodeIntoDst(t *testing.T) {
	rng := rand.New(rand.NewPCG(4, 1))
	for name, codecs := range writeCodecs {
		t.Run(name, func(t *testing.T) {
			shape := []int{16 + rng.IntN(40), 16 + rng.IntN(40)}
			if strings.HasPrefix(name, "shard") {
				shape = []int{8 * (2 + rng.IntN(5)), 8 * (2 + rng.IntN(5))}
			}
			p, err := newPipelineV3(codecs, DataType{Kind: Float, Size: 4}, make([]byte, 4), shape)
			if err != nil {
				t.Fatal(err)
			}
			chunk := fielddata.Float32(shape[0], shape[1], rng.Uint64())
			want, err := p.encode(chunkArray{shape: shape, data: bytes.Clone(chunk)}, nil)
			if err != nil {
				t.Fatal(err)
			}
			for _, c := range []int{1, len(want) / 3, len(want), len(chunk), 2*len(chunk) + 4096} {
				dst := make([]byte, c)
				for i := range dst {
					dst[i] = byte(rng.Uint32())
				}
				src := bytes.Clone(chunk)
				got, err := p.encode(chunkArray{shape: shape, data: src}, dst[:rng.IntN(c+1)])
				if err != nil {
					t.Fatal(err)
				}
				if !bytes.Equal(got, want) {
					t.Fatalf("into a buffer of %d: %d bytes differ from the %d encoded into a new one", c, len(got), len(want))
				}
				if overlaps(got, src) || !bytes.Equal(src, chunk) {
					t.Fatalf("into a buffer of %d: the chunk's memory was used", c)
				}
			}
		})
	}
}

// keepStore keeps the values it is given, as a Store may: a write that
// reused one of them for the next chunk would change what it stored.
type keepStore struct{ memStore }

func (s *keepStore) Set(_ context.Context, key string, value []byte) error {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.m[key] = value
	return nil
}

// TestWriteBuffersReused writes arrays of many chunks in each chain of
// writeCodecs, twice with other data, to a DirStore (whose writes reuse
// their buffers) and to a store that keeps what it is given (whose must
// not), with arrays of other chains written between, and reads each
// back; the chunks at the edge hold the fill value past it.
func TestWriteBuffersReused(t *testing.T) {
	rng := rand.New(rand.NewPCG(4, 2))
	shape := []int{64, 50}
	dir, err := NewDirStore(t.TempDir())
	if err != nil {
		t.Fatal(err)
	}
	type written struct {
		a    *Array
		data []byte
	}
	var all []written
	for round := range 2 {
		for name, codecs := range writeCodecs {
			for _, s := range []Store{dir, &keepStore{memStore{m: map[string][]byte{}}}} {
				a, err := Create(bg, s, fmt.Sprintf("%s-%T-%d", name, s, round), Metadata{Shape: shape, ChunkShape: []int{16, 16}, DataType: DataType{Kind: Float, Size: 4}, Codecs: codecs, FillValue: 1.5})
				if err != nil {
					t.Fatal(err)
				}
				a.SetWorkers(1 + rng.IntN(4))
				data := fielddata.Float32(shape[0], shape[1], rng.Uint64())
				if err := a.WriteRegion(bg, []int{0, 0}, shape, data); err != nil {
					t.Fatal(err)
				}
				all = append(all, written{a, data})
			}
		}
	}
	for _, w := range all {
		got := make([]byte, len(w.data))
		if err := w.a.ReadRegion(bg, []int{0, 0}, shape, got); err != nil {
			t.Fatalf("%s: %v", w.a.path, err)
		}
		if !bytes.Equal(got, w.data) {
			t.Fatalf("%s: read back differs from what was written", w.a.path)
		}
		stored, err := w.a.store.Get(bg, w.a.ChunkKey([]int{3, 3}), nil)
		if err != nil {
			t.Fatal(err)
		}
		edge := make([]byte, 16*16*4)
		if err := w.a.DecodeChunk(stored, edge); err != nil {
			t.Fatal(err)
		}
		for r := range 16 {
			if row := edge[(r*16+2)*4 : (r+1)*16*4]; !isFill(row, w.a.pipe.fill) {
				t.Fatalf("%s: the edge chunk's row %d holds % x past the array, not the fill value", w.a.path, r, row)
			}
		}
	}
}

// TestWriteRegionStoresChunks writes a region that covers some chunks
// whole and others in part (an unaligned start) to Blosc arrays whose
// whole chunks are shuffled straight from the region's rows, to sharded
// arrays whose whole shards gather their inner chunks from the region,
// and to other chains, and compares every stored chunk with EncodeChunk of the
// chunk cut from the expected array: the same bytes.
func TestWriteRegionStoresChunks(t *testing.T) {
	rng := rand.New(rand.NewPCG(9, 10))
	chains := map[string][]Codec{
		"blosc-lz4":   writeCodecs["blosc-lz4"],
		"blosc-zstd2": {{Name: "bytes"}, {Name: "blosc", Configuration: map[string]any{"cname": "zstd", "clevel": 1, "shuffle": "shuffle", "typesize": 2, "blocksize": 700}}},
		"blosc-none":  writeCodecs["blosc-zlib"],
		"blosc+crc":   {{Name: "bytes"}, {Name: "blosc", Configuration: map[string]any{"cname": "lz4", "shuffle": "shuffle", "typesize": 4}}, {Name: "crc32c"}},
		"zstd":        writeCodecs["zstd"],
		"shard-end":   writeCodecs["shard-end"],
		"shard-start": writeCodecs["shard-start"],
	}
	for name, codecs := range chains {
		t.Run(name, func(t *testing.T) {
			shape, chunks := []int{50 + rng.IntN(30), 70 + rng.IntN(40)}, []int{16, 24}
			s, err := NewDirStore(t.TempDir())
			if err != nil {
				t.Fatal(err)
			}
			a, err := Create(bg, s, "a", Metadata{Shape: shape, ChunkShape: chunks, DataType: DataType{Kind: Float, Size: 4}, Codecs: codecs})
			if err != nil {
				t.Fatal(err)
			}
			start := []int{rng.IntN(10), rng.IntN(20)}
			stop := []int{shape[0] - rng.IntN(5), shape[1] - rng.IntN(5)}
			rows, cols := stop[0]-start[0], stop[1]-start[1]
			src := fielddata.Float32(rows, cols, 3)
			if err := a.WriteRegion(bg, start, stop, src); err != nil {
				t.Fatal(err)
			}
			whole := make([]byte, shape[0]*shape[1]*4) // fill value 0 outside the region
			for r := range rows {
				copy(whole[((start[0]+r)*shape[1]+start[1])*4:], src[r*cols*4:(r+1)*cols*4])
			}
			wv := view{buf: whole, shape: shape, es: 4}
			for i := 0; i*chunks[0] < shape[0]; i++ {
				for j := 0; j*chunks[1] < shape[1]; j++ {
					chunk := make([]byte, chunks[0]*chunks[1]*4)
					count := []int{min(chunks[0], shape[0]-i*chunks[0]), min(chunks[1], shape[1]-j*chunks[1])}
					copyBox(view{buf: chunk, shape: chunks, es: 4, start: []int{0, 0}}, wv.sub([]int{i * chunks[0], j * chunks[1]}), count)
					want, err := a.EncodeChunk(chunk)
					if err != nil {
						t.Fatal(err)
					}
					got, err := s.Get(bg, a.ChunkKey([]int{i, j}), nil)
					touched := (i+1)*chunks[0] > start[0] && i*chunks[0] < stop[0] && (j+1)*chunks[1] > start[1] && j*chunks[1] < stop[1]
					if !touched {
						if !errors.Is(err, fs.ErrNotExist) {
							t.Fatalf("chunk %d,%d outside the region: %v, want not stored", i, j, err)
						}
						continue
					}
					if err != nil {
						t.Fatal(err)
					}
					if !bytes.Equal(got, want) {
						t.Fatalf("chunk %d,%d (region %v-%v): stored bytes differ from the chunk encoded", i, j, start, stop)
					}
				}
			}
		})
	}
}

// TestSpreadDirs checks the order of a DirStore write's chunks: each
// chunk once, and workers taking them in turn at different directories
// (keys but their last element) until every directory has one; other
// stores, 1-D arrays and zarrtune.RowMajorWrites keep C order.
func TestSpreadDirs(t *testing.T) {
	rng := rand.New(rand.NewPCG(41, 42))
	dir, err := NewDirStore(t.TempDir())
	if err != nil {
		t.Fatal(err)
	}
	for trial := range 20 {
		nd := 1 + rng.IntN(3)
		shape, chunks := make([]int, nd), make([]int, nd)
		for d := range nd {
			chunks[d] = 1 + rng.IntN(4)
			shape[d] = 1 + rng.IntN(6*chunks[d])
		}
		for _, s := range []Store{dir, &memStore{m: map[string][]byte{}}} {
			a, err := Create(bg, s, fmt.Sprintf("a%d", trial), Metadata{Shape: shape, ChunkShape: chunks, DataType: DataType{Kind: Float, Size: 4}})
			if err != nil {
				t.Fatal(err)
			}
			var tasks []chunkTask
			forChunks(chunks, a.grid, box{start: make([]int, nd), count: shape}, func(c chunkTask) error { tasks = append(tasks, c); return nil })
			keys := func() []string {
				var k []string
				for _, c := range tasks {
					k = append(k, a.ChunkKey(c.coords))
				}
				return k
			}
			cOrder := keys()
			zarrtune.RowMajorWrites.Store(true)
			a.spreadDirs(tasks)
			zarrtune.RowMajorWrites.Store(false)
			if got := keys(); !slices.Equal(got, cOrder) {
				t.Fatalf("%v with RowMajorWrites: %v, want C order %v", shape, got, cOrder)
			}
			a.spreadDirs(tasks)
			got := keys()
			if _, ok := s.(*DirStore); !ok || nd == 1 {
				if !slices.Equal(got, cOrder) {
					t.Fatalf("%v on %T: %v, want C order %v", shape, s, got, cOrder)
				}
				continue
			}
			if !slices.Equal(slices.Sorted(slices.Values(got)), slices.Sorted(slices.Values(cOrder))) {
				t.Fatalf("%v: %v is not every chunk once (%v)", shape, got, cOrder)
			}
			dirs := map[string]bool{}
			for _, k := range got {
				dirs[path.Dir(k)] = true
			}
			w := len(dirs)
			for i := 0; i+w <= len(got); i += w {
				seen := map[string]bool{}
				for _, k := range got[i : i+w] {
					if d := path.Dir(k); seen[d] {
						t.Fatalf("%v: chunks %d..%d %v share directory %s", shape, i, i+w, got[i:i+w], d)
					} else {
						seen[d] = true
					}
				}
			}
		}
	}
}

// TestWriteNotRegular writes a whole array, from host memory and in bands
// as a device write does (chunks spread over directories, bands taken in
// turn), over a store whose chunk files include a FIFO, a directory, a
// socket and a link to a device node: each write fails with
// kvik.ErrNotRegular, at once, and leaves every one of them as it was,
// with no temporary file behind.
func TestWriteNotRegular(t *testing.T) {
	m := Metadata{Shape: []int{24, 20}, ChunkShape: []int{4, 5}, DataType: DataType{Kind: Float, Size: 4}, Codecs: writeCodecs["zstd"]}
	vals := fielddata.Float32(24, 20, 7)
	for _, banded := range []bool{false, true} {
		dir := t.TempDir()
		s, err := NewDirStore(dir)
		if err != nil {
			t.Fatal(err)
		}
		a, err := Create(bg, s, "a", m)
		if err != nil {
			t.Fatal(err)
		}
		chunk := func(k string) string { return filepath.Join(dir, "a", filepath.FromSlash(k)) }
		for _, d := range []string{"c/1", "c/2/3", "c/4"} {
			if err := os.MkdirAll(chunk(d), 0o755); err != nil {
				t.Fatal(err)
			}
		}
		if err := unix.Mkfifo(chunk("c/1/2"), 0o644); err != nil {
			t.Fatal(err)
		}
		sock, err := net.Listen("unix", chunk("c/4/0"))
		if err != nil {
			t.Fatal(err)
		}
		defer sock.Close()
		if err := os.MkdirAll(chunk("c/5"), 0o755); err != nil {
			t.Fatal(err)
		}
		if err := os.Symlink("/dev/null", chunk("c/5/1")); err != nil {
			t.Fatal(err)
		}
		kinds := map[string]fs.FileMode{}
		for _, k := range []string{"c/1/2", "c/2/3", "c/4/0", "c/5/1"} {
			fi, err := os.Lstat(chunk(k))
			if err != nil {
				t.Fatal(err)
			}
			kinds[k] = fi.Mode().Type()
		}
		ctx, cancel := context.WithTimeout(bg, 10*time.Second)
		if banded {
			r, _, _ := a.region([]int{0, 0}, m.Shape)
			var tasks []chunkTask
			forChunks(m.ChunkShape, a.grid, r, func(tk chunkTask) error { tasks = append(tasks, tk); return nil })
			bands := writePlan(r, m.ChunkShape, 4, 4*5*4*5, tasks) // a band per row of chunks
			for _, b := range bands {
				a.spreadDirs(b.tasks)
			}
			err = a.writeBandsFrom(ctx, bands, loadFake{src: vals, region: r.count, es: 4}, 8)
		} else {
			err = a.WriteRegion(ctx, []int{0, 0}, m.Shape, vals)
		}
		late := ctx.Err()
		cancel()
		if !errors.Is(err, kvik.ErrNotRegular) || late != nil {
			t.Errorf("banded %v: %v (context: %v), want kvik.ErrNotRegular at once", banded, err, late)
		}
		for k, mode := range kinds {
			if fi, err := os.Lstat(chunk(k)); err != nil || fi.Mode().Type() != mode {
				t.Errorf("banded %v: %s was a %v, now %v (%v)", banded, k, mode, fi.Mode().Type(), err)
			}
		}
		filepath.WalkDir(dir, func(p string, d fs.DirEntry, err error) error {
			if err == nil && strings.HasPrefix(d.Name(), ".") && p != dir {
				t.Errorf("banded %v: %s left behind", banded, p)
			}
			return nil
		})
	}
}
