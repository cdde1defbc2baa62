package torch

import (
	"encoding/binary"
	"errors"
	"fmt"
	"io"
	"math"
	"strings"

	"golang.org/x/sync/errgroup"

	"github.com/kvikgo/kvik/internal/formatkit/pickle"
)

// The legacy format (torch.save before PyTorch 1.6, or with
// _use_new_zipfile_serialization=False) is five pickles one after
// another: PyTorch's magic number, the format's version (1001), the
// writer's system (its byte order), the object with its storages as
// persistent IDs, and the list of the storages' keys; then each storage
// in the order of that list, its count of elements (int64,
// little-endian) before its bytes.

const legacyVersion = 1001

// legacyHead is the first read of a legacy checkpoint, which holds its
// pickles but for the largest; a pickle cut short by it is read again
// from a read 4x as long, up to legacyHead past maxPickle.
const legacyHead = 1 << 20

// errShortHead reports pickles cut short by the end of the bytes read.
var errShortHead = errors.New("torch: pickles past the bytes read")

// quantizedSizes are the element sizes of the storages of quantized
// tensors (skipped, but their bytes are stepped over).
var quantizedSizes = map[string]int64{"QInt8Storage": 1, "QUInt8Storage": 1, "QInt32Storage": 4, "QUInt4x2Storage": 1, "QUInt2x4Storage": 1}

// decodeLegacy reads the header of the legacy checkpoint of size bytes
// that r reads: its pickles, and the count before each storage, checked
// against the storage's persistent ID and the file's size.
func decodeLegacy(r io.ReaderAt, size int64) (*Header, error) {
	limit := min(size, maxPickle+legacyHead)
	for n := int64(legacyHead); ; n *= 4 {
		n = min(n, limit)
		head := make([]byte, n)
		if _, err := r.ReadAt(head, 0); err != nil {
			return nil, err
		}
		h, err := parseLegacy(r, head, size)
		if !errors.Is(err, errShortHead) {
			return h, err
		}
		if n == limit {
			return nil, fmt.Errorf("%w: legacy pickles past %d bytes", ErrInvalidCheckpoint, n)
		}
	}
}

// parseLegacy decodes the pickles at the start of head, the first bytes
// of the file, and finds the storages after them.
func parseLegacy(r io.ReaderAt, head []byte, size int64) (*Header, error) {
	pos := 0
	next := func(persistent func(any) (any, error)) (any, error) {
		v, n, err := pickle.DecodePrefix(head[pos:], persistent)
		switch {
		case errors.Is(err, pickle.ErrTruncated) && int64(len(head)) < size:
			return nil, errShortHead
		case errors.Is(err, pickle.ErrInvalid) || errors.Is(err, pickle.ErrUnsupported):
			return nil, fmt.Errorf("%w: legacy pickle at byte %d: %w", ErrInvalidCheckpoint, pos, err)
		case err != nil: // the persistent IDs' own errors
			return nil, err
		}
		pos += n
		return v, nil
	}
	magic, err := next(nil)
	if err != nil {
		return nil, err
	}
	if m, ok := magic.(pickle.Long); !ok || string(m) != string(legacyMagic[4:]) {
		return nil, fmt.Errorf("%w: legacy magic number %.40v", ErrInvalidCheckpoint, magic)
	}
	if v, err := next(nil); err != nil {
		return nil, err
	} else if v != int64(legacyVersion) {
		return nil, fmt.Errorf("%w: legacy format version %.40v", ErrUnsupported, v)
	}
	info, err := next(nil)
	if err != nil {
		return nil, err
	}
	if err := legacyByteOrder(info); err != nil {
		return nil, err
	}
	storages := map[string]*storage{}
	persist := func(pid any) (any, error) {
		v, err := persistentStorage(pid)
		if st, ok := v.(*storage); ok {
			if old := storages[st.key]; old != nil && (old.dtype != st.dtype || old.n != st.n || old.class != st.class) {
				return nil, fmt.Errorf("%w: storage %s described twice, unlike", ErrInvalidCheckpoint, st.key)
			}
			storages[st.key] = st
		}
		return v, err
	}
	start := pos
	obj, err := next(persist)
	if err != nil {
		return nil, err
	}
	keysObj, err := next(nil)
	if err != nil {
		return nil, err
	}
	keys, err := legacyKeys(keysObj, storages)
	if err != nil {
		return nil, err
	}
	w := &walker{seen: map[any]bool{}, budget: pos - start + 64}
	if err := w.walk("", obj, 0); err != nil {
		return nil, err
	}
	at, err := legacyStorages(r, head, int64(pos), size, keys, storages)
	if err != nil {
		return nil, err
	}
	return w.header(&Header{Legacy: true}, func(t *found) error {
		rec := at[t.st.key]
		return placeIn(t, rec[0], rec[1])
	})
}

// legacyByteOrder checks the writer's system, a dict with little_endian.
func legacyByteOrder(info any) error {
	d, ok := info.(*pickle.Dict)
	if ok {
		for i, k := range d.Keys {
			if k != "little_endian" {
				continue
			}
			switch d.Values[i] {
			case true:
				return nil
			case false:
				return fmt.Errorf("%w: %w: big-endian storages", ErrUnsupported, ErrLegacyFormat)
			}
		}
	}
	return fmt.Errorf("%w: legacy system description %.100v", ErrInvalidCheckpoint, info)
}

// legacyKeys checks the list of storage keys: each once, each described
// by a persistent ID of the object's pickle, and every such storage
// listed.
func legacyKeys(v any, storages map[string]*storage) ([]string, error) {
	l, ok := v.(*pickle.List)
	if !ok {
		return nil, fmt.Errorf("%w: legacy storage keys %.100v", ErrInvalidCheckpoint, v)
	}
	keys := make([]string, 0, len(l.Items))
	seen := map[string]bool{}
	for _, x := range l.Items {
		k, ok := x.(string)
		if !ok || seen[k] || storages[k] == nil {
			return nil, fmt.Errorf("%w: legacy storage key %.100v twice, or of no storage", ErrInvalidCheckpoint, x)
		}
		seen[k] = true
		keys = append(keys, k)
	}
	if len(keys) != len(storages) {
		return nil, fmt.Errorf("%w: %d storages, %d keys listed", ErrInvalidCheckpoint, len(storages), len(keys))
	}
	return keys, nil
}

// legacyStorages lays out the storages of keys from byte pos of the file
// of size bytes, each its count of elements then its bytes, by the
// counts of their persistent IDs, then checks the count before each:
// from head (the file's first bytes) or read, legacyReads at once (a
// remote file's are requests; in turn, one after another, they took a
// round trip each). It returns each storage's offset and bytes by key.
func legacyStorages(r io.ReaderAt, head []byte, pos, size int64, keys []string, storages map[string]*storage) (map[string][2]int64, error) {
	at := make(map[string][2]int64, len(keys))
	for _, k := range keys {
		st := storages[k]
		es := int64(1)
		switch {
		case st.dtype != "":
			es = int64(st.dtype.Size())
		case st.class != "":
			if es = quantizedSizes[st.class[strings.LastIndexByte(st.class, '.')+1:]]; es == 0 {
				return nil, fmt.Errorf("%w: a storage of %s", ErrUnsupported, st.class)
			}
		}
		if pos > size-8 || st.n > math.MaxInt64/es || st.n*es > size-pos-8 {
			return nil, fmt.Errorf("%w: storage %s of %d elements at byte %d of %d: past the end of the file", ErrInvalidCheckpoint, k, st.n, pos, size)
		}
		at[k] = [2]int64{pos + 8, st.n * es}
		pos += 8 + st.n*es
	}
	var g errgroup.Group
	g.SetLimit(legacyReads)
	for _, k := range keys {
		g.Go(func() error {
			var b [8]byte
			p := at[k][0] - 8
			if p+8 <= int64(len(head)) {
				copy(b[:], head[p:])
			} else if _, err := r.ReadAt(b[:], p); err != nil {
				return err
			}
			if n := int64(binary.LittleEndian.Uint64(b[:])); n != storages[k].n {
				return fmt.Errorf("%w: storage %s of %d elements, its description %d (at byte %d)", ErrInvalidCheckpoint, k, n, storages[k].n, p)
			}
			return nil
		})
	}
	if err := g.Wait(); err != nil {
		return nil, err
	}
	return at, nil
}

// legacyReads bounds the counts a legacy checkpoint's header reads at
// once.
const legacyReads = 16
