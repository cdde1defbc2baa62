package zarr

import (
	"bytes"
	"context"
	"encoding/binary"
	"errors"
	"fmt"
	"hash/crc32"
	"math"
	"math/rand/v2"
	"slices"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"go.uber.org/goleak"

	"github.com/kvikgo/kvik/internal/formatkit/zarrtune"
)

// randGrid returns a random region of a random array of 1 to 4
// dimensions, a cell shape and an element size.
func randGrid(rng *rand.Rand) (r box, unit []int, es int) {
	nd := 1 + rng.IntN(4)
	r = box{start: make([]int, nd), count: make([]int, nd)}
	unit = make([]int, nd)
	for d := range nd {
		unit[d] = 1 + rng.IntN(9)
		r.start[d] = rng.IntN(20)
		r.count[d] = 1 + rng.IntN(30)
	}
	return r, unit, []int{1, 2, 4, 8}[rng.IntN(4)]
}

// TestBandGrid checks the band plan of random regions, cells, element
// sizes and limits: the bands cover every element of the region once,
// never cut a cell, hold at most the limit unless one cell is larger
// (then a band is one cell), a region under the limit is one band, and
// split puts each chunk's part of the region in the band that holds it
// (a missing shard across several, each part in its band).
func TestBandGrid(t *testing.T) {
	rng := rand.New(rand.NewPCG(21, 22))
	for i := range 2000 {
		r, unit, es := randGrid(rng)
		total := numElements(r.count) * es
		limit := []int{es, 1 + rng.IntN(total+1), total, math.MaxInt}[rng.IntN(4)]
		g := newBandGrid(r, unit, es, limit)
		name := fmt.Sprintf("case %d: region %v+%v, cells %v, %d-byte elements, limit %d", i, r.start, r.count, unit, es, limit)
		if total <= limit && g.n() != 1 {
			t.Fatalf("%s: %d bands for a region under the limit", name, g.n())
		}
		seen := make([]int, numElements(r.count))
		rv := view{shape: r.count, es: 1}
		for b := range g.n() {
			bb := g.box(b)
			oneCell := true
			for d := range r.count {
				lo, hi := r.start[d]+bb.start[d], r.start[d]+bb.start[d]+bb.count[d]
				if bb.count[d] <= 0 || lo%unit[d] != 0 && bb.start[d] != 0 || hi%unit[d] != 0 && hi != r.start[d]+r.count[d] {
					t.Fatalf("%s: band %d, %v+%v, cuts a cell along %d", name, b, bb.start, bb.count, d)
				}
				oneCell = oneCell && (hi-1)/unit[d] == lo/unit[d]
			}
			if n := numElements(bb.count) * es; n > limit && !oneCell {
				t.Fatalf("%s: band %d of %d bytes, more than one cell", name, b, n)
			}
			rv.sub(bb.start).runs(bb.count, func(off, n int) error {
				for k := off; k < off+n; k++ {
					seen[k]++
				}
				return nil
			})
		}
		for k, n := range seen {
			if n != 1 {
				t.Fatalf("%s: element %d in %d bands", name, k, n)
			}
		}
		grid := make([]int, len(unit))
		for d := range grid {
			grid[d] = (r.start[d]+r.count[d])/unit[d] + 1
		}
		forChunks(unit, grid, r, func(tk chunkTask) error {
			pc := piece{sel: tk.sel, dstStart: tk.dstStart}
			calls := 0
			g.split(pc, func(b int, p piece) {
				calls++
				if !boxInside(p.dstStart, p.sel.count, g.box(b)) {
					t.Fatalf("%s: chunk %v's part %v+%v outside band %d", name, tk.coords, p.dstStart, p.sel.count, b)
				}
			})
			if calls != 1 {
				t.Fatalf("%s: chunk %v in %d bands", name, tk.coords, calls)
			}
			return nil
		})
		// The whole region as one piece (a missing shard): its parts
		// are the bands.
		cover := 0
		g.split(piece{sel: box{start: make([]int, len(unit)), count: r.count}, dstStart: make([]int, len(unit))}, func(b int, p piece) {
			bb := g.box(b)
			if !slices.Equal(p.dstStart, bb.start) || !slices.Equal(p.sel.count, bb.count) || !slices.Equal(p.sel.start, bb.start) {
				t.Fatalf("%s: a region-wide piece's part %v+%v in band %d, %v+%v", name, p.dstStart, p.sel.count, b, bb.start, bb.count)
			}
			cover++
		})
		if cover != g.n() {
			t.Fatalf("%s: a region-wide piece split in %d parts for %d bands", name, cover, g.n())
		}
	}
}

func boxInside(start, count []int, b box) bool {
	for d := range start {
		if start[d] < b.start[d] || start[d]+count[d] > b.start[d]+b.count[d] {
			return false
		}
	}
	return true
}

// TestBandCopies assembles each band of random plans from a reference
// region, applies the band's copies (as cuMemcpy2D would) to a buffer
// for the region and checks that every byte lands once, in its place, and
// that a band that is contiguous in the region is one copy.
func TestBandCopies(t *testing.T) {
	rng := rand.New(rand.NewPCG(23, 24))
	for i := range 1000 {
		r, unit, es := randGrid(rng)
		total := numElements(r.count) * es
		g := newBandGrid(r, unit, es, 1+rng.IntN(total))
		ref := make([]byte, total)
		for k := range ref {
			ref[k] = byte(rng.Uint32())
		}
		rv := view{buf: ref, shape: r.count, es: es}
		out := make([]byte, total)
		writes := make([]int, total)
		for b := range g.n() {
			bb := g.box(b)
			buf := make([]byte, numElements(bb.count)*es)
			copyBox(view{buf: buf, shape: bb.count, es: es, start: make([]int, len(bb.count))}, rv.sub(bb.start), bb.count)
			copies := bandCopies(r.count, bb, es)
			if contiguous(rv, bb.start, bb.count) != (len(copies) == 1 && copies[0].height == 1) {
				t.Fatalf("case %d: band %v+%v of region %v: %d copies %+v", i, bb.start, bb.count, r.count, len(copies), copies)
			}
			for _, c := range copies {
				for y := range c.height {
					s, d := c.src+y*c.srcPitch, c.dst+y*c.dstPitch
					copy(out[d:d+c.width], buf[s:s+c.width])
					for k := d; k < d+c.width; k++ {
						writes[k]++
					}
				}
			}
		}
		if !bytes.Equal(out, ref) {
			t.Fatalf("case %d: region %v+%v, cells %v, es %d: bands copied differ from the region", i, r.start, r.count, unit, es)
		}
		for k, n := range writes {
			if n != 1 {
				t.Fatalf("case %d: byte %d written %d times", i, k, n)
			}
		}
	}
}

// fakeSink stands in for device memory in CPU tests of device reads: it
// hands out at most n buffers of size bytes, and "copies" each filled
// band into dev after a random delay with the band's copies, checking
// that nothing wrote to the band meanwhile, that each byte of dev is
// written once, and that a buffer is not handed out again before its
// copy is done. Pieces a band left shuffled (band.shuf) it unshuffles
// first, as the GPU would, in a copy of the band (unshuffled counts
// them).
type fakeSink struct {
	region     []int
	es         int
	size       int
	n          int
	dev        []byte
	writes     []int
	bufs       int
	free       chan []byte
	rng        *rand.Rand
	mu         sync.Mutex
	wg         sync.WaitGroup
	err        error
	unshuffled int
}

func newFakeSink(region []int, es, size, n int, seed uint64) *fakeSink {
	total := numElements(region) * es
	return &fakeSink{region: region, es: es, size: size, n: n, dev: bytes.Repeat([]byte{0xEE}, total), writes: make([]int, total),
		free: make(chan []byte, n), rng: rand.New(rand.NewPCG(seed, 1))}
}

func (s *fakeSink) take(ctx context.Context, b *band) ([]byte, error) {
	var buf []byte
	select {
	case buf = <-s.free:
	default:
		if s.bufs < s.n {
			s.bufs++
			buf = make([]byte, s.size)
			break
		}
		select {
		case buf = <-s.free:
		case <-ctx.Done():
			return nil, ctx.Err()
		}
	}
	n := numElements(b.box.count) * s.es
	if n > s.size {
		return nil, fmt.Errorf("band %v+%v of %d bytes for buffers of %d", b.box.start, b.box.count, n, s.size)
	}
	for k := range buf {
		buf[k] = 0xDD // what a reused pinned buffer holds
	}
	return buf[:n], nil
}

func (s *fakeSink) filled(b *band) error {
	s.mu.Lock()
	delay := time.Duration(s.rng.IntN(300)) * time.Microsecond
	s.mu.Unlock()
	sum := crc32.ChecksumIEEE(b.buf)
	s.wg.Add(1)
	go func() {
		defer s.wg.Done()
		time.Sleep(delay)
		s.mu.Lock()
		buf := b.buf
		if b.shuf != nil {
			buf = bytes.Clone(b.buf) // the GPU unshuffles on the device, not in the band
			for i, sp := range b.shuf {
				for j, sh := range sp {
					if sh.typesize > 0 {
						s.unshuffled++
						sh.undo(buf[sh.off : sh.off+numElements(b.spans[i].pieces[j].sel.count)*s.es])
					}
				}
			}
		}
		for _, c := range b.copies {
			for y := range c.height {
				src, dst := c.src+y*c.srcPitch, c.dst+y*c.dstPitch
				copy(s.dev[dst:dst+c.width], buf[src:src+c.width])
				for k := dst; k < dst+c.width; k++ {
					s.writes[k]++
				}
			}
		}
		if crc32.ChecksumIEEE(b.buf) != sum && s.err == nil {
			s.err = fmt.Errorf("band %v+%v changed after it was filled", b.box.start, b.box.count)
		}
		s.mu.Unlock()
		s.free <- b.buf[:cap(b.buf)]
	}()
	return nil
}

func (s *fakeSink) close() error {
	s.wg.Wait()
	return s.err
}

// readFake reads [start, stop) of a as ReadRegionDevice does, in bands of
// at most limit bytes through n buffers, into a fakeSink, and returns
// the "device" bytes.
func readFake(t *testing.T, a *Array, start, stop []int, limit, n int, seed uint64) []byte {
	t.Helper()
	layout := int32(seed % 3) // a zarrtune layout
	s, err := readFakeWith(a, start, stop, limit, n, seed, layout, false)
	if err != nil {
		t.Fatalf("%v-%v in bands of %d, layout %d: %v", start, stop, limit, layout, err)
	}
	return s.dev
}

// readFakeWith is readFake in the given layout, with its bands' Blosc
// pieces left shuffled for the sink where gpu is set, as a device read
// whose GPU unshuffles leaves them; it fails where a byte of the
// region is not copied once.
func readFakeWith(a *Array, start, stop []int, limit, n int, seed uint64, layout int32, gpu bool) (*fakeSink, error) {
	r, size, err := a.region(start, stop)
	if err != nil || size == 0 {
		return &fakeSink{}, err
	}
	p, err := a.bandPlan(bg, r, limit, func(b *band) {
		layoutBands([]*band{b}, r.count, a.meta.DataType.Size, layout)
		if gpu && !b.direct {
			b.shuf = make([][]pieceShuffle, len(b.spans))
			for i := range b.spans {
				b.shuf[i] = make([]pieceShuffle, len(b.spans[i].pieces))
			}
		}
	})
	if err != nil {
		return nil, err
	}
	s := newFakeSink(r.count, a.meta.DataType.Size, limit, n, seed)
	if err := a.readBands(bg, p, s, nil); err != nil {
		return s, err
	}
	for k, w := range s.writes {
		if w != 1 {
			return s, fmt.Errorf("byte %d copied %d times", k, w)
		}
	}
	return s, nil
}

// bandCases are arrays for the band tests: every codec family, sharded
// with missing inner chunks, v2 in F order, three dimensions.
var bandCases = map[string]Metadata{
	"raw":        {Shape: []int{70, 90}, ChunkShape: []int{16, 12}, DataType: DataType{Kind: Float, Size: 4}},
	"raw-3d":     {Shape: []int{9, 31, 17}, ChunkShape: []int{4, 8, 5}, DataType: DataType{Kind: Int, Size: 2}, FillValue: -3},
	"zstd":       {Shape: []int{61, 47}, ChunkShape: []int{10, 16}, DataType: DataType{Kind: Float, Size: 8}, Codecs: roundTripCodecs["zstd+crc"], FillValue: "NaN"},
	"blosc":      {Shape: []int{57, 33}, ChunkShape: []int{10, 10}, DataType: DataType{Kind: Uint, Size: 4}, Codecs: roundTripCodecs["blosc-lz4"]},
	"blosc-zstd": {Shape: []int{40, 40}, ChunkShape: []int{16, 8}, DataType: DataType{Kind: Float, Size: 4}, Codecs: roundTripCodecs["blosc-zstd"]},
	"gzip":       {Shape: []int{45, 29}, ChunkShape: []int{7, 11}, DataType: DataType{Kind: Int, Size: 4}, Codecs: roundTripCodecs["gzip"]},
	"sharded":    {Shape: []int{40, 36}, ChunkShape: []int{8, 12}, DataType: DataType{Kind: Float, Size: 2}, Codecs: shardCodecs([]int{4, 6}, false, roundTripCodecs["zstd+crc"])},
	"sharded-raw": {Shape: []int{45, 36}, ChunkShape: []int{16, 12}, DataType: DataType{Kind: Int, Size: 4},
		Codecs: shardCodecs([]int{4, 6}, true, []Codec{{Name: "bytes"}}), FillValue: 7},
	"sharded-3d": {Shape: []int{11, 14, 9}, ChunkShape: []int{4, 6, 9}, DataType: DataType{Kind: Int, Size: 2},
		Codecs: shardCodecs([]int{2, 3, 3}, false, roundTripCodecs["zstd+crc"]), FillValue: 5},
	"v2-F-zlib": {ZarrFormat: 2, Order: 'F', Shape: []int{33, 21}, ChunkShape: []int{8, 8}, DataType: DataType{Kind: Int, Size: 8}, Compressor: &Codec{Name: "zlib", Configuration: map[string]any{"level": 1}}},
}

// TestReadBands reads random regions (unaligned starts and stops, the
// whole array first) of arrays of every codec, with chunks and inner
// chunks missing, the way device reads do: in bands of random limits
// (one cell or more, whole rows or not) through one to three buffers in
// rotation whose copies finish late, and compares what lands in the fake
// device memory with ReadRegion and with the values written.
func TestReadBands(t *testing.T) {
	rng := rand.New(rand.NewPCG(25, 26))
	t.Cleanup(func() { decodeUnit = 1 << 20 })
	for name, m := range bandCases {
		t.Run(name, func(t *testing.T) {
			a, ref := newFilledArray(t, m)
			// All but the last rows: a chunk row stays missing.
			stop := append([]int(nil), m.Shape...)
			stop[0] = max(stop[0]-m.ChunkShape[0], 1)
			vals := randValues(rng, m.DataType, numElements(stop))
			if err := a.WriteRegion(bg, make([]int, len(stop)), stop, vals); err != nil {
				t.Fatal(err)
			}
			ref.write(make([]int, len(stop)), stop, vals)
			// Inner chunks of shards holding the fill value are left out.
			if s := a.pipe.sharded(); s != nil {
				hole := make([]int, len(m.Shape))
				hole[1] = s.inner[1]
				end := append([]int(nil), hole...)
				for d := range end {
					end[d] += s.inner[d]
				}
				fill := chunkFill(a.pipe.fill, s.inner)
				if err := a.WriteRegion(bg, hole, end, fill); err != nil {
					t.Fatal(err)
				}
				ref.write(hole, end, fill)
			}
			for r := range 25 {
				start, stop := make([]int, len(m.Shape)), m.Shape
				if r > 0 {
					start, stop = randRegion(rng, m.Shape)
				}
				want := ref.region(start, stop)
				host := make([]byte, len(want))
				a.SetWorkers(1 + r%4)
				if err := a.ReadRegion(bg, start, stop, host); err != nil {
					t.Fatal(err)
				}
				if !bytes.Equal(host, want) {
					t.Fatalf("ReadRegion %v-%v differs from the values written", start, stop)
				}
				if len(want) == 0 {
					continue
				}
				cell := numElements(a.cellShape()) * m.DataType.Size
				limit := []int{cell, cell + rng.IntN(4*cell), len(want)}[rng.IntN(3)]
				rd := a
				decodeUnit = 1 << 20
				if r%2 == 1 { // fetches and decodes in two stages, as from a remote store
					var err error
					if rd, err = Open(bg, requestStore{a.store, 1 + rng.IntN(4)}, "a"); err != nil {
						t.Fatal(err)
					}
					rd.SetWorkers(1 + rng.IntN(4))
					// Spans of inner chunks decoded in parts of one to three.
					decodeUnit = (1 + rng.IntN(3)) * numElements(a.cellShape()) * m.DataType.Size
				}
				if got := readFake(t, rd, start, stop, limit, 1+rng.IntN(3), rng.Uint64()); !bytes.Equal(got, want) {
					t.Fatalf("%v-%v in bands of %d bytes differs from the values written", start, stop, limit)
				}
				if rd != a { // into host memory, in stretches of it where sharded (hostPlan)
					clear(host)
					if err := rd.ReadRegion(bg, start, stop, host); err != nil || !bytes.Equal(host, want) {
						t.Fatalf("ReadRegion %v-%v through two stages differs from the values written (%v)", start, stop, err)
					}
				}
			}
		})
	}
}

// requestStore is a local store with a limit on requests in flight, as
// a remote store has, so that reads through it fetch and decode in two
// stages.
type requestStore struct {
	Store
	n int
}

func (s requestStore) MaxRequests() int { return s.n }

// failStore fails ReadRange and Get of one key.
type failStore struct {
	Store
	key string
}

var errInjected = errors.New("injected")

func (s failStore) Get(ctx context.Context, key string, buf []byte) ([]byte, error) {
	if key == s.key {
		return nil, errInjected
	}
	return s.Store.Get(ctx, key, buf)
}

func (s failStore) ReadRange(ctx context.Context, key string, off int64, p []byte) (int64, error) {
	if key == s.key {
		return 0, errInjected
	}
	return s.Store.ReadRange(ctx, key, off, p)
}

// TestReadBandsError checks that a chunk that cannot be read fails a
// banded read of one-cell bands through one buffer with its error,
// without waiting for the bands after it, in one stage and in two; for
// a sharded array, a shard whose index cannot be read too (from a remote
// store, planned as the indexes arrive).
func TestReadBandsError(t *testing.T) {
	for _, name := range []string{"zstd", "sharded"} {
		m := bandCases[name]
		a, _ := newWrittenArray(t, m, 1)
		fail := failStore{a.Store(), a.ChunkKey([]int{3, 1})}
		for _, st := range []Store{fail, requestStore{fail, 2}} {
			b, err := Open(bg, st, "a")
			if err != nil {
				t.Fatal(err)
			}
			r, _, _ := b.region([]int{0, 0}, m.Shape)
			cell := numElements(b.cellShape()) * m.DataType.Size
			p, err := b.bandPlan(bg, r, cell, nil)
			if err != nil {
				if !errors.Is(err, errInjected) || p.indexes != nil {
					t.Fatalf("%s: plan from %T with a failing chunk: %v", name, st, err)
				}
				continue // a shard index read up front
			}
			sink := newFakeSink(r.count, m.DataType.Size, cell, 1, 1)
			if err := b.readBands(bg, p, sink, nil); !errors.Is(err, errInjected) {
				t.Fatalf("%s: read from %T with a failing chunk: %v", name, st, err)
			}
		}
	}
}

// gateStore says when a chunk of shard first has been read (read is
// closed) and holds index reads back: with hold set, that of shard hold
// until then, or for a second (late is then set); with stall, those of
// every shard but first until the read is cancelled.
type gateStore struct {
	Store
	first, hold string
	stall       bool
	read        chan struct{}
	once        sync.Once
	late        atomic.Bool
}

func newGateStore(s Store, first, hold string, stall bool) *gateStore {
	return &gateStore{Store: s, first: first, hold: hold, stall: stall, read: make(chan struct{})}
}

func (s *gateStore) MaxRequests() int { return 4 }

func (s *gateStore) ReadRange(ctx context.Context, key string, off int64, p []byte) (int64, error) {
	switch {
	case key == s.first && off >= 0:
		s.once.Do(func() { close(s.read) })
	case s.stall && key != s.first && off < 0:
		<-ctx.Done()
		return 0, ctx.Err()
	case key == s.hold && off < 0:
		select {
		case <-s.read:
		case <-time.After(time.Second):
			s.late.Store(true)
		}
	}
	return s.Store.ReadRange(ctx, key, off, p)
}

// TestShardPlanOverlap checks that a banded read (as into device
// memory) and a read into host memory of a sharded array from a remote
// store fetch the first band's chunks before the index of the last shard
// is in, and read the array right.
func TestShardPlanOverlap(t *testing.T) {
	m := bandCases["sharded"]
	a, want := newWrittenArray(t, m, 3)
	grid := a.grid
	for _, host := range []bool{false, true} {
		hs := newGateStore(a.store, a.ChunkKey([]int{0, 0}), a.ChunkKey([]int{grid[0] - 1, grid[1] - 1}), false)
		rd, err := Open(bg, hs, "a")
		if err != nil {
			t.Fatal(err)
		}
		rd.SetWorkers(2)
		got := make([]byte, len(want))
		if host {
			err = rd.ReadRegion(bg, make([]int, 2), m.Shape, got)
		} else {
			got = readFake(t, rd, make([]int, 2), m.Shape, 2*numElements(rd.cellShape())*m.DataType.Size, 2, 5)
		}
		if err != nil || !bytes.Equal(got, want) {
			t.Fatalf("host %v: the read (%v) differs from the values written", host, err)
		}
		if hs.late.Load() {
			t.Errorf("host %v: the last shard's index was needed before the first shard's chunks were read: the bands were planned up front", host)
		}
	}
}

// TestShardPlanHostileIndex reads sharded arrays from a remote-like
// store whose last shard's index, read as bands are planned (the
// plan-ahead path; with the index at the end, after the first shard's
// chunks are read), is hostile: an entry past the shard's end, of
// 2^62 bytes, wrapping around 2^64, of the wrong size for an
// uncompressed inner chunk, a bad checksum. Each read, into host memory
// and in bands, fails with ErrCorruptChunk, allocating next to nothing,
// and the next read of the mended shard gets the values written.
func TestShardPlanHostileIndex(t *testing.T) {
	castagnoli := crc32.MakeTable(crc32.Castagnoli)
	for _, name := range []string{"sharded", "sharded-raw"} {
		m := bandCases[name]
		a, want := newWrittenArray(t, m, 5)
		sc := a.pipe.sharded()
		first, last := a.ChunkKey([]int{0, 0}), a.ChunkKey([]int{a.grid[0] - 1, a.grid[1] - 1})
		good, err := a.store.Get(bg, last, nil)
		if err != nil {
			t.Fatal(err)
		}
		is := int(sc.indexSize())
		at := len(good) - is // the index: entries, then their crc32c
		if name == "sharded-raw" {
			at = 0 // index_location start
		}
		inner := int64(numElements(sc.inner) * m.DataType.Size)
		cases := map[string]func(idx []byte){
			"past the end": func(idx []byte) { putUint(idx[0:], uint64(len(good))+1000); putUint(idx[8:], 16) },
			"2^62 bytes":   func(idx []byte) { putUint(idx[8:], 1<<62) },
			"wrapping":     func(idx []byte) { putUint(idx[0:], ^uint64(7)); putUint(idx[8:], 64) },
			"bad checksum": func(idx []byte) { idx[is-1] ^= 0x5a },
		}
		if name == "sharded-raw" {
			cases["short raw chunk"] = func(idx []byte) { putUint(idx[8:], uint64(inner-1)) }
		}
		for cname, spoil := range cases {
			bad := slices.Clone(good)
			idx := bad[at : at+is]
			spoil(idx)
			if cname != "bad checksum" {
				binary.LittleEndian.PutUint32(idx[is-4:], crc32.Checksum(idx[:is-4], castagnoli))
			}
			if err := a.store.Set(bg, last, bad); err != nil {
				t.Fatal(err)
			}
			for _, host := range []bool{false, true} {
				hs := newGateStore(a.store, first, last, false)
				rd, err := Open(bg, hs, "a")
				if err != nil {
					t.Fatal(err)
				}
				rd.SetWorkers(2)
				var rerr error
				alloc := allocDuring(func() {
					if host {
						rerr = rd.ReadRegion(bg, make([]int, 2), m.Shape, make([]byte, len(want)))
						return
					}
					r, _, _ := rd.region(make([]int, 2), m.Shape)
					limit := 2 * numElements(rd.cellShape()) * m.DataType.Size
					p, err := rd.bandPlan(bg, r, limit, func(b *band) { layoutBands([]*band{b}, r.count, m.DataType.Size, zarrtune.Cells) })
					if err != nil {
						t.Fatal(err)
					}
					rerr = rd.readBands(bg, p, newFakeSink(r.count, m.DataType.Size, limit, 3, 1), nil)
				})
				if !errors.Is(rerr, ErrCorruptChunk) {
					t.Errorf("%s, %s, host %v: %v, want ErrCorruptChunk", name, cname, host, rerr)
				}
				if alloc > 4<<20 {
					t.Errorf("%s, %s, host %v: allocated %d bytes", name, cname, host, alloc)
				}
				if hs.late.Load() && name == "sharded" { // its index at the end: a suffix read, which gateStore holds
					t.Errorf("%s, %s, host %v: the last shard's index was read before any chunk of the first", name, cname, host)
				}
			}
		}
		if err := a.store.Set(bg, last, good); err != nil {
			t.Fatal(err)
		}
		got := make([]byte, len(want))
		rd, err := Open(bg, newGateStore(a.store, first, last, false), "a")
		if err == nil {
			err = rd.ReadRegion(bg, make([]int, 2), m.Shape, got)
		}
		if err != nil || !bytes.Equal(got, want) {
			t.Fatalf("%s mended: %v, or the values differ", name, err)
		}
	}
}

// loadFake gives bands their bytes from src, the region's bytes in
// C order, with the bands' copies the other way, as a device write's
// loadSink does from device memory.
type loadFake struct {
	src    []byte
	region []int
	es     int
}

func (s loadFake) take(_ context.Context, b *band) ([]byte, error) {
	buf := make([]byte, numElements(b.box.count)*s.es)
	for _, c := range bandCopies(s.region, b.box, s.es) {
		for y := range c.height {
			copy(buf[c.src+y*c.srcPitch:c.src+y*c.srcPitch+c.width], s.src[c.dst+y*c.dstPitch:])
		}
	}
	return buf, nil
}

func (loadFake) filled(*band) error { return nil }
func (loadFake) close() error       { return nil }

// TestWriteBands writes random regions of arrays of every codec band by
// band, as WriteRegionDevice does from device memory (bands of random
// limits, the chunks the region covers in part read, updated and
// rewritten), and checks every element of the array afterwards.
func TestWriteBands(t *testing.T) {
	rng := rand.New(rand.NewPCG(27, 28))
	for name, m := range bandCases {
		t.Run(name, func(t *testing.T) {
			a, ref := newFilledArray(t, m)
			for range 6 {
				start, stop := randRegion(rng, m.Shape)
				r, size, err := a.region(start, stop)
				if err != nil || size == 0 {
					continue
				}
				vals := randValues(rng, m.DataType, size/m.DataType.Size)
				var tasks []chunkTask
				forChunks(a.meta.ChunkShape, a.grid, r, func(tk chunkTask) error { tasks = append(tasks, tk); return nil })
				chunk := numElements(m.ChunkShape) * m.DataType.Size
				bands := writePlan(r, m.ChunkShape, m.DataType.Size, []int{chunk, chunk + rng.IntN(3*chunk), size}[rng.IntN(3)], tasks)
				if err := a.writeBandsFrom(bg, bands, loadFake{src: vals, region: r.count, es: m.DataType.Size}, 1+rng.IntN(2*bandsSpread+2)); err != nil {
					t.Fatal(err)
				}
				ref.write(start, stop, vals)
				got := make([]byte, len(ref.buf))
				if err := a.ReadRegion(bg, make([]int, len(m.Shape)), m.Shape, got); err != nil {
					t.Fatal(err)
				}
				if !bytes.Equal(got, ref.buf) {
					t.Fatalf("after writing %v-%v in bands, the array differs from the values written", start, stop)
				}
			}
		})
	}
}

// newWrittenArray creates array m in a new DirStore and writes random
// values (from seed) over all of it; it returns the array and its
// elements, those values.
func newWrittenArray(t *testing.T, m Metadata, seed uint64) (*Array, []byte) {
	t.Helper()
	a, _ := newFilledArray(t, m)
	vals := randValues(rand.New(rand.NewPCG(seed, seed+1)), m.DataType, numElements(m.Shape))
	if err := a.WriteRegion(bg, make([]int, len(m.Shape)), m.Shape, vals); err != nil {
		t.Fatal(err)
	}
	return a, vals
}

// newFilledArray creates array m in a new DirStore and returns it with a
// model of its elements, every one the fill value.
func newFilledArray(t *testing.T, m Metadata) (*Array, model) {
	t.Helper()
	s, err := NewDirStore(t.TempDir())
	if err != nil {
		t.Fatal(err)
	}
	a, err := Create(bg, s, "a", m)
	if err != nil {
		t.Fatal(err)
	}
	return a, model{shape: m.Shape, es: m.DataType.Size, buf: chunkFill(a.pipe.fill, m.Shape)}
}

// TestRunBandsFetchAhead checks the gate between a read's fetchers and
// its workers: against a store that answers at once, fetched items wait
// for the workers only a few at a time (fetchers that wait after their
// fetch held a body each, dozens ahead of the decoders), and against a
// slow store every fetcher keeps a request in flight.
func TestRunBandsFetchAhead(t *testing.T) {
	const fetchers, workers, items = 32, 2, 400
	run := func(fetchDelay, finishDelay time.Duration) (maxAhead, maxFetching int) {
		var mu sync.Mutex
		ahead, fetching := 0, 0                               // fetched and not finished; fetches under way
		steady := func(i int) bool { return i >= 4*fetchers } // past the first burst
		w := bandWork{
			fetchers: fetchers,
			yield:    true,
			fetch: func(_ context.Context, _ int, _ *band, i int, _ func(fetched, int)) (fetched, error) {
				mu.Lock()
				if fetching++; steady(i) {
					maxFetching = max(maxFetching, fetching)
				}
				mu.Unlock()
				time.Sleep(fetchDelay * time.Duration(90+i%21) / 100) // spread, as a server's answers are
				mu.Lock()
				fetching--
				if ahead++; steady(i) {
					maxAhead = max(maxAhead, ahead)
				}
				mu.Unlock()
				return fetched{}, nil
			},
			finish: func(context.Context, int, *band, int, fetched) error {
				time.Sleep(finishDelay)
				mu.Lock()
				ahead--
				mu.Unlock()
				return nil
			},
		}
		b := &band{n: items, direct: true, ready: make(chan struct{})}
		if err := runBands(bg, []*band{b}, hostSink{}, workers, w); err != nil {
			t.Fatal(err)
		}
		return maxAhead, maxFetching
	}
	ahead, _ := run(0, 200*time.Microsecond)
	if ahead > 2*workers+4 {
		t.Errorf("fast store: up to %d items fetched ahead of %d workers, want at most %d", ahead, workers, 2*workers+4)
	}
	_, fetching := run(20*time.Millisecond, 0) // long enough for every fetcher to start, on a loaded machine too
	if fetching < fetchers {
		t.Errorf("slow store: at most %d of %d fetchers fetching at once", fetching, fetchers)
	}
	t.Logf("fast store: at most %d items ahead; slow store: %d fetches at once", ahead, fetching)
}

// TestRunBandsEarlyParts checks parts handed over while their item is
// still being fetched (emit): each fetch hands its parts over one at a
// time and waits, before the next, until a worker has finished the one
// handed over, which a fetcher that queued an item's parts only once
// its fetch returned would never see; every part is finished once, and
// an item none of whose parts were handed over early goes as before.
// A fetch that fails after handing parts over fails the read.
func TestRunBandsEarlyParts(t *testing.T) {
	const items, parts = 6, 4
	var mu sync.Mutex
	finished := map[[2]int]int{}
	signal := make([]chan struct{}, items*parts)
	for i := range signal {
		signal[i] = make(chan struct{}, 1)
	}
	w := bandWork{
		fetchers: 2,
		parts:    func(*band, int) int { return parts },
		fetch: func(ctx context.Context, _ int, _ *band, i int, emit func(fetched, int)) (fetched, error) {
			p := getBuf(64)
			f := fetched{p: p, b: *p}
			if i%3 == 2 {
				return f, nil // all parts at the end
			}
			for k := range parts {
				emit(f, k+1)
				select {
				case <-signal[i*parts+k]:
				case <-time.After(10 * time.Second):
					return fetched{}, fmt.Errorf("item %d: part %d not finished while its item was fetched", i, k)
				}
			}
			return f, nil
		},
		finish: func(_ context.Context, _ int, _ *band, i int, f fetched) error {
			mu.Lock()
			finished[[2]int{i, f.part}]++
			mu.Unlock()
			if f.parts != parts {
				return fmt.Errorf("item %d finished as part %d of %d", i, f.part, f.parts)
			}
			signal[i*parts+f.part] <- struct{}{}
			return nil
		},
	}
	b := &band{n: items, ready: make(chan struct{})}
	if err := runBands(bg, []*band{b}, &partSink{check: func(*band) error { return nil }}, 3, w); err != nil {
		t.Fatal(err)
	}
	for i := range items {
		for k := range parts {
			if finished[[2]int{i, k}] != 1 {
				t.Errorf("item %d part %d finished %d times", i, k, finished[[2]int{i, k}])
			}
		}
	}
	boom := errors.New("connection lost")
	w.fetch = func(_ context.Context, _ int, _ *band, i int, emit func(fetched, int)) (fetched, error) {
		p := getBuf(64)
		emit(fetched{p: p, b: *p}, 2)
		return fetched{}, boom
	}
	w.finish = func(context.Context, int, *band, int, fetched) error { return nil }
	b = &band{n: items, ready: make(chan struct{})}
	if err := runBands(bg, []*band{b}, &partSink{check: func(*band) error { return nil }}, 3, w); !errors.Is(err, boom) {
		t.Errorf("a fetch failing after handing parts over: %v", err)
	}
}

// TestRunBandsParts checks items finished in parts: every part of every
// item finished once, the parts of an item by several workers at once,
// a band handed over only once all its items' parts are finished, and
// each fetched buffer kept until the item's last part is finished (not
// given back to the pool and refilled by a later fetch).
func TestRunBandsParts(t *testing.T) {
	rng := rand.New(rand.NewPCG(7, 8))
	const workers = 4
	var mu sync.Mutex
	var bands []*band
	parts := map[*band][]int{}         // per band, each item's parts
	done := map[*band]map[[2]int]int{} // per band, how often each (item, part) was finished
	running := map[[2]any]int{}        // items being finished, by how many workers
	most := 0                          // the most workers on one item at once
	for range 5 {
		b := &band{n: 1 + rng.IntN(6), ready: make(chan struct{})}
		for range b.n {
			parts[b] = append(parts[b], 1+rng.IntN(5))
		}
		done[b] = map[[2]int]int{}
		bands = append(bands, b)
	}
	sink := &partSink{check: func(b *band) error {
		mu.Lock()
		defer mu.Unlock()
		for i, n := range parts[b] {
			for k := range n {
				if done[b][[2]int{i, k}] != 1 {
					return fmt.Errorf("band handed over with part %d of %d of item %d finished %d times", k, n, i, done[b][[2]int{i, k}])
				}
			}
		}
		return nil
	}}
	w := bandWork{
		fetchers: 2,
		fetch: func(_ context.Context, _ int, b *band, i int, _ func(fetched, int)) (fetched, error) {
			p := getBuf(64)
			mark := byte(slices.Index(bands, b)*8 + i)
			for j := range *p {
				(*p)[j] = mark
			}
			return fetched{p: p, b: *p}, nil
		},
		parts: func(b *band, i int) int { return parts[b][i] },
		finish: func(_ context.Context, _ int, b *band, i int, f fetched) error {
			if want := parts[b][i]; f.parts != want && !(want == 1 && f.parts == 0) {
				return fmt.Errorf("item %d finished as part %d of %d, want of %d", i, f.part, f.parts, want)
			}
			if mark := byte(slices.Index(bands, b)*8 + i); bytes.Count(f.b, []byte{mark}) != len(f.b) {
				return fmt.Errorf("item %d, part %d: its fetched buffer was refilled", i, f.part)
			}
			key := [2]any{b, i}
			mu.Lock()
			running[key]++
			most = max(most, running[key])
			mu.Unlock()
			time.Sleep(2 * time.Millisecond)
			mu.Lock()
			running[key]--
			done[b][[2]int{i, f.part}]++
			mu.Unlock()
			return nil
		},
	}
	if err := runBands(bg, bands, sink, workers, w); err != nil {
		t.Fatal(err)
	}
	if n := sink.n.Load(); n != int64(len(bands)) {
		t.Errorf("%d of %d bands handed over", n, len(bands))
	}
	if most < 2 {
		t.Errorf("the parts of an item were finished by at most %d worker at once, want several", most)
	}
}

// TestRunBandsSpread checks claims with bandWork.spread (device writes
// to a DirStore): every item finished once and every band handed over
// once, after its items; one worker, the bands ready, takes the items
// of up to spread bands in turn, the same band twice running only when
// no other band of the window has items left, never a band spread or
// more past the first with items left; without spread, band by band.
func TestRunBandsSpread(t *testing.T) {
	rng := rand.New(rand.NewPCG(11, 12))
	for _, spread := range []int{0, 1, 2, 3, 5} {
		for _, workers := range []int{1, 4} {
			var bands []*band
			for range 7 {
				bands = append(bands, &band{n: 1 + rng.IntN(6), ready: make(chan struct{})})
			}
			var mu sync.Mutex
			var order []int // the band of each item, as finished
			done := map[*band]int{}
			sink := &partSink{check: func(b *band) error {
				mu.Lock()
				defer mu.Unlock()
				if done[b] != b.n {
					return fmt.Errorf("band %d handed over with %d of %d items finished", slices.Index(bands, b), done[b], b.n)
				}
				return nil
			}}
			w := bandWork{spread: spread, finish: func(_ context.Context, _ int, b *band, i int, _ fetched) error {
				for _, c := range bands { // every band ready before the second claim
					<-c.ready
				}
				if workers > 1 {
					time.Sleep(time.Duration((i*97+b.n*31)%300) * time.Microsecond)
				}
				mu.Lock()
				defer mu.Unlock()
				if i != done[b] && workers == 1 {
					return fmt.Errorf("band %d: item %d finished after %d others", slices.Index(bands, b), i, done[b])
				}
				order = append(order, slices.Index(bands, b))
				done[b]++
				return nil
			}}
			if err := runBands(bg, bands, sink, workers, w); err != nil {
				t.Fatalf("spread %d, %d workers: %v", spread, workers, err)
			}
			if n := sink.n.Load(); n != int64(len(bands)) {
				t.Fatalf("spread %d, %d workers: %d of %d bands handed over", spread, workers, n, len(bands))
			}
			for _, b := range bands {
				if done[b] != b.n {
					t.Fatalf("spread %d, %d workers: band %d: %d of %d items finished", spread, workers, slices.Index(bands, b), done[b], b.n)
				}
			}
			if workers > 1 {
				continue
			}
			left := make([]int, len(bands))
			for i, b := range bands {
				left[i] = b.n
			}
			window := max(spread, 1)
			for p, j := range order {
				first := slices.IndexFunc(left, func(n int) bool { return n > 0 })
				if j-first >= window {
					t.Fatalf("spread %d: item %d from band %d, %d past band %d, the first with items left (order %v)", spread, p, j, j-first, first, order)
				}
				if p > 0 && order[p-1] == j {
					for c := first; c < min(first+window, len(bands)); c++ {
						if c != j && left[c] > 0 {
							t.Fatalf("spread %d: band %d twice running while band %d had items left (order %v)", spread, j, c, order)
						}
					}
				}
				left[j]--
			}
		}
	}
}

// partSink checks each band handed over with check.
type partSink struct {
	check func(*band) error
	n     atomic.Int64 // bands handed over
}

func (s *partSink) take(context.Context, *band) ([]byte, error) { return make([]byte, 1), nil }
func (s *partSink) filled(b *band) error                        { s.n.Add(1); return s.check(b) }
func (s *partSink) close() error                                { return nil }

// TestShardPlanCancel cancels a banded read of a sharded array from a
// remote store while its bands wait for shard indexes that do not come:
// the read returns the context's error, leaving no goroutine behind.
func TestShardPlanCancel(t *testing.T) {
	defer goleak.VerifyNone(t, goleak.IgnoreCurrent())
	m := bandCases["sharded"]
	a, _ := newWrittenArray(t, m, 5)
	ss := newGateStore(a.store, a.ChunkKey([]int{0, 0}), "", true)
	rd, err := Open(bg, ss, "a")
	if err != nil {
		t.Fatal(err)
	}
	r, _, _ := rd.region(make([]int, 2), m.Shape)
	cell := numElements(rd.cellShape()) * m.DataType.Size
	ctx, cancel := context.WithCancel(bg)
	defer cancel()
	p, err := rd.bandPlan(ctx, r, cell, nil)
	if err != nil || p.indexes == nil {
		t.Fatalf("plan: %v (planned up front: %v)", err, p.indexes == nil)
	}
	done := make(chan error, 1)
	go func() { done <- rd.readBands(ctx, p, newFakeSink(r.count, m.DataType.Size, cell, 2, 7), nil) }()
	<-ss.read
	cancel()
	waitCanceled(t, done)
}
