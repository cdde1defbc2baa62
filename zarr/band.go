package zarr

import (
	"context"
	"math"
	"math/bits"
	"runtime"
	"slices"
	"sync"
	"sync/atomic"

	"golang.org/x/sync/errgroup"

	"github.com/kvikgo/kvik/internal/formatkit/zarrtune"
)

// A region read is assembled in bands: boxes of the region made of whole
// cells of the chunk grid (inner chunks for a sharded array), each
// decoded into one host buffer in the region's layout by every worker at
// once, then handed on whole. A read into host memory is one band, the
// destination itself; a read into device memory goes through pinned
// bands of bandTarget bytes, a few in rotation, each copied to the
// device in one call (or one 2D copy) while the next is decoded. Copying
// each chunk's rows on their own cost a call per row: 512 per MiB for
// 512 x 512 float32 chunks of a 16384-wide array, which held device reads
// near 0.8 GB/s whatever the codec.
//
// A GPU decoder (nvCOMP) would take the place of a band: stored bytes
// staged in pinned memory, decoded on the device into the region.

// bandTarget is the size of a device read's band buffers: large enough
// that its one copy call costs nothing next to its bytes (32 MiB take
// about a millisecond over PCIe), small enough that a few in rotation pin
// little memory and the first band is ready soon.
// Device tests lower it to make many bands of small arrays.
var bandTarget = 32 << 20

// bandBuffers returns the size and number of the pinned buffers of a
// device read or write whose cells (chunks or inner chunks) hold
// cellBytes: a few in rotation, of one size for every read as long as
// cells are at most bandTarget, so that kvik's pool keeps them.
func bandBuffers(cellBytes, bands int) (size, n int) {
	size = max(bandTarget, cellBytes)
	return size, min(bands, max(2, min(bandsInFlight, bandsInFlight*bandTarget/size)))
}

// bandsInFlight is how many band buffers of bandTarget a read or write
// keeps: enough that workers never wait for a buffer while a slow chunk
// holds back its band and the copies of others are queued.
const bandsInFlight = 8

// bandGrid splits a region into bands of at most a limit of bytes: a band takes
// the region whole along the dimensions after its split dimension k, a
// run of per cells along k and one cell along the dimensions before k,
// with k the outermost dimension that allows it, so that a band is as few
// contiguous runs of the region as its size allows (one when k is 0).
// Bands never cut a cell, so that each chunk is decoded once, except
// where one cell is larger than the limit: then a band is one cell.
type bandGrid struct {
	r     box   // the region, array coordinates
	unit  []int // the grid's cell
	k     int   // split dimension
	per   int   // cells along k per band
	first []int // the region's first cell, per dimension
	shape []int // bands per dimension
}

// newBandGrid plans the bands of the non-empty region r for cells of
// shape unit, es-byte elements and bands of at most limit bytes.
func newBandGrid(r box, unit []int, es, limit int) bandGrid {
	nd := len(r.count)
	g := bandGrid{r: r, unit: unit, per: 1, first: make([]int, nd), shape: make([]int, nd)}
	cells := make([]int, nd)
	for d := range nd {
		g.first[d] = r.start[d] / unit[d]
		cells[d] = (r.start[d]+r.count[d]-1)/unit[d] - g.first[d] + 1
		g.shape[d] = 1
	}
	if nd == 0 {
		return g
	}
	// size(k) is the bytes of a band of one cell along dimensions 0..k
	// and the whole region beyond; it fits in an int (at most the
	// region's bytes).
	size := func(k int) int {
		n := es
		for d := range nd {
			if d <= k {
				n *= min(unit[d], r.count[d])
			} else {
				n *= r.count[d]
			}
		}
		return n
	}
	for g.k = 0; g.k < nd-1 && size(g.k) > limit; g.k++ {
	}
	k := g.k
	if whole := size(k) / min(unit[k], r.count[k]) * r.count[k]; whole <= limit {
		g.per = cells[k] // the region along k fits
	} else if one := size(k); one <= limit {
		g.per = max(1, limit/(one/min(unit[k], r.count[k]))/unit[k])
	}
	for d := range k {
		g.shape[d] = cells[d]
	}
	g.shape[k] = (cells[k] + g.per - 1) / g.per
	return g
}

// n returns the number of bands.
func (g bandGrid) n() int { return numElements(g.shape) }

// span returns the extent [lo, hi) along d, region coordinates, of cells
// [c, c+n) of the region's cells along d.
func (g bandGrid) span(d, c, n int) (lo, hi int) {
	lo = max(0, (g.first[d]+c)*g.unit[d]-g.r.start[d])
	hi = min(g.r.count[d], (g.first[d]+c+n)*g.unit[d]-g.r.start[d])
	return lo, hi
}

// box returns band i, region coordinates.
func (g bandGrid) box(i int) box {
	nd := len(g.shape)
	bc := make([]int, nd)
	unflatten(i, g.shape, bc)
	b := box{start: make([]int, nd), count: make([]int, nd)}
	for d := range nd {
		lo, hi := 0, g.r.count[d]
		switch {
		case d < g.k:
			lo, hi = g.span(d, bc[d], 1)
		case d == g.k:
			lo, hi = g.span(d, bc[d]*g.per, g.per)
		}
		b.start[d], b.count[d] = lo, hi-lo
	}
	return b
}

// coord returns the band coordinate along d of region coordinate x.
func (g bandGrid) coord(d, x int) int {
	c := (g.r.start[d]+x)/g.unit[d] - g.first[d]
	switch {
	case d < g.k:
		return c
	case d == g.k:
		return c / g.per
	}
	return 0
}

// split calls f with each band that pc's selection touches and the part
// of pc in it. Stored pieces lie in one band (bands do not cut cells);
// a missing shard, read as fill, may cover several.
func (g bandGrid) split(pc piece, f func(band int, p piece)) {
	nd := len(g.shape)
	lo, hi := make([]int, nd), make([]int, nd)
	for d := range nd {
		lo[d] = g.coord(d, pc.dstStart[d])
		hi[d] = g.coord(d, pc.dstStart[d]+pc.sel.count[d]-1)
	}
	if slices.Equal(lo, hi) {
		f(flatIndex(lo, g.shape), pc)
		return
	}
	bc := append([]int(nil), lo...)
	for {
		i := flatIndex(bc, g.shape)
		b := g.box(i)
		p := pc
		p.sel = box{start: make([]int, nd), count: make([]int, nd)}
		p.dstStart = make([]int, nd)
		for d := range nd {
			s := max(pc.dstStart[d], b.start[d])
			e := min(pc.dstStart[d]+pc.sel.count[d], b.start[d]+b.count[d])
			p.dstStart[d] = s
			p.sel.start[d] = pc.sel.start[d] + s - pc.dstStart[d]
			p.sel.count[d] = e - s
		}
		f(i, p)
		d := nd - 1
		for ; d >= 0; d-- {
			if bc[d]++; bc[d] <= hi[d] {
				break
			}
			bc[d] = lo[d]
		}
		if d < 0 {
			return
		}
	}
}

// band is one band of a read or a write: its box in the region, the
// spans that fill it or the chunks written from it and, once ready is
// closed, its host memory.
type band struct {
	box    box
	spans  []span      // a read's
	tasks  []chunkTask // a write's
	n      int         // items: spans or tasks
	direct bool        // every span goes straight to the destination: no buffer
	// slots, in the cells layout, is where each piece of each span
	// starts in buf: the piece's selection lies there whole, C order,
	// the pieces of a span back to back. Nil: buf is the band's box in
	// the region's layout.
	slots  [][]int
	copies []copy2D // the copies of buf to the region
	// shuf, for a device read whose GPU unshuffles, is per piece how a
	// piece left with its Blosc blocks shuffled (whole, in one stretch
	// of buf) is to be unshuffled (zero: decoded); nil where the CPU
	// unshuffles.
	shuf  [][]pieceShuffle
	buf   []byte
	slot  int           // the sink's buffer
	ready chan struct{} // closed when buf is set
	left  atomic.Int64  // spans not yet done
	// plan, when set, plans the band (its spans, n and layout) once the
	// indexes of its shards are in (shardPlan); runBands calls it before
	// it takes the band's memory.
	plan func(ctx context.Context) error
}

// pieceShuffle is a piece of a band left shuffled: how, and where it
// starts in the band's buffer.
type pieceShuffle struct {
	shuffled
	off int
}

// view returns the band's memory as a view in region coordinates.
func (b *band) view(es int) view {
	start := make([]int, len(b.box.start))
	for d := range start {
		start[d] = -b.box.start[d]
	}
	return view{buf: b.buf, shape: b.box.count, es: es, start: start}
}

// pieceView returns the memory of piece j of span i as a view in region
// coordinates: the band's, or in the cells layout the piece's slot.
func (b *band) pieceView(es, i, j int) view {
	if b.slots == nil {
		return b.view(es)
	}
	pc := b.spans[i].pieces[j]
	off, n := b.slots[i][j], numElements(pc.sel.count)*es
	return view{buf: b.buf[off : off+n : off+n], shape: pc.sel.count, es: es, start: negate(pc.dstStart)}
}

// pieceOff returns where piece j of span i starts in b's buffer: its
// slot, or its place in the band's box.
func (b *band) pieceOff(es, i, j int) int {
	if b.slots != nil {
		return b.slots[i][j]
	}
	return b.view(es).sub(b.spans[i].pieces[j].dstStart).offset()
}

// bandSink is where the bands of a read go: host memory (the destination
// itself) or device memory through pinned buffers.
type bandSink interface {
	// take returns the memory to assemble b in, once some is free.
	take(ctx context.Context, b *band) ([]byte, error)
	// filled hands over b, assembled.
	filled(b *band) error
	// close waits for what filled started and gives back what take
	// took; it is called once, last.
	close() error
}

// hostSink assembles a read's bands in the destination, the region's
// bytes in C order: each band its stretch of them, which the bands of
// hostPlan are (whole along every dimension but the first).
type hostSink struct {
	dst    []byte
	region []int
	es     int
}

func (h hostSink) take(_ context.Context, b *band) ([]byte, error) {
	off := 0
	for d, n := range h.region {
		off = off*n + b.box.start[d]
	}
	off *= h.es
	n := numElements(b.box.count) * h.es
	return h.dst[off : off+n : off+n], nil
}

func (hostSink) filled(*band) error { return nil }
func (hostSink) close() error       { return nil }

// readPlan is a read's bands and, where they are planned as the indexes
// of their shards arrive (shardPlan), what reads those indexes: readBands
// runs it beside the bands' reads.
type readPlan struct {
	bands   []*band
	indexes func(ctx context.Context) error
}

// bandPlan plans the read of the non-empty region r in bands of at most
// limit bytes; lay, when not nil, is applied to each band once its spans
// are planned. The bands of a sharded array in a remote store are
// planned as their shards' indexes arrive (see shardPlan), others here.
func (a *Array) bandPlan(ctx context.Context, r box, limit int, lay func(*band)) (readPlan, error) {
	g := newBandGrid(r, a.cellShape(), a.meta.DataType.Size, limit)
	if s := a.plansAhead(); s != nil && g.n() > 1 {
		return a.newShardPlan(r, g, s, lay), nil
	}
	pieces, err := a.plan(ctx, r)
	if err != nil {
		return readPlan{}, err
	}
	bands := a.planBands(g, pieces, true)
	if lay != nil {
		for _, b := range bands {
			lay(b)
		}
	}
	return readPlan{bands: bands}, nil
}

// hostPlan plans a read of the non-empty region r into host memory: one
// band, the destination, but for a sharded array in a remote store,
// whose reads start while later shards' indexes are read (shardPlan):
// there about bandsInFlight bands of whole shards, whole along every
// dimension but the first (each a stretch of the destination), which
// size the read's spans as one band would.
func (a *Array) hostPlan(ctx context.Context, r box) (readPlan, error) {
	s := a.plansAhead()
	if s == nil || len(r.count) == 0 {
		return a.bandPlan(ctx, r, math.MaxInt, nil)
	}
	es := a.meta.DataType.Size
	row := es * min(a.meta.ChunkShape[0], r.count[0]) // a row of shards
	for _, n := range r.count[1:] {
		row *= n
	}
	g := newBandGrid(r, a.meta.ChunkShape, es, max(row, (numElements(r.count)*es+bandsInFlight-1)/bandsInFlight))
	if g.n() == 1 {
		return a.bandPlan(ctx, r, math.MaxInt, nil)
	}
	return a.newShardPlan(r, g, s, nil), nil
}

// plansAhead returns the sharding codec of an array whose reads plan
// their bands as their shards' indexes arrive (shardPlan): a sharded
// array in a remote store; else nil.
func (a *Array) plansAhead() *shardingCodec {
	if _, remote := requestSlots(a.store); !remote || zarrtune.EagerShardPlan.Load() {
		return nil
	}
	return a.pipe.sharded()
}

// shardPlan plans the bands of a read of a sharded array from a remote
// store as the indexes of their shards arrive, so that the chunks of the
// first bands are fetched and decoded while the indexes of later shards
// are read. Planned up front, a read waited for every index before its
// first chunk: 13 ms of a 230 ms read of 32 shards from versitygw on the
// H200, and from a distant store a round trip per MaxRequests shards.
type shardPlan struct {
	a        *Array
	s        *shardingCodec
	g        bandGrid
	lay      func(*band)
	together int             // as for spanSizes
	shards   []piece         // the region's shards, in order
	need     [][]int         // per band, the shards it takes pieces from
	inner    [][]piece       // per shard, its pieces, once done is closed
	done     []chan struct{} // per shard
}

// newShardPlan returns the plan of a read of r, in the bands of g, from
// shards of s: bands whose plan waits for their shards' indexes.
func (a *Array) newShardPlan(r box, g bandGrid, s *shardingCodec, lay func(*band)) readPlan {
	p := &shardPlan{a: a, s: s, g: g, lay: lay, together: min(g.n(), bandsInFlight), need: make([][]int, g.n())}
	p.shards = a.chunkPieces(r)
	p.inner = make([][]piece, len(p.shards))
	p.done = make([]chan struct{}, len(p.shards))
	for i, pc := range p.shards {
		p.done[i] = make(chan struct{})
		g.split(pc, func(b int, _ piece) { p.need[b] = append(p.need[b], i) })
	}
	bands := make([]*band, g.n())
	for i := range bands {
		b := &band{box: g.box(i), ready: make(chan struct{})}
		b.plan = func(ctx context.Context) error { return p.band(ctx, b, i) }
		bands[i] = b
	}
	return readPlan{bands: bands, indexes: p.read}
}

// read reads the shards' indexes, in order, as many at once as the
// store has request slots: first those of the first band, so that its
// chunks are fetched while the others are read, not after a crowd of
// them (versitygw answered 32 index reads at once in 4-12 ms).
func (p *shardPlan) read(ctx context.Context) error {
	n, _ := requestSlots(p.a.store) // a remote store: plansAhead
	index := func(from int) func(ctx context.Context, _, i int) error {
		return func(ctx context.Context, _, i int) (err error) {
			i += from
			if p.inner[i], err = p.a.shardPieces(ctx, p.s, p.shards[i]); err != nil {
				return err
			}
			close(p.done[i])
			return nil
		}
	}
	first := 0 // the shards of the first band: a prefix of the region's
	for _, s := range p.need[0] {
		first = max(first, s+1)
	}
	if err := parallel(ctx, first, n, index(0)); err != nil {
		return err
	}
	return parallel(ctx, len(p.shards)-first, n, index(first))
}

// band plans b, band i, once the indexes of its shards are in.
func (p *shardPlan) band(ctx context.Context, b *band, i int) error {
	var ps []piece
	for _, s := range p.need[i] {
		select {
		case <-p.done[s]:
		case <-ctx.Done():
			return ctx.Err()
		}
		for _, pc := range p.inner[s] {
			p.g.split(pc, func(j int, q piece) {
				if j == i {
					ps = append(ps, q)
				}
			})
		}
	}
	b.spans = p.a.spans(ps, view{shape: b.box.count, es: p.a.meta.DataType.Size, start: negate(b.box.start)}, true, p.together)
	b.n = len(b.spans)
	if p.lay != nil {
		p.lay(b)
	}
	return nil
}

// planBands assigns the pieces of a plan to the bands of g and groups
// each band's pieces into spans (chain as for spans).
func (a *Array) planBands(g bandGrid, pieces []piece, chain bool) []*band {
	per := make([][]piece, g.n())
	for _, pc := range pieces {
		g.split(pc, func(i int, p piece) { per[i] = append(per[i], p) })
	}
	together := 0 // bands whose requests may be in flight at once
	for _, ps := range per {
		if len(ps) > 0 {
			together++
		}
	}
	together = min(together, bandsInFlight)
	bands := make([]*band, 0, len(per))
	for i, ps := range per {
		if len(ps) == 0 {
			continue
		}
		b := &band{box: g.box(i), ready: make(chan struct{})}
		b.spans = a.spans(ps, view{shape: b.box.count, es: a.meta.DataType.Size, start: negate(b.box.start)}, chain, together)
		bands = append(bands, b)
	}
	return bands
}

func negate(x []int) []int {
	out := make([]int, len(x))
	for i := range x {
		out[i] = -x[i]
	}
	return out
}

// readBands reads bands, in order: each span into its band's memory from
// sink (or, for a direct band, with direct), and each band, once all its
// spans are in, to sink.filled. A store with MaxRequests (a remote one)
// is read in two stages: MaxRequests goroutines fetch stored bytes, ahead,
// and SetWorkers goroutines decode them, so that requests stay in flight
// while every core decodes. A local store's reads are cheap next to a
// decode: its workers fetch and decode each span in turn.
func (a *Array) readBands(ctx context.Context, p readPlan, sink bandSink, direct func(ctx context.Context, worker int, sp span) error) error {
	bands := p.bands
	spans := 0
	for _, b := range bands {
		if b.plan == nil {
			b.n = len(b.spans)
			spans += b.n
		}
	}
	// The pieces of a span are decoded concurrently only where spans are
	// too few to keep every worker busy, on a share of the workers each:
	// all on every span, they put many times GOMAXPROCS decodes on the
	// cores (each a thread, for libzstd), and a sharded zstd array from
	// S3 had threads waiting for a core 13x as long as the read took.
	inner := (a.workers + spans - 1) / max(spans, 1)
	if p.indexes != nil {
		inner = 1 // spans of bands planned later: parts spread them
	}
	w := bandWork{
		prepare: p.indexes,
		fetch: func(ctx context.Context, worker int, b *band, i int, emit func(fetched, int)) (fetched, error) {
			if b.direct {
				return fetched{done: true}, direct(ctx, worker, b.spans[i])
			}
			return a.fetchSpan(ctx, b, i, emit)
		},
	}
	if slots, ok := requestSlots(a.store); ok && !zarrtune.InlineFetch.Load() {
		w.fetchers = a.fetchers(slots)
	}
	w.yield = w.fetchers > 0 && !zarrtune.NoYield.Load()
	if w.fetchers > 0 && !zarrtune.WholeSpans.Load() {
		w.parts = a.spanParts
		inner = 1 // the parts are the workers' items
	}
	yield := w.yield
	w.finish = func(ctx context.Context, _ int, b *band, i int, f fetched) error {
		return a.decodeSpan(ctx, b, i, f, inner, yield)
	}
	return runBands(ctx, bands, sink, a.workers, w)
}

// fetchAhead bounds the bytes a read from a remote store has in flight,
// counted in cells (chunks or inner chunks, decoded): requests beyond
// the workers' own are kept only while their cells fit in it.
const fetchAhead = 256 << 20

// fetchers returns how many requests a read from a store of maxRequests
// request slots keeps in flight: all the slots, as long as their cells
// fit in fetchAhead, and never fewer than the workers (nor than one).
func (a *Array) fetchers(maxRequests int) int {
	cell := max(numElements(a.cellShape())*a.meta.DataType.Size, 1)
	return max(1, min(maxRequests, max(a.workers, fetchAhead/cell)))
}

// decodeUnit is the decoded bytes of a part of a buffered span (see
// spanParts). Tests lower it to split the spans of small arrays.
var decodeUnit = 1 << 20

// spanParts returns how many parts the decode of span i of b is split
// into, each finished by whichever worker takes it: runs of its pieces
// of about decodeUnit decoded bytes. A span of a sharded zstd array from
// S3 held about ten 1 MiB inner chunks, 20-25 ms of one worker's time:
// decoded by one worker, the last spans of a read kept a few workers
// busy while the others waited, and reads stayed at 0.78-0.81 of the
// decode ceiling.
func (a *Array) spanParts(b *band, i int) int {
	sp := &b.spans[i]
	if b.direct || sp.direct || sp.single() {
		return 1
	}
	cell := max(numElements(sp.pieces[0].shape)*a.meta.DataType.Size, 1)
	per := max(1, decodeUnit/cell)
	return (len(sp.pieces) + per - 1) / per
}

// fetched is what a read's fetch stage hands to its decode stage: a
// span's stored bytes (in a pooled buffer when p is set), or done when
// the fetch left nothing to decode; part of parts when the decode is
// split (parts > 1), left counting the parts not yet finished.
type fetched struct {
	p           *[]byte
	b           []byte
	done        bool
	part, parts int
	left        *atomic.Int32
}

// pieces returns the range of a span's n pieces that f decodes.
func (f fetched) pieces(n int) (from, to int) {
	if f.parts <= 1 {
		return 0, n
	}
	return f.part * n / f.parts, (f.part + 1) * n / f.parts
}

// bandWork is what runBands does with item i of band b: fetch (optional),
// then finish. With fetchers > 0, fetches run on fetchers goroutines of
// their own, ahead of the workers' finishes; else a worker does both.
// With yield, a worker that let a fetcher through yields to it before it
// finishes (see yieldProc). With parts (fetchers only), an item fetched
// is finished in that many parts, each by any worker (fetched.part); a
// fetch may hand its first parts over while it goes on (emit(f, k):
// parts [0, k) of f are in, f as the fetch will return it).
// A fetched buffer is given back once its item is finished.
type bandWork struct {
	fetchers int
	yield    bool
	spread   int                             // when > 1, claims take the items of up to spread ready bands in turn
	prepare  func(ctx context.Context) error // run beside the rest, when set
	fetch    func(ctx context.Context, worker int, b *band, i int, emit func(f fetched, k int)) (fetched, error)
	parts    func(b *band, i int) int
	finish   func(ctx context.Context, worker int, b *band, i int, f fetched) error
}

// runBands does w for items [0, b.n) of each band on up to workers
// goroutines (and w.fetchers more), each item once the band's memory
// from sink is ready, and hands each band to sink.filled once its items
// are finished. Items are taken in order across bands (with w.spread,
// from up to that many ready bands in turn) with no barrier between
// bands: a band is handed over as soon as its own items are done,
// and a goroutine plans (band.plan) and takes the bands' memory ahead, in
// order, as the sink frees it. The first error stops the rest; sink is
// closed either way.
func runBands(parent context.Context, bands []*band, sink bandSink, workers int, w bandWork) error {
	type item struct {
		b *band
		i int
		f fetched
	}
	nw, nf := max(1, workers), max(1, w.fetchers) // goroutines, at most one per item
	items, lazy := 0, false
	for _, b := range bands {
		if b.plan != nil {
			lazy = true // its items are not known yet
			continue
		}
		b.left.Store(int64(b.n))
		items += b.n
	}
	if !lazy {
		nw, nf = max(1, min(nw, items)), max(1, min(nf, items))
	}
	g, ctx := errgroup.WithContext(parent)
	if w.prepare != nil {
		g.Go(func() error { return w.prepare(ctx) })
	}
	g.Go(func() error {
		for _, b := range bands {
			if b.plan != nil {
				if err := b.plan(ctx); err != nil {
					return err
				}
				b.left.Store(int64(b.n))
			}
			if !b.direct {
				buf, err := sink.take(ctx, b)
				if err != nil {
					return err
				}
				b.buf = buf
			}
			close(b.ready)
		}
		return nil
	})
	var mu sync.Mutex
	next, turn := 0, 0               // the first band with items left; spread's rotation
	taken := make([]int, len(bands)) // items claimed, per band
	claim := func() (item, bool) {   // the next item, once its band is ready
		mu.Lock()
		defer mu.Unlock()
		for next < len(bands) && ctx.Err() == nil {
			b := bands[next]
			select {
			case <-b.ready:
			case <-ctx.Done():
				return item{}, false
			}
			if taken[next] == b.n {
				next++
				continue
			}
			j := next
			for k := 0; w.spread > 1 && k < w.spread; k++ {
				c := next + (turn+k)%w.spread
				if c < len(bands) && isReady(bands[c]) && taken[c] < bands[c].n {
					j, turn = c, turn+k+1
					break
				}
			}
			taken[j]++
			return item{b: bands[j], i: taken[j] - 1}, true
		}
		return item{}, false
	}
	finish := func(worker int, it item) error {
		err := w.finish(ctx, worker, it.b, it.i, it.f)
		if it.f.left != nil && it.f.left.Add(-1) > 0 {
			return err // another part of the item is still being finished
		}
		if it.f.p != nil {
			putBuf(it.f.p)
		}
		if err == nil && it.b.left.Add(-1) == 0 && !it.b.direct {
			err = sink.filled(it.b)
		}
		return err
	}
	if w.fetch == nil || w.fetchers == 0 {
		for worker := range nw {
			g.Go(func() error {
				for {
					it, ok := claim()
					if !ok {
						return nil
					}
					if w.fetch != nil {
						var err error
						if it.f, err = w.fetch(ctx, worker, it.b, it.i, nil); err != nil {
							return err
						}
					}
					if err := finish(worker, it); err != nil {
						return err
					}
				}
			})
		}
	} else {
		// The gate counts items, whose first part a worker takes: the
		// fetchers wait while nw items are fetched and not begun. An
		// item's parts wait in the queue back to back.
		queue := make(chan item, 4*(nf+nw))
		gate := newReadyGate(nw)
		defer context.AfterFunc(ctx, gate.close)()
		var fetching sync.WaitGroup
		for fetcher := range nf {
			fetching.Add(1)
			g.Go(func() error {
				defer fetching.Done()
				for gate.wait() {
					it, ok := claim()
					if !ok {
						gate.close() // none left: release the fetchers waiting
						return nil
					}
					// cur is the item's fetched bytes, split into parts once
					// they are known; sent counts the parts queued.
					var cur fetched
					sent := 0
					split := func(f fetched) {
						cur = f
						if !f.done && w.parts != nil {
							if n := w.parts(it.b, it.i); n > 1 {
								cur.parts, cur.left = n, new(atomic.Int32)
								cur.left.Store(int32(n))
							}
						}
						gate.add()
					}
					send := func(k int) bool {
						for ; sent < k; sent++ {
							it.f = cur
							it.f.part = sent
							select {
							case queue <- it:
							case <-ctx.Done():
								return false
							}
						}
						return true
					}
					var emit func(fetched, int)
					if w.parts != nil {
						emit = func(f fetched, k int) {
							if sent == 0 && cur.left == nil {
								split(f)
							}
							send(k)
						}
					}
					f, err := w.fetch(ctx, fetcher, it.b, it.i, emit)
					if err != nil {
						return err
					}
					if sent == 0 {
						split(f)
					}
					if !send(max(cur.parts, 1)) {
						return nil
					}
				}
				return nil
			})
		}
		g.Go(func() error { fetching.Wait(); close(queue); return nil })
		for worker := range nw {
			g.Go(func() error {
				for {
					select {
					case it, ok := <-queue:
						if !ok {
							return nil
						}
						if it.f.part == 0 && gate.take() && w.yield {
							yieldProc() // the fetcher let through goes first
						}
						if err := finish(worker, it); err != nil {
							return err
						}
					case <-ctx.Done():
						return nil
					}
				}
			})
		}
	}
	err := g.Wait()
	if e := sink.close(); err == nil {
		err = e
	}
	if parent.Err() != nil {
		return parent.Err()
	}
	return err
}

// isReady reports whether b's memory is ready (b.ready closed).
func isReady(b *band) bool {
	select {
	case <-b.ready:
		return true
	default:
		return false
	}
}

// yieldProc lets the goroutines readied on this worker's processor run
// before the worker goes on to decode. A decoder in C (libzstd) keeps
// its processor until the runtime takes it back, after 20 us to 10 ms,
// so that a fetcher let through by the gate, or one whose response has
// arrived, waited for a processor while every worker decoded: on the
// H200, S3 reads' threads waited 0.6-0.9 s per read for a core, 0.04-0.27
// s after yielding, and read Blosc-zstd chunks 1.09-1.13x as fast (zstd
// 1.03-1.07x in four pairs of five). A local read, which has no
// fetchers, does not yield.
func yieldProc() { runtime.Gosched() }

// readyGate holds a read's fetchers back while limit fetched items wait
// for a worker. Fetchers that waited only after fetching kept every
// request slot busy against a store that answers faster than the workers
// decode (loopback, a nearby S3): dozens of bodies held ahead of the
// decoders, and as many fetchers woken to receive them on the decoders'
// cores. Gated before it claims an item, a fetcher starts a request only
// while few items wait; against a distant store, whose items never pile
// up, no fetcher waits and every request slot stays in flight.
type readyGate struct {
	mu      sync.Mutex
	cond    sync.Cond
	ready   int // items fetched and not yet taken by a worker
	waiting int // fetchers in wait
	limit   int
	closed  bool
}

func newReadyGate(limit int) *readyGate {
	g := &readyGate{limit: max(limit, 1)}
	g.cond.L = &g.mu
	return g
}

// wait blocks while limit items are ready; false once the gate is closed.
func (g *readyGate) wait() bool {
	g.mu.Lock()
	defer g.mu.Unlock()
	g.waiting++
	for g.ready >= g.limit && !g.closed {
		g.cond.Wait()
	}
	g.waiting--
	return !g.closed
}

// add counts a fetched item; take counts one taken by a worker, lets one
// waiting fetcher go and reports whether one was waiting.
func (g *readyGate) add() { g.mu.Lock(); g.ready++; g.mu.Unlock() }

func (g *readyGate) take() bool {
	g.mu.Lock()
	g.ready--
	woke := g.waiting > 0
	g.mu.Unlock()
	g.cond.Signal()
	return woke
}

// close releases every fetcher for good (the read is over or failed).
func (g *readyGate) close() {
	g.mu.Lock()
	g.closed = true
	g.mu.Unlock()
	g.cond.Broadcast()
}

// copy2D is one copy of a band to its place in the region: height rows
// of width bytes, src and dst offsets of the first, the distances
// between rows on each side.
type copy2D struct {
	src, dst, width, height, srcPitch, dstPitch int
}

// bandCopies returns the copies that move band b, assembled in C order,
// to the region of shape region (es-byte elements, C order): one when the
// band is contiguous there, else one 2D copy per index of the dimensions
// before the one above the first the band does not cover whole.
func bandCopies(region []int, b box, es int) []copy2D {
	nd := len(region)
	j := nd - 1 // the innermost dimension the band does not cover whole
	for j >= 0 && b.count[j] == region[j] {
		j--
	}
	rowOf := func(shape []int, from int) int { // bytes of one index of dimension from-1
		n := es
		for d := from; d < nd; d++ {
			n *= shape[d]
		}
		return n
	}
	regionOff := func(idx []int) int {
		off := 0
		for d := range nd {
			off = off*region[d] + idx[d]
		}
		return off * es
	}
	if j <= 0 {
		return []copy2D{{src: 0, dst: regionOff(b.start), width: numElements(b.count) * es, height: 1}}
	}
	c := copy2D{width: rowOf(b.count, j), height: b.count[j-1], srcPitch: rowOf(b.count, j), dstPitch: rowOf(region, j)}
	var out []copy2D
	idx := append([]int(nil), b.start...)
	outer := b.count[:j-1]
	pos := make([]int, j-1)
	src := 0
	for {
		for d := range pos {
			idx[d] = b.start[d] + pos[d]
		}
		cc := c
		cc.src, cc.dst = src, regionOff(idx)
		out = append(out, cc)
		src += c.height * c.srcPitch
		d := len(pos) - 1
		for ; d >= 0; d-- {
			if pos[d]++; pos[d] < outer[d] {
				break
			}
			pos[d] = 0
		}
		if d < 0 {
			return out
		}
	}
}

// bufPools hold buffers for stored and decoded chunks, reused across
// chunks and reads instead of a new one for each chunk: pool k holds
// buffers of at least 1<<k bytes, so that a buffer taken is never too
// small (one pool of every size handed out small buffers for large
// chunks, each then dropped and a new one made: garbage at every chunk).
var bufPools [64]sync.Pool // *[]byte

// getBuf returns a pooled buffer of n bytes.
func getBuf(n int) *[]byte {
	k := bits.Len(uint(max(n, 1) - 1)) // 1<<k >= n
	if p, _ := bufPools[k].Get().(*[]byte); p != nil {
		*p = (*p)[:n]
		return p
	}
	b := make([]byte, n, 1<<k)
	return &b
}

// putBuf gives p back to the pool.
func putBuf(p *[]byte) {
	if c := cap(*p); c > 0 {
		bufPools[bits.Len(uint(c))-1].Put(p) // 1<<k <= c
	}
}
