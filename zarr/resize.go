package zarr

import (
	"context"
	"encoding/json"
	"fmt"
	"slices"
	"strconv"
	"strings"

	"github.com/kvikgo/kvik/cuda"
)

// Resize changes the array's shape to shape (as many dimensions; the
// chunk shape stays): the "shape" of its metadata document, every other
// field kept as stored. Growing writes the document alone: the new
// elements read as the fill value. Shrinking first deletes the chunks
// that lie wholly outside the new shape and sets the elements of the
// chunks it cuts that fall outside it to the fill value (a chunk left
// all fill value is deleted; see SetWriteEmptyChunks), then writes the
// document, so that growing again shows the fill value there, not the
// old elements (zarr-python leaves them in the cut chunks). A failure
// part way leaves the old shape, some elements outside the new one
// perhaps already the fill value.
//
// A stored document whose shape is no longer a's (another writer
// resized the array) fails with ErrInvalidMetadata before anything is
// written. Resize must not run at the same time as other calls on a;
// other Arrays open on the array keep the old shape until opened again,
// as does a store's consolidated metadata until Consolidate runs again.
func (a *Array) Resize(ctx context.Context, shape []int) error {
	if len(shape) != len(a.meta.Shape) {
		return fmt.Errorf("%w: shape %v for a rank-%d array", ErrInvalidMetadata, shape, len(a.meta.Shape))
	}
	if err := checkShape(shape, a.meta.ChunkShape); err != nil {
		return err
	}
	key, doc, err := a.storedDoc(ctx)
	if err != nil {
		return err
	}
	if slices.Equal(shape, a.meta.Shape) {
		return nil
	}
	if err := a.cutTo(ctx, shape); err != nil {
		return err
	}
	if doc["shape"], err = json.Marshal(shape); err != nil {
		return err
	}
	if err := a.writeDoc(ctx, key, doc); err != nil {
		return err
	}
	a.meta.Shape = slices.Clone(shape)
	for i := range shape {
		a.grid[i] = (shape[i] + a.meta.ChunkShape[i] - 1) / a.meta.ChunkShape[i]
	}
	return nil
}

// SetAttributes replaces the array's attributes with attrs (nil: none):
// the "attributes" of its zarr.json, every other field kept as stored,
// or a v2 array's .zattrs. Keys and strings that are not valid UTF-8
// fail with ErrInvalidMetadata before anything is written. Like Resize,
// it must not run at the same time as other calls on a, and a store's
// consolidated metadata keeps the old attributes until Consolidate runs
// again.
func (a *Array) SetAttributes(ctx context.Context, attrs map[string]any) error {
	if attrs == nil {
		attrs = map[string]any{}
	}
	if a.meta.ZarrFormat == 2 {
		b, err := marshalJSON(attrs, "    ")
		if err != nil {
			return err
		}
		if err := a.store.Set(ctx, a.path+".zattrs", b); err != nil {
			return err
		}
	} else {
		key, doc, err := a.readDoc(ctx)
		if err != nil {
			return err
		}
		if doc["attributes"], err = marshalJSON(attrs, ""); err != nil {
			return err
		}
		if err := a.writeDoc(ctx, key, doc); err != nil {
			return err
		}
	}
	a.meta.Attributes = attrs
	return nil
}

// readDoc reads a's metadata document (zarr.json, or .zarray) from the
// store itself, not its consolidated metadata: its key and its fields.
func (a *Array) readDoc(ctx context.Context) (string, map[string]json.RawMessage, error) {
	key := a.path + "zarr.json"
	if a.meta.ZarrFormat == 2 {
		key = a.path + ".zarray"
	}
	b, err := a.store.Get(ctx, key, nil)
	if err != nil {
		return "", nil, err
	}
	var doc map[string]json.RawMessage
	if err := json.Unmarshal(b, &doc); err != nil {
		return "", nil, fmt.Errorf("%w: %s: %v", ErrInvalidMetadata, key, err)
	}
	return key, doc, nil
}

// writeDoc stores doc, a's metadata document read by readDoc and
// changed, under key, indented as Create writes it.
func (a *Array) writeDoc(ctx context.Context, key string, doc map[string]json.RawMessage) error {
	indent := "  "
	if a.meta.ZarrFormat == 2 {
		indent = "    "
	}
	b, err := marshalJSON(doc, indent)
	if err != nil {
		return err
	}
	return a.store.Set(ctx, key, b)
}

// storedDoc is readDoc, checked to hold a's shape.
func (a *Array) storedDoc(ctx context.Context) (string, map[string]json.RawMessage, error) {
	key, doc, err := a.readDoc(ctx)
	if err != nil {
		return "", nil, err
	}
	var stored struct{ Shape []int }
	if err := json.Unmarshal(doc["shape"], &stored.Shape); err != nil || !slices.Equal(stored.Shape, a.meta.Shape) {
		return "", nil, fmt.Errorf("%w: %s holds shape %s, not the array's %v: resized since it was opened", ErrInvalidMetadata, key, doc["shape"], a.meta.Shape)
	}
	return key, doc, nil
}

// cutTo readies the chunks for a shrink to shape: those stored wholly
// outside it deleted (keys past the old grid too, which a later grow
// would show), those it cuts with their elements outside it set to the
// fill value. Nothing is done where no dimension shrinks.
func (a *Array) cutTo(ctx context.Context, shape []int) error {
	shrinks := false
	for d := range shape {
		shrinks = shrinks || shape[d] < a.meta.Shape[d]
	}
	if !shrinks {
		return nil
	}
	keys, err := a.store.List(ctx, a.path)
	if err != nil {
		return err
	}
	type cut struct {
		key    string
		coords []int
		gone   bool
	}
	var cuts []cut
	for _, k := range keys {
		c, ok := a.chunkCoords(k)
		if !ok {
			continue
		}
		gone, cuts1 := false, false
		for d, x := range c {
			if x >= a.grid[d] { // no product that could overflow
				gone = true
				continue
			}
			lo, hi := x*a.meta.ChunkShape[d], min((x+1)*a.meta.ChunkShape[d], a.meta.Shape[d])
			gone = gone || lo >= shape[d]
			cuts1 = cuts1 || shape[d] < hi
		}
		if gone || cuts1 {
			cuts = append(cuts, cut{k, c, gone})
		}
	}
	return a.run(ctx, len(cuts), func(ctx context.Context, _, i int) error {
		c := cuts[i]
		if c.gone {
			unlock, err := a.lockChunk(ctx, c.key)
			if err != nil {
				return err
			}
			defer unlock()
			return a.store.Delete(ctx, c.key)
		}
		return a.clearOutside(ctx, c.key, c.coords, shape)
	})
}

// chunkCoords returns the grid coordinates of key, a's chunk key
// (ChunkKey's inverse), or false where key is no chunk key of a's.
func (a *Array) chunkCoords(key string) ([]int, bool) {
	rest, ok := strings.CutPrefix(key, a.path)
	if !ok {
		return nil, false
	}
	nd := len(a.meta.Shape)
	if a.meta.ZarrFormat == 3 && a.meta.ChunkKeyEncoding == "default" {
		if rest, ok = strings.CutPrefix(rest, "c"); !ok {
			return nil, false
		}
		if nd == 0 {
			return []int{}, rest == ""
		}
		if rest, ok = strings.CutPrefix(rest, a.meta.Separator); !ok {
			return nil, false
		}
	} else if nd == 0 {
		return []int{}, rest == "0"
	}
	parts := strings.Split(rest, a.meta.Separator)
	if len(parts) != nd {
		return nil, false
	}
	c := make([]int, nd)
	for i, p := range parts {
		x, err := strconv.Atoi(p)
		if err != nil || x < 0 || strconv.Itoa(x) != p {
			return nil, false
		}
		c[i] = x
	}
	return c, true
}

// clearOutside sets the elements of chunk key, at grid coordinates c,
// that lie outside shape to the fill value, deleting the chunk where
// that leaves it all fill value (unless a stores such chunks); a missing
// chunk stays missing.
func (a *Array) clearOutside(ctx context.Context, key string, c, shape []int) error {
	unlock, err := a.lockChunk(ctx, key)
	if err != nil {
		return err
	}
	defer unlock()
	cs := a.meta.ChunkShape
	// The boxes outside shape: in each dimension the chunk runs past,
	// its elements from shape on, whatever their other coordinates.
	var boxes []box
	for d := range cs {
		if lim := shape[d] - c[d]*cs[d]; lim < cs[d] {
			b := box{start: make([]int, len(cs)), count: slices.Clone(cs)}
			b.start[d], b.count[d] = lim, cs[d]-lim
			boxes = append(boxes, b)
		}
	}
	merge := func(old []byte, found, keep bool) ([]byte, bool, error) {
		if !found {
			return nil, true, nil
		}
		if a.meta.DataType.Variable() {
			ss, err := a.pipe.decodeStrings(old, cs)
			if err != nil {
				return nil, false, fmt.Errorf("chunk %s: %w", key, err)
			}
			fill := string(a.pipe.fill)
			for _, b := range boxes {
				fillStrings(ss, view{shape: cs, es: 1, start: b.start}, b.count, fill)
			}
			if !a.writeEmpty && !keep && allEqual(ss, fill) {
				return nil, true, nil
			}
			enc, err := a.pipe.encodeStrings(ss, cs)
			return enc, false, err
		}
		buf := make([]byte, numElements(cs)*a.meta.DataType.Size)
		ch, err := a.pipe.decode(old, cs, buf)
		if err != nil {
			return nil, false, fmt.Errorf("chunk %s: %w", key, err)
		}
		buf = append(buf[:0], ch.data...)
		for _, b := range boxes {
			view{buf: buf, shape: cs, es: a.meta.DataType.Size, start: b.start}.fill(b.count, a.pipe.fill)
		}
		if !a.writeEmpty && !keep && isFill(buf, a.pipe.fill) {
			return nil, true, nil
		}
		enc, err := a.pipe.encode(chunkArray{shape: cs, data: buf}, nil)
		return enc, false, err
	}
	_, err = a.rewriteChunk(ctx, key, false, merge)
	return err
}

// Append grows the array along axis by the elements of src (C order,
// little-endian elements: a region of the array's shape but along axis,
// as many as src holds) and writes them there: Resize, then WriteRegion.
// A write that fails leaves the array grown, the elements it did not
// write reading as the fill value. Not for variable-length elements
// (ErrUnsupportedDataType): Resize, then WriteStrings.
func (a *Array) Append(ctx context.Context, axis int, src []byte) error {
	start, stop, err := a.grow(ctx, axis, len(src))
	if err != nil || start == nil {
		return err
	}
	return a.WriteRegion(ctx, start, stop, src)
}

// AppendDevice is Append of the size bytes of device memory at src:
// Resize, then WriteRegionDevice.
func (a *Array) AppendDevice(ctx context.Context, axis int, src cuda.DevicePtr, size int) error {
	start, stop, err := a.grow(ctx, axis, size)
	if err != nil || start == nil {
		return err
	}
	return a.WriteRegionDevice(ctx, start, stop, src)
}

// grow resizes a along axis by n bytes' worth of slices and returns the
// region they take; nil where n is 0.
func (a *Array) grow(ctx context.Context, axis, n int) (start, stop []int, err error) {
	shape := a.Shape()
	if axis < 0 || axis >= len(shape) {
		return nil, nil, fmt.Errorf("%w: axis %d of a rank-%d array", ErrInvalidRegion, axis, len(shape))
	}
	if a.meta.DataType.Variable() {
		return nil, nil, vlenCodec{}.refuse()
	}
	slice := a.meta.DataType.Size
	for d, x := range shape {
		if d != axis {
			slice *= x
		}
	}
	if n == 0 {
		return nil, nil, nil
	}
	if n < 0 || slice == 0 || n%slice != 0 {
		return nil, nil, fmt.Errorf("%w: %d bytes are no whole number of %d-byte slices along axis %d", ErrInvalidRegion, n, slice, axis)
	}
	start = make([]int, len(shape))
	start[axis] = shape[axis]
	shape[axis] += n / slice
	if err := a.Resize(ctx, shape); err != nil {
		return nil, nil, err
	}
	return start, shape, nil
}
