package zarr

import (
	"context"
	"encoding/binary"
	"fmt"
	"strings"
	"unicode/utf8"
)

// maxVarChunk bounds the decoded bytes of a chunk of variable-length
// elements, its framing included: what a read of one holds at once, and
// what a decoder may take for it (a chunk's frame may declare up to that
// much, and every worker decodes one). A stored chunk that decodes to
// more fails with ErrCorruptChunk, a write that would store more with
// ErrInvalidRegion, and chunks of more elements than it can frame are
// refused when the array is opened.
const maxVarChunk = 64 << 20

// vlenCodec is numcodecs' framing of variable-length elements (v3
// codecs vlen-utf8 and vlen-bytes, v2 filters of the same ids): the
// element count as a little-endian uint32, then each element, C order,
// as its length in bytes (uint32) and its bytes. The arrays it serves
// are read and written as strings (Array.ReadStrings, WriteStrings), so
// its chunkArray methods only refuse.
type vlenCodec struct{ utf8 bool }

// vlenKinds maps the vlen codecs' names to the kinds they frame.
var vlenKinds = map[string]Kind{"vlen-utf8": VarString, "vlen-bytes": VarBytes}

// vlenName returns the name of the vlen codec of kind k.
func vlenName(k Kind) string {
	if k == VarBytes {
		return "vlen-bytes"
	}
	return "vlen-utf8"
}

func (c vlenCodec) encode(chunkArray, []byte) ([]byte, error) { return nil, c.refuse() }

func (c vlenCodec) decode([]byte, []int) (chunkArray, error) { return chunkArray{}, c.refuse() }

func (c vlenCodec) refuse() error {
	return fmt.Errorf("%w: variable-length elements are read and written as strings (ReadStrings, WriteStrings), not bytes", ErrUnsupportedDataType)
}

// checkVarChunk refuses chunks of n variable-length elements whose
// framing alone passes maxVarChunk: no such chunk could be read.
func checkVarChunk(n int) error {
	if n > (maxVarChunk-4)/4 {
		return fmt.Errorf("%w: chunks of %d variable-length elements: their framing alone passes %d bytes", ErrInvalidMetadata, n, maxVarChunk)
	}
	return nil
}

// appendFrame appends ss framed as vlenCodec stores them.
func appendFrame(dst []byte, ss []string) []byte {
	dst = binary.LittleEndian.AppendUint32(dst, uint32(len(ss)))
	for _, s := range ss {
		dst = binary.LittleEndian.AppendUint32(dst, uint32(len(s)))
		dst = append(dst, s...)
	}
	return dst
}

// frameSize returns the bytes appendFrame takes for ss.
func frameSize(ss []string) int {
	n := 4 + 4*len(ss)
	for _, s := range ss {
		n += len(s)
	}
	return n
}

// parse returns the n elements framed in b, substrings of one copy of
// b. The count must be n, every length must fit what is left, nothing
// may follow the last element and, for vlen-utf8, each element must be
// UTF-8; else ErrCorruptChunk. The n strings are allocated only once b
// is seen to hold n lengths.
func (c vlenCodec) parse(b []byte, n int) ([]string, error) {
	if len(b) < 4 {
		return nil, fmt.Errorf("%w: %d bytes, no element count", ErrCorruptChunk, len(b))
	}
	if got := binary.LittleEndian.Uint32(b); uint64(got) != uint64(n) {
		return nil, fmt.Errorf("%w: %d elements framed, the chunk has %d", ErrCorruptChunk, got, n)
	}
	if (len(b)-4)/4 < n {
		return nil, fmt.Errorf("%w: %d bytes cannot frame %d elements", ErrCorruptChunk, len(b), n)
	}
	body := b[4:]
	all := string(body)
	out := make([]string, n)
	pos := 0
	for i := range out {
		if len(all)-pos < 4 {
			return nil, fmt.Errorf("%w: element %d of %d has no length", ErrCorruptChunk, i, n)
		}
		l := uint64(binary.LittleEndian.Uint32(body[pos:]))
		pos += 4
		if l > uint64(len(all)-pos) {
			return nil, fmt.Errorf("%w: element %d of %d bytes, %d left", ErrCorruptChunk, i, l, len(all)-pos)
		}
		s := all[pos : pos+int(l)]
		if c.utf8 && !utf8.ValidString(s) {
			return nil, fmt.Errorf("%w: element %d is not UTF-8", ErrCorruptChunk, i)
		}
		out[i] = s
		pos += int(l)
	}
	if pos != len(all) {
		return nil, fmt.Errorf("%w: %d bytes after the last element", ErrCorruptChunk, len(all)-pos)
	}
	return out, nil
}

// vlen returns the chain's vlen codec, if it has one.
func (p *pipeline) vlen() (vlenCodec, bool) {
	c, ok := p.ab.(vlenCodec)
	return c, ok
}

// decodeStrings decodes b, the stored bytes of a chunk of shape (a
// shard: its inner chunks) of variable-length elements, C order.
func (p *pipeline) decodeStrings(b []byte, shape []int) ([]string, error) {
	if s := p.sharded(); s != nil {
		return s.decodeStrings(b, shape)
	}
	c, ok := p.vlen()
	if !ok {
		return nil, fmt.Errorf("%w: %v elements are not variable-length", ErrUnsupportedDataType, p.dt)
	}
	b, err := p.decodeBytes(b, 0, maxVarChunk, nil)
	if err != nil {
		return nil, err
	}
	if len(b) > maxVarChunk {
		return nil, fmt.Errorf("%w: %d decoded bytes pass the bound of %d on a chunk of variable-length elements", ErrCorruptChunk, len(b), maxVarChunk)
	}
	stored, err := c.parse(b, numElements(shape))
	if err != nil || len(p.aa) == 0 {
		return stored, err
	}
	out := make([]string, len(stored))
	for k, i := range p.storedOrder(shape) {
		out[i] = stored[k]
	}
	return out, nil
}

// encodeStrings encodes ss, a chunk of shape of variable-length
// elements in C order.
func (p *pipeline) encodeStrings(ss []string, shape []int) ([]byte, error) {
	if s := p.sharded(); s != nil {
		return s.encodeStrings(ss, shape)
	}
	if n := frameSize(ss); n > maxVarChunk {
		return nil, fmt.Errorf("%w: a chunk of %d framed bytes passes the bound of %d", ErrInvalidRegion, n, maxVarChunk)
	}
	if len(p.aa) > 0 {
		stored := make([]string, len(ss))
		for k, i := range p.storedOrder(shape) {
			stored[k] = ss[i]
		}
		ss = stored
	}
	return p.encodeBytes(appendFrame(nil, ss), 0, nil)
}

// storedOrder returns, for each element of a chunk of shape as the
// array-to-array codecs (transposes) leave it, the element's C-order
// index in the chunk: the codecs run on the indexes themselves.
func (p *pipeline) storedOrder(shape []int) []uint32 {
	n := numElements(shape)
	b := make([]byte, 4*n)
	for i := range n {
		binary.LittleEndian.PutUint32(b[4*i:], uint32(i))
	}
	a := chunkArray{shape: shape, data: b}
	for _, c := range p.aa {
		a = c.encode(a, 4)
	}
	out := make([]uint32, n)
	for k := range out {
		out[k] = binary.LittleEndian.Uint32(a.data[4*k:])
	}
	return out
}

// decodeStrings decodes a shard of variable-length elements whole: each
// inner chunk the index lists, the others as the fill value; at most
// maxVarChunk framed bytes in all, as one chunk.
func (s *shardingCodec) decodeStrings(b []byte, shape []int) ([]string, error) {
	idx, err := s.readIndex(bytesReader(b))
	if err != nil {
		return nil, err
	}
	out := make([]string, numElements(shape))
	whole := view{shape: shape, es: 1}
	fill := string(s.fill)
	total := 0
	err = forChunks(s.inner, s.perShard, box{start: make([]int, len(shape)), count: shape}, func(t chunkTask) error {
		e := idx[flatIndex(t.coords, s.perShard)]
		if e[0] == missingEntry {
			return fillStrings(out, whole.sub(t.dstStart), t.sel.count, fill)
		}
		inner, err := s.codecs.decodeStrings(b[e[0]:e[0]+e[1]], s.inner)
		if err != nil {
			return err
		}
		if total += frameSize(inner); total > maxVarChunk {
			return fmt.Errorf("%w: a shard's inner chunks decode to more than %d bytes", ErrCorruptChunk, maxVarChunk)
		}
		return pairStrings(whole.sub(t.dstStart), view{shape: s.inner, es: 1, start: t.sel.start}, t.sel.count, func(d, x int) { out[d] = inner[x] })
	})
	if err != nil {
		return nil, err
	}
	return out, nil
}

// encodeStrings encodes ss, a shard of shape of variable-length
// elements: each inner chunk, but those all of the fill value, which
// its index lists as missing.
func (s *shardingCodec) encodeStrings(ss []string, shape []int) ([]byte, error) {
	enc := make([][]byte, s.nInner())
	start := make([]int, len(shape))
	fill := string(s.fill)
	total := 0
	for i := range enc {
		unflatten(i, s.perShard, start)
		for d := range start {
			start[d] *= s.inner[d]
		}
		inner := make([]string, numElements(s.inner))
		pairStrings(view{shape: s.inner, es: 1, start: make([]int, len(start))}, view{shape: shape, es: 1}.sub(start), s.inner, func(d, x int) { inner[d] = ss[x] })
		if allEqual(inner, fill) {
			continue
		}
		if total += frameSize(inner); total > maxVarChunk {
			return nil, fmt.Errorf("%w: a shard of more than %d framed bytes", ErrInvalidRegion, maxVarChunk)
		}
		var err error
		if enc[i], err = s.codecs.encodeStrings(inner, s.inner); err != nil {
			return nil, err
		}
	}
	return s.assemble(enc, nil), nil
}

// varFillChunk returns a chunk of n elements, each the fill value.
func (p *pipeline) varFillChunk(n int) []string {
	out := make([]string, n)
	fill := string(p.fill)
	for i := range out {
		out[i] = fill
	}
	return out
}

// ReadStrings reads the elements of [start, stop), C order, as strings:
// those of an array of a variable-length type (VarString, VarBytes) as
// stored, and those of a fixed-length string type (Bytes, Unicode, Raw)
// as DataType.Strings returns them. Chunks are fetched and decoded by up
// to SetWorkers goroutines; missing ones read as the fill value (v2's
// null fill as ""). A stored chunk that does not decode fails with
// ErrCorruptChunk (a VarString element that is not UTF-8 among them);
// an array of another type with ErrUnsupportedDataType.
func (a *Array) ReadStrings(ctx context.Context, start, stop []int) ([]string, error) {
	t := a.meta.DataType
	if t.isString() {
		_, size, err := a.region(start, stop)
		if err != nil {
			return nil, err
		}
		b := make([]byte, size)
		if err := a.ReadRegion(ctx, start, stop, b); err != nil {
			return nil, err
		}
		return t.Strings(b)
	}
	if !t.Variable() {
		return nil, fmt.Errorf("%w: %v holds no strings", ErrUnsupportedDataType, t)
	}
	r, err := a.box(start, stop)
	if err != nil {
		return nil, err
	}
	out := make([]string, numElements(r.count))
	tasks := a.chunkTasks(r)
	fill := string(a.pipe.fill)
	err = a.run(ctx, len(tasks), func(ctx context.Context, _, i int) error {
		t := tasks[i]
		dst := view{shape: r.count, es: 1}.sub(t.dstStart)
		key := a.ChunkKey(t.coords)
		stored, found, err := a.fetch(ctx, piece{key: key, n: -1}, nil)
		if err != nil {
			return err
		}
		if !found {
			return fillStrings(out, dst, t.sel.count, fill)
		}
		chunk, err := a.pipe.decodeStrings(stored, a.meta.ChunkShape)
		if err != nil {
			return fmt.Errorf("chunk %s: %w", key, err)
		}
		// Strings are parts of one copy of the chunk: a selection of
		// few elements gets copies, not the chunk's bytes kept alive.
		clone := 2*numElements(t.sel.count) < len(chunk)
		return pairStrings(dst, view{shape: a.meta.ChunkShape, es: 1, start: t.sel.start}, t.sel.count, func(d, s int) {
			out[d] = chunk[s]
			if clone {
				out[d] = strings.Clone(chunk[s])
			}
		})
	})
	if err != nil {
		return nil, err
	}
	return out, nil
}

// WriteStrings writes ss, one string per element of [start, stop), C
// order: to an array of a variable-length type as they are, and to one
// of a fixed-length string type through DataType.AppendStrings (NUL
// padded; a string too long fails). A VarString element that is not
// UTF-8, or a count of strings other than the region's elements, fails
// with ErrInvalidRegion before anything is written; an array of another
// type with ErrUnsupportedDataType. Chunks are stored as WriteRegion
// stores them: whole, atomically, those the region covers in part read
// and merged, writes of one chunk waiting for each other.
func (a *Array) WriteStrings(ctx context.Context, start, stop []int, ss []string) error {
	t := a.meta.DataType
	if !t.isString() && !t.Variable() {
		return fmt.Errorf("%w: %v holds no strings", ErrUnsupportedDataType, t)
	}
	r, err := a.box(start, stop)
	if err != nil {
		return err
	}
	if n := numElements(r.count); len(ss) != n {
		return fmt.Errorf("%w: %d strings for a region of %d elements", ErrInvalidRegion, len(ss), n)
	}
	if t.isString() {
		b, err := t.AppendStrings(nil, ss...)
		if err != nil {
			return err
		}
		return a.WriteRegion(ctx, start, stop, b)
	}
	if t.Kind == VarString {
		for i, s := range ss {
			if !utf8.ValidString(s) {
				return fmt.Errorf("%w: string %d is not UTF-8", ErrInvalidRegion, i)
			}
		}
	}
	tasks := a.chunkTasks(r)
	a.spreadDirs(tasks)
	return a.run(ctx, len(tasks), func(ctx context.Context, _, i int) error { return a.writeStringsChunk(ctx, tasks[i], r, ss) })
}

// writeStringsChunk writes the region's part of chunk t: ss, the
// region's strings, merged into the chunk's stored elements (or the fill
// value) unless they cover it.
func (a *Array) writeStringsChunk(ctx context.Context, t chunkTask, r box, ss []string) error {
	key := a.ChunkKey(t.coords)
	unlock, err := a.lockChunk(ctx, key)
	if err != nil {
		return err
	}
	defer unlock()
	n := numElements(a.meta.ChunkShape)
	// merge puts the region's part into the chunk, old where found, and
	// encodes it; empty where all of it is the fill value, unless a
	// stores such chunks or keep asks for its bytes.
	merge := func(old []byte, found, keep bool) ([]byte, bool, error) {
		var chunk []string
		if found {
			var err error
			if chunk, err = a.pipe.decodeStrings(old, a.meta.ChunkShape); err != nil {
				return nil, false, fmt.Errorf("chunk %s: %w", key, err)
			}
		} else {
			chunk = a.pipe.varFillChunk(n)
		}
		pairStrings(view{shape: a.meta.ChunkShape, es: 1, start: t.sel.start}, view{shape: r.count, es: 1}.sub(t.dstStart), t.sel.count, func(c, s int) { chunk[c] = ss[s] })
		if !a.writeEmpty && !keep && allEqual(chunk, string(a.pipe.fill)) {
			return nil, true, nil
		}
		enc, err := a.pipe.encodeStrings(chunk, a.meta.ChunkShape)
		if err != nil {
			return nil, false, fmt.Errorf("chunk %s: %w", key, err)
		}
		return enc, false, nil
	}
	_, err = a.rewriteChunk(ctx, key, a.covers(t), merge)
	return err
}

// allEqual reports whether every element of ss is s.
func allEqual(ss []string, s string) bool {
	for _, x := range ss {
		if x != s {
			return false
		}
	}
	return true
}

// pairStrings calls f with the element offsets in a and in b of each
// element of the box count, walking both views (es 1) together.
func pairStrings(a, b view, count []int, f func(aOff, bOff int)) error {
	if len(count) == 0 {
		f(0, 0)
		return nil
	}
	return pairRuns(a, b, count, func(x, y, m int) error {
		for j := range m {
			f(x+j, y+j)
		}
		return nil
	})
}

// fillStrings sets the elements of out in the box count at v's position
// (es 1) to fill.
func fillStrings(out []string, v view, count []int, fill string) error {
	return v.runs(count, func(off, n int) error {
		for j := range n {
			out[off+j] = fill
		}
		return nil
	})
}

// chunkTasks returns the chunks region r touches, in C order.
func (a *Array) chunkTasks(r box) []chunkTask {
	var tasks []chunkTask
	forChunks(a.meta.ChunkShape, a.grid, r, func(t chunkTask) error { tasks = append(tasks, t); return nil })
	return tasks
}
