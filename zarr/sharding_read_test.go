package zarr

import (
	"bytes"
	"context"
	"encoding/binary"
	"errors"
	"fmt"
	"math/rand/v2"
	"net/http"
	"net/http/httptest"
	"runtime"
	"slices"
	"strings"
	"sync"
	"testing"
)

// countingStore is a Store that records the ranged reads and whole
// reads made through it.
type countingStore struct {
	Store
	mu     sync.Mutex
	ranges []string // "key off n"
	gets   int
}

func (c *countingStore) ReadRange(ctx context.Context, key string, off int64, p []byte) (int64, error) {
	c.mu.Lock()
	c.ranges = append(c.ranges, fmt.Sprintf("%s %d %d", key, off, len(p)))
	c.mu.Unlock()
	return c.Store.ReadRange(ctx, key, off, p)
}

func (c *countingStore) Get(ctx context.Context, key string, buf []byte) ([]byte, error) {
	c.mu.Lock()
	c.gets++
	c.mu.Unlock()
	return c.Store.Get(ctx, key, buf)
}

func (c *countingStore) reset() (ranges []string, gets int) {
	c.mu.Lock()
	defer c.mu.Unlock()
	ranges, gets = c.ranges, c.gets
	c.ranges, c.gets = nil, 0
	return ranges, gets
}

// dataRanges returns the ranged reads that are not of a shard index
// (reads at a negative offset, or at 0 for an index at the start, of
// exactly the index's size).
func dataRanges(ranges []string, indexSize int64, start bool) []string {
	var out []string
	for _, r := range ranges {
		var key string
		var off, n int64
		fmt.Sscan(r, &key, &off, &n)
		if n == indexSize && (off < 0 || start && off == 0) {
			continue
		}
		out = append(out, r)
	}
	return out
}

// shardedArray creates a float32 array of shape in s with shards of
// shard elements made of inner chunks of inner, written whole with
// random values except for the inner chunks that holes picks, left at
// the fill value (missing from their shard's index). It returns the
// reference values.
func shardedArray(t *testing.T, rng *rand.Rand, s Store, shape, shard, inner []int, start bool, innerCodecs []Codec, holes func(i int) bool) (*Array, model) {
	t.Helper()
	dt := DataType{Kind: Float, Size: 4}
	m := Metadata{Shape: shape, ChunkShape: shard, DataType: dt, FillValue: 1.5, Codecs: shardCodecs(inner, start, innerCodecs)}
	a, err := Create(bg, s, "sh", m)
	if err != nil {
		t.Fatal(err)
	}
	ref := model{shape: shape, es: 4, buf: randValues(rng, dt, numElements(shape))}
	// Inner chunks picked by holes hold the fill value: the writer
	// leaves them out of their shard.
	fill := a.pipe.fill
	grid := make([]int, len(shape))
	for d := range shape {
		grid[d] = (shape[d] + inner[d] - 1) / inner[d]
	}
	forChunks(inner, grid, box{start: make([]int, len(shape)), count: shape}, func(tk chunkTask) error {
		if holes != nil && holes(flatIndex(tk.coords, grid)) {
			ref.sub(tk).fill(tk.sel.count, fill)
		}
		return nil
	})
	if err := a.WriteRegion(bg, make([]int, len(shape)), shape, ref.buf); err != nil {
		t.Fatal(err)
	}
	return a, ref
}

// sub returns the view of ref at a chunk task's place.
func (m model) sub(tk chunkTask) view {
	return view{buf: m.buf, shape: m.shape, es: m.es}.sub(tk.dstStart)
}

// TestShardedReadCoalesced reads whole shards and checks that each is
// one ranged read of its inner chunks (besides its index), where the
// old reader made one per inner chunk, for the index at either end and
// for uncompressed and zstd inner chunks; values match the reference.
func TestShardedReadCoalesced(t *testing.T) {
	rng := rand.New(rand.NewPCG(7, 8))
	bytesLE := Codec{Name: "bytes", Configuration: map[string]any{"endian": "little"}}
	zstd := Codec{Name: "zstd", Configuration: map[string]any{"level": 1}}
	for _, tc := range []struct {
		name   string
		codecs []Codec
		start  bool
	}{{"raw-end", []Codec{bytesLE}, false}, {"raw-start", []Codec{bytesLE}, true}, {"zstd-end", []Codec{bytesLE, zstd}, false}} {
		t.Run(tc.name, func(t *testing.T) {
			ds, err := NewDirStore(t.TempDir())
			if err != nil {
				t.Fatal(err)
			}
			cs := &countingStore{Store: ds}
			// 3 x 2 shards of 8 x 4 inner chunks of 5 x 7 float32.
			shape, shard, inner := []int{120, 56}, []int{40, 28}, []int{5, 7}
			a, ref := shardedArray(t, rng, cs, shape, shard, inner, tc.start, tc.codecs, nil)
			b, err := Open(bg, cs, "sh")
			if err != nil {
				t.Fatal(err)
			}
			is := b.pipe.sharded().indexSize()
			_ = a
			cs.reset()
			// One whole shard, then the whole array.
			for _, r := range [][2][]int{{{40, 28}, {80, 56}}, {{0, 0}, shape}} {
				want := ref.region(r[0], r[1])
				got := make([]byte, len(want))
				if err := b.ReadRegion(bg, r[0], r[1], got); err != nil {
					t.Fatal(err)
				}
				if !bytes.Equal(got, want) {
					t.Fatalf("region %v differs from the reference", r)
				}
				ranges, gets := cs.reset()
				shards := numElements([]int{(r[1][0] - r[0][0]) / 40, (r[1][1] - r[0][1]) / 28})
				data := dataRanges(ranges, is, tc.start)
				if gets != 0 || len(ranges)-len(data) != shards || len(data) != shards {
					t.Errorf("region %v of %d shards of 32 inner chunks: %d index reads, %d data reads, %d gets; want one index and one data read per shard: %q...",
						r, shards, len(ranges)-len(data), len(data), gets, data[:min(len(data), 4)])
				}
			}
		})
	}
}

// TestShardedReadRegions reads random, unaligned regions of sharded
// arrays with missing inner chunks (the fill value) and missing shards,
// into host memory from a DirStore and from a generic store, and checks
// them against the reference.
func TestShardedReadRegions(t *testing.T) {
	rng := rand.New(rand.NewPCG(9, 10))
	bytesLE := Codec{Name: "bytes", Configuration: map[string]any{"endian": "little"}}
	gzip := Codec{Name: "gzip", Configuration: map[string]any{"level": 1}}
	for _, codecs := range [][]Codec{{bytesLE}, {bytesLE, gzip}} {
		for _, generic := range []bool{false, true} {
			ds, err := NewDirStore(t.TempDir())
			if err != nil {
				t.Fatal(err)
			}
			var s Store = ds
			if generic {
				s = &countingStore{Store: ds}
			}
			shape := []int{37 + rng.IntN(40), 29 + rng.IntN(30), 3 + rng.IntN(4)}
			shard, inner := []int{12, 10, 4}, []int{3, 5, 2}
			holes := func(i int) bool { return i%3 == 1 || i%7 == 0 }
			_, ref := shardedArray(t, rng, s, shape, shard, inner, rng.IntN(2) == 0, codecs, holes)
			// Drop one shard whole: it reads as the fill value.
			a, err := Open(bg, s, "sh")
			if err != nil {
				t.Fatal(err)
			}
			if err := s.Delete(bg, a.ChunkKey([]int{1, 0, 0})); err != nil {
				t.Fatal(err)
			}
			gone := []int{shard[0], 0, 0}
			count := []int{min(shard[0], shape[0]-shard[0]), min(shard[1], shape[1]), min(shard[2], shape[2])}
			view{buf: ref.buf, shape: shape, es: 4}.sub(gone).fill(count, a.pipe.fill)
			for r := 0; r < 40; r++ {
				start, stop := randRegion(rng, shape)
				if r == 0 {
					start, stop = make([]int, 3), shape
				}
				a.SetWorkers(1 + rng.IntN(4))
				want := ref.region(start, stop)
				got := make([]byte, len(want))
				if err := a.ReadRegion(bg, start, stop, got); err != nil {
					t.Fatalf("%v %v-%v: %v", codecs, start, stop, err)
				}
				if !bytes.Equal(got, want) {
					t.Fatalf("%v generic=%v: region %v-%v differs from the reference", codecs, generic, start, stop)
				}
			}
		}
	}
}

// TestShardedReadHTTPRequests serves a sharded array over plain HTTP
// (http.FileServer answers ranges) and counts the ranged GETs of a full
// read: one per shard for the index and one for the inner chunks, where
// the old reader sent one per inner chunk.
func TestShardedReadHTTPRequests(t *testing.T) {
	rng := rand.New(rand.NewPCG(11, 12))
	dir := t.TempDir()
	ds, err := NewDirStore(dir)
	if err != nil {
		t.Fatal(err)
	}
	bytesLE := Codec{Name: "bytes", Configuration: map[string]any{"endian": "little"}}
	shape := []int{64, 96}
	_, ref := shardedArray(t, rng, ds, shape, []int{32, 48}, []int{4, 6}, false, []Codec{bytesLE}, func(i int) bool { return i == 5 })
	var mu sync.Mutex
	var ranged, whole int
	fsrv := http.FileServer(http.Dir(dir))
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if strings.HasPrefix(r.URL.Path, "/sh/c/") {
			mu.Lock()
			if r.Header.Get("Range") != "" {
				ranged++
			} else {
				whole++
			}
			mu.Unlock()
		}
		fsrv.ServeHTTP(w, r)
	}))
	defer srv.Close()
	s, err := OpenURL(bg, srv.URL, WithMaxRequests(4))
	if err != nil {
		t.Fatal(err)
	}
	defer s.Close()
	a, err := Open(bg, s, "sh")
	if err != nil {
		t.Fatal(err)
	}
	got := make([]byte, len(ref.buf))
	if err := a.ReadRegion(bg, []int{0, 0}, shape, got); err != nil {
		t.Fatal(err)
	}
	if !bytes.Equal(got, ref.buf) {
		t.Fatal("array read over HTTP differs from the reference")
	}
	// 4 shards of 64 inner chunks (one of them missing).
	if ranged != 8 || whole != 0 {
		t.Errorf("%d ranged and %d whole chunk GETs for 4 shards; want 8 ranged (index and inner chunks of each)", ranged, whole)
	}
	// An unaligned region inside one shard still reads correctly.
	start, stop := []int{3, 7}, []int{30, 45}
	want := ref.region(start, stop)
	got = make([]byte, len(want))
	if err := a.ReadRegion(bg, start, stop, got); err != nil {
		t.Fatal(err)
	}
	if !bytes.Equal(got, want) {
		t.Fatal("unaligned region over HTTP differs from the reference")
	}
}

// TestShardSpans checks the grouping of inner chunks into reads: gaps
// up to spanGap are read through, larger ones split, sizes are capped,
// and only pieces back to back in the store and in the region are
// direct.
func TestShardSpans(t *testing.T) {
	raw := &pipeline{dt: DataType{Kind: Uint, Size: 1}, ab: newBytesAB(DataType{Kind: Uint, Size: 1}, false)}
	a := &Array{workers: 4, store: &countingStore{}}
	out := view{shape: []int{1 << 30}, es: 1}
	pc := func(off, n int64, dst int) piece {
		return piece{key: "k", off: off, n: n, pipe: raw, shape: []int{int(n)}, sel: box{start: []int{0}, count: []int{int(n)}}, dstStart: []int{dst}}
	}
	const k = 1 << 10
	pieces := []piece{
		pc(0, 4*k, 0), pc(4*k, 4*k, 4*k), // back to back: direct
		pc(8*k+spanGap, 4*k, 8*k),       // after a gap of spanGap: joined, buffered
		pc(12*k+2*spanGap+1, 4*k, 12*k), // after a larger gap: a new span
		{key: "k", n: -1, missing: true, pipe: raw, shape: []int{1}, sel: box{start: []int{0}, count: []int{1}}, dstStart: []int{16 * k}},
	}
	sp := a.spans(pieces, out, true, 1)
	if len(sp) != 3 {
		t.Fatalf("%d spans, want 3: %+v", len(sp), sp)
	}
	if sp[1].off != 0 || sp[1].n != 12*k+spanGap || len(sp[1].pieces) != 3 || sp[1].direct {
		t.Errorf("first span [%d, +%d) of %d pieces, direct %v", sp[1].off, sp[1].n, len(sp[1].pieces), sp[1].direct)
	}
	if !sp[0].pieces[0].missing || sp[2].off != 12*k+2*spanGap+1 || !sp[2].single() {
		t.Errorf("spans %+v", sp)
	}
	// A direct piece of spanGap bytes or more is not buffered to join a
	// piece that is not direct (a partial inner chunk), nor the reverse.
	partial := pc(0, spanGap, 0)
	partial.sel.count[0]--
	for _, ps := range [][]piece{{partial, pc(spanGap, spanGap, spanGap)}, {pc(0, spanGap, 0), pc(spanGap, spanGap, 2*spanGap)}} {
		if sp := a.spans(ps, out, true, 1); len(sp) != 2 || !sp[0].single() || !sp[1].single() {
			t.Errorf("a direct piece and another: %d spans, want 2", len(sp))
		}
	}
	small := pc(0, 4*k, 0)
	small.sel.count[0]--
	if sp := a.spans([]piece{small, pc(4*k, 4*k, 4*k)}, out, true, 1); len(sp) != 1 || sp[0].direct {
		t.Errorf("two small pieces, one partial: %d spans, want one buffered", len(sp))
	}
	// Back to back pieces chain up to the direct size, others to the
	// buffered size.
	var many []piece
	for i := 0; i < 200; i++ {
		many = append(many, pc(int64(i)<<20, 1<<20, i<<20))
	}
	direct, buffered := a.spanSizes(many, 1)
	for _, chain := range []bool{true, false} {
		limit := buffered
		if chain {
			limit = direct
		}
		n := int64(0)
		for _, s := range a.spans(many, out, chain, 1) {
			if s.n > limit || s.direct != (chain && !s.single()) {
				t.Errorf("chain=%v: span of %d bytes (limit %d), direct %v", chain, s.n, limit, s.direct)
			}
			n += s.n
		}
		if n != 200<<20 {
			t.Errorf("spans cover %d bytes, want %d", n, 200<<20)
		}
	}
	// A remote store's slots are shared by the bands in flight: their
	// spans are sized for all of them; a local store's are not.
	local1, _ := a.spanSizes(many[:32], 1)
	local8, _ := a.spanSizes(many[:32], 8)
	r := &Array{workers: 12, store: &slotStore{n: 32}} // spans for the workers' requests, not every slot
	remote1, _ := r.spanSizes(many[:32], 1)
	remote8, _ := r.spanSizes(many[:32], 8)
	if local8 != local1 || remote1 != 32<<20/24 || remote8 != 8*32<<20/24 {
		t.Errorf("direct spans of a 32 MiB band: local %d, %d with 8 bands; remote %d, %d; want equal, then %d and %d", local1, local8, remote1, remote8, 32<<20/24, 8*32<<20/24)
	}
	// A span of all of a shard's inner chunks asks for the shard whole
	// (its index with them). A remote read of all of a shard of direct
	// pieces reads it as one span with WithWholeShards; else where it is
	// at most twice the direct span size (32 MiB bands, 8 in flight:
	// 32 MiB / 3), else in spans of that size. A read of part of a shard
	// never asks for it whole.
	shards := func(n int) []piece { // 32 MiB of inner chunks in n shards
		ps := slices.Clone(many[:32])
		for i := range ps {
			k := i / (32 / n)
			ps[i].key, ps[i].off, ps[i].size = fmt.Sprint(k), ps[i].off-int64(k*32/n)<<20, 32<<20/int64(n)+516
		}
		return ps
	}
	for _, c := range []struct {
		whole  bool
		shards int
		spans  int // per shard; 0: several, none whole
	}{{false, 1, 0}, {true, 1, 1}, {false, 2, 1}, {true, 2, 1}} {
		w := &Array{workers: 12, store: &slotStore{n: 32, whole: c.whole}}
		ps := shards(c.shards)
		size := ps[0].size
		sp := w.spans(ps, out, true, 8)
		if c.spans == 1 && (len(sp) != c.shards || sp[0].lo != 0 || sp[0].hi != size) ||
			c.spans == 0 && (len(sp) < 3*c.shards || slices.ContainsFunc(sp, func(s span) bool { return s.hi != 0 })) {
			t.Errorf("WithWholeShards %v: %d shards in %d spans, the first asking for [%d, %d)", c.whole, c.shards, len(sp), sp[0].lo, sp[0].hi)
		}
		if sp := w.spans(ps[:len(ps)-2], out, true, 8); slices.ContainsFunc(sp, func(s span) bool { return s.hi != 0 && s.key == ps[len(ps)-1].key }) {
			t.Errorf("WithWholeShards %v: a read of all but 2 inner chunks of a shard asks for the whole shard", c.whole)
		}
	}
	// A local store's reads are not changed.
	if sp := a.spans(shards(1), out, true, 1); len(sp) < 2 || sp[0].hi != 0 {
		t.Errorf("a local store: a whole shard in %d spans, the first asking for [%d, %d)", len(sp), sp[0].lo, sp[0].hi)
	}
}

// slotStore is a store with n request slots (as RemoteStore), reading
// wanted shards whole when whole is set (WithWholeShards).
type slotStore struct {
	countingStore
	n     int
	whole bool
}

func (s *slotStore) MaxRequests() int  { return s.n }
func (s *slotStore) wholeShards() bool { return s.whole }

// allocDuring returns the bytes allocated while f runs.
func allocDuring(f func()) uint64 {
	var m0, m1 runtime.MemStats
	runtime.GC()
	runtime.ReadMemStats(&m0)
	f()
	runtime.ReadMemStats(&m1)
	return m1.TotalAlloc - m0.TotalAlloc
}

// TestShardHostileMetadata opens documents whose shard index or chunk
// sizes are out of bounds: each fails with ErrInvalidMetadata (before
// this check, the first made a one-element read allocate a 4 TiB index,
// the second 4 GiB) and allocates next to nothing.
func TestShardHostileMetadata(t *testing.T) {
	sharded := func(chunk, inner string) string {
		return `{"zarr_format":3,"node_type":"array","shape":[` + chunk + `],"data_type":"uint8",` +
			`"chunk_grid":{"name":"regular","configuration":{"chunk_shape":[` + chunk + `]}},` +
			`"chunk_key_encoding":{"name":"default"},"fill_value":0,` +
			`"codecs":[{"name":"sharding_indexed","configuration":{"chunk_shape":[` + inner + `],"codecs":[{"name":"bytes"}]}}]}`
	}
	plain := func(dt, chunk string) string {
		return `{"zarr_format":3,"node_type":"array","shape":[` + chunk + `],"data_type":"` + dt + `",` +
			`"chunk_grid":{"name":"regular","configuration":{"chunk_shape":[` + chunk + `]}},` +
			`"chunk_key_encoding":{"name":"default"},"fill_value":0,"codecs":[{"name":"bytes"},{"name":"zstd"}]}`
	}
	docs := map[string]string{
		"index 2^38 inner chunks": sharded("274877906944", "1"),
		"index 2^28 inner chunks": sharded("268435456", "1"),
		"index 2^22+ inner":       sharded("4194305", "1"),
		"index 2-d":               sharded("65536,65536", "1,1"),
		"nested index":            `{"zarr_format":3,"node_type":"array","shape":[8388608],"data_type":"uint8","chunk_grid":{"name":"regular","configuration":{"chunk_shape":[8388608]}},"chunk_key_encoding":{"name":"default"},"fill_value":0,"codecs":[{"name":"sharding_indexed","configuration":{"chunk_shape":[8388608],"codecs":[{"name":"sharding_indexed","configuration":{"chunk_shape":[1],"codecs":[{"name":"bytes"}]}}]}}]}`,
		"chunk 2^38 float64":      plain("float64", "274877906944"),
		"chunk 2^32 x 8 bytes":    plain("uint64", "65536,65536"),
		"inner chunk 2^35 bytes":  sharded("34359738368", "34359738368"),
		"v2 chunk 2^36 bytes":     `{"zarr_format":2,"shape":[68719476736],"chunks":[68719476736],"dtype":"|u1","compressor":null,"fill_value":0,"order":"C","filters":null}`,
	}
	for name, doc := range docs {
		t.Run(name, func(t *testing.T) {
			ds, err := NewDirStore(t.TempDir())
			if err != nil {
				t.Fatal(err)
			}
			key := "a/zarr.json"
			if strings.HasPrefix(doc, `{"zarr_format":2`) {
				key = "a/.zarray"
			}
			if err := ds.Set(bg, key, []byte(doc)); err != nil {
				t.Fatal(err)
			}
			var oerr error
			alloc := allocDuring(func() {
				var a *Array
				if a, oerr = Open(bg, ds, "a"); oerr == nil {
					one := slices.Repeat([]int{1}, len(a.meta.Shape))
					oerr = a.ReadRegion(bg, make([]int, len(one)), one, make([]byte, a.meta.DataType.Size))
				}
			})
			if !errors.Is(oerr, ErrInvalidMetadata) {
				t.Errorf("got %v, want ErrInvalidMetadata", oerr)
			}
			if alloc > 4<<20 {
				t.Errorf("allocated %d bytes", alloc)
			}
			t.Logf("allocated %d bytes", alloc)
		})
	}
	// Within the limits, a chunk of 2^34 bytes and 2^22 inner chunks.
	for _, doc := range []string{sharded("4194304", "1"), plain("uint8", "17179869184")} {
		ds, err := NewDirStore(t.TempDir())
		if err != nil {
			t.Fatal(err)
		}
		if err := ds.Set(bg, "a/zarr.json", []byte(doc)); err != nil {
			t.Fatal(err)
		}
		if _, err := Open(bg, ds, "a"); err != nil {
			t.Errorf("%s: %v", doc, err)
		}
	}
}

// TestShardHostileObjects reads shards whose stored bytes or sizes lie:
// an index larger than its shard, an inner chunk bigger than it can be
// (from a server that claims a 32 TiB object), a shard that changes size
// between the reads of its index. Each fails with ErrCorruptChunk
// without allocating what the lie asks for.
func TestShardHostileObjects(t *testing.T) {
	// 2^20 inner chunks: a 16 MiB index, read only once the shard is
	// known to be at least that large.
	big := `{"zarr_format":3,"node_type":"array","shape":[1048576],"data_type":"uint8","chunk_grid":{"name":"regular","configuration":{"chunk_shape":[1048576]}},"chunk_key_encoding":{"name":"default"},"fill_value":0,"codecs":[{"name":"sharding_indexed","configuration":{"chunk_shape":[1],"codecs":[{"name":"bytes"}]}}]}`
	for _, start := range []bool{false, true} {
		doc := big
		if start {
			doc = strings.Replace(doc, `"codecs":[{"name":"bytes"}]}`, `"codecs":[{"name":"bytes"}],"index_location":"start"}`, 1)
		}
		ds, err := NewDirStore(t.TempDir())
		if err != nil {
			t.Fatal(err)
		}
		if err := ds.Set(bg, "a/zarr.json", []byte(doc)); err != nil {
			t.Fatal(err)
		}
		if err := ds.Set(bg, "a/c/0", bytes.Repeat([]byte{7}, 1<<20)); err != nil {
			t.Fatal(err)
		}
		a, err := Open(bg, ds, "a")
		if err != nil {
			t.Fatal(err)
		}
		var rerr error
		alloc := allocDuring(func() { rerr = a.ReadRegion(bg, []int{5}, []int{6}, make([]byte, 1)) })
		t.Logf("start=%v: allocated %d bytes", start, alloc)
		if !errors.Is(rerr, ErrCorruptChunk) || alloc > 8<<20 {
			t.Errorf("start=%v: %v, %d bytes allocated; want ErrCorruptChunk and at most the probe", start, rerr, alloc)
		}
	}

	// A server that claims a 32 TiB shard whose index points a gzip inner
	// chunk at 16 TiB of it.
	doc := `{"zarr_format":3,"node_type":"array","shape":[8],"data_type":"uint8","chunk_grid":{"name":"regular","configuration":{"chunk_shape":[8]}},"chunk_key_encoding":{"name":"default"},"fill_value":0,"codecs":[{"name":"sharding_indexed","configuration":{"chunk_shape":[4],"codecs":[{"name":"bytes"},{"name":"gzip"}],"index_codecs":[{"name":"bytes"}]}}]}`
	const claimed = int64(1) << 45
	idx := make([]byte, 32)
	for i := range idx {
		idx[i] = 0xff
	}
	putUint(idx[0:8], 0)
	putUint(idx[8:16], uint64(claimed/2))
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		switch r.URL.Path {
		case "/a/zarr.json":
			w.Write([]byte(doc))
		case "/a/c/0":
			if r.Header.Get("Range") != "bytes=-32" {
				t.Errorf("unexpected request for %s", r.Header.Get("Range"))
				http.Error(w, "no", http.StatusBadRequest)
				return
			}
			w.Header().Set("Content-Range", fmt.Sprintf("bytes %d-%d/%d", claimed-32, claimed-1, claimed))
			w.Header().Set("Content-Length", "32")
			w.WriteHeader(http.StatusPartialContent)
			w.Write(idx)
		default:
			http.NotFound(w, r)
		}
	}))
	defer srv.Close()
	s, err := OpenURL(bg, srv.URL)
	if err != nil {
		t.Fatal(err)
	}
	defer s.Close()
	a, err := Open(bg, s, "a")
	if err != nil {
		t.Fatal(err)
	}
	var rerr error
	alloc := allocDuring(func() { rerr = a.ReadRegion(bg, []int{0}, []int{8}, make([]byte, 8)) })
	t.Logf("allocated %d bytes", alloc)
	if !errors.Is(rerr, ErrCorruptChunk) || alloc > 4<<20 {
		t.Errorf("%v, %d bytes allocated; want ErrCorruptChunk", rerr, alloc)
	}
}

// TestShardLargeIndex reads shards whose index (20,000 inner chunks,
// 320 KiB) is larger than the first read of an index: it is completed
// with a second ranged read, at either end, and values match.
func TestShardLargeIndex(t *testing.T) {
	rng := rand.New(rand.NewPCG(13, 14))
	for _, start := range []bool{false, true} {
		ds, err := NewDirStore(t.TempDir())
		if err != nil {
			t.Fatal(err)
		}
		cs := &countingStore{Store: ds}
		shape := []int{80000}
		dt := DataType{Kind: Uint, Size: 2}
		a, err := Create(bg, cs, "a", Metadata{Shape: shape, ChunkShape: []int{40000}, DataType: dt, Codecs: shardCodecs([]int{2}, start, []Codec{{Name: "bytes"}})})
		if err != nil {
			t.Fatal(err)
		}
		if is := a.pipe.sharded().indexSize(); is <= indexProbe {
			t.Fatalf("index of %d bytes, want more than %d", is, indexProbe)
		}
		ref := model{shape: shape, es: 2, buf: randValues(rng, dt, shape[0])}
		if err := a.WriteRegion(bg, []int{0}, shape, ref.buf); err != nil {
			t.Fatal(err)
		}
		cs.reset()
		for _, r := range [][2]int{{0, 80000}, {39997, 40003}, {12345, 12346}} {
			want := ref.region([]int{r[0]}, []int{r[1]})
			got := make([]byte, len(want))
			if err := a.ReadRegion(bg, []int{r[0]}, []int{r[1]}, got); err != nil {
				t.Fatalf("start=%v %v: %v", start, r, err)
			}
			if !bytes.Equal(got, want) {
				t.Fatalf("start=%v: region %v differs from the reference", start, r)
			}
		}
		// Two index reads per shard read, and one read of its data: the
		// regions touch 2, 2 and 1 shards.
		if ranges, _ := cs.reset(); len(ranges) != 3*(2+2+1) {
			t.Errorf("start=%v: %d ranged reads, want 15: %q", start, len(ranges), ranges)
		}
	}
}

// TestShardSharedRanges reads a shard, written by hand, whose index
// points two inner chunks at the same bytes and leaves a gap before a
// third: every inner chunk reads its bytes, with one ranged read.
func TestShardSharedRanges(t *testing.T) {
	ds, err := NewDirStore(t.TempDir())
	if err != nil {
		t.Fatal(err)
	}
	cs := &countingStore{Store: ds}
	if _, err := Create(bg, cs, "a", Metadata{Shape: []int{12}, ChunkShape: []int{12}, DataType: DataType{Kind: Uint, Size: 1},
		Codecs: []Codec{{Name: "sharding_indexed", Configuration: map[string]any{"chunk_shape": []int{4}, "codecs": []Codec{{Name: "bytes"}}, "index_codecs": []Codec{{Name: "bytes"}}}}}}); err != nil {
		t.Fatal(err)
	}
	shard := []byte("abcd....wxyz")
	for _, e := range [][2]uint64{{0, 4}, {0, 4}, {8, 4}} {
		shard = binary.LittleEndian.AppendUint64(shard, e[0])
		shard = binary.LittleEndian.AppendUint64(shard, e[1])
	}
	if err := ds.Set(bg, "a/c/0", shard); err != nil {
		t.Fatal(err)
	}
	a, err := Open(bg, cs, "a")
	if err != nil {
		t.Fatal(err)
	}
	cs.reset()
	got := make([]byte, 12)
	if err := a.ReadRegion(bg, []int{0}, []int{12}, got); err != nil {
		t.Fatal(err)
	}
	if string(got) != "abcdabcdwxyz" {
		t.Errorf("read %q, want %q", got, "abcdabcdwxyz")
	}
	if ranges, _ := cs.reset(); len(ranges) != 2 {
		t.Errorf("%d ranged reads, want 2 (index, data): %q", len(ranges), ranges)
	}
}
