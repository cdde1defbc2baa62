// Package torch reads the checkpoints that PyTorch's torch.save writes
// (.pt, .pth, pytorch_model.bin: a ZIP archive of a pickle, data.pkl,
// and one stored member per tensor storage) into GPU or host memory
// through kvik, each tensor read straight from the file, without Python.
//
// The pickle is decoded as data: nothing it names is run or looked up,
// whatever it holds (torch.load(weights_only=False) would run it). The
// tensors are found in it where torch.load would return them, under
// their names in the dicts, lists and tuples that hold them (a state
// dict's keys, "model.layer.weight" in a checkpoint's dict); the other
// objects (numbers, strings, an argparse.Namespace) are left alone.
// Every size and offset is checked against the archive before anything
// is allocated. Files in the legacy format (before PyTorch 1.6: pickles
// one after another, then the storages' bytes) load as well, and whole
// modules (torch.save of an nn.Module, torch.jit.save of a scripted
// one) as their state dicts: the tensors in the objects' attributes,
// named as state_dict names them.
package torch

import (
	"archive/zip"
	"bytes"
	"errors"
	"fmt"
	"io"
	"math"
	"math/bits"
	"slices"
	"strconv"
	"strings"

	"github.com/kvikgo/kvik/internal/formatkit/pickle"
	"github.com/kvikgo/kvik/internal/formatkit/zipkit"
)

// Errors returned (wrapped, with context) by this package; test with
// errors.Is.
var (
	// ErrInvalidCheckpoint reports a file that is not a well-formed
	// torch.save archive: a broken ZIP, no data.pkl or more than one, a
	// pickle that does not decode, a storage or tensor that does not fit
	// its member.
	ErrInvalidCheckpoint = errors.New("torch: invalid checkpoint")
	// ErrLegacyFormat reports what this package does not read of a
	// checkpoint in the format of PyTorch before 1.6 (or
	// torch.save(..., _use_new_zipfile_serialization=False)), which it
	// reads otherwise: storages viewed in part (PyTorch before 1.0),
	// big-endian ones. Load such a file and save it again with a newer
	// PyTorch.
	ErrLegacyFormat = errors.New("torch: legacy (pre-1.6) torch.save format")
	// ErrUnsupported reports a checkpoint this package does not read: its
	// storages big-endian or compressed.
	ErrUnsupported = errors.New("torch: unsupported checkpoint")
	// ErrNotFound reports a tensor name the checkpoint lacks.
	ErrNotFound = errors.New("torch: tensor not found")
	// ErrInvalidArgument reports a bad option given to Load.
	ErrInvalidArgument = errors.New("torch: invalid argument")
)

// maxPickle bounds data.pkl, the checkpoint's description: a few MB for
// the largest models. Decoded, a pickle takes a few tens of times its
// bytes at the most.
const maxPickle = 64 << 20

// maxDepth bounds how deep the dicts, lists and tuples holding tensors
// nest.
const maxDepth = 64

// TensorInfo describes one tensor of a checkpoint.
type TensorInfo struct {
	// Name is where the tensor is in the pickled object: the keys and
	// indices that lead to it joined by ".", as a state dict names its
	// tensors ("" for a file holding one tensor alone).
	Name  string
	Dtype Dtype
	// Shape and Stride are in elements, as torch.Tensor.stride gives
	// them.
	Shape, Stride []int64
	// Storage is the key of the tensor's storage (the archive member
	// data/<Storage>); tensors that share one (tied weights, views) have
	// the same key. StorageOffset is the tensor's first element in it.
	Storage       string
	StorageOffset int64
	// Offset and Size are the bytes of the file that the tensor spans,
	// from its first element to its last: its data, C-contiguous, when
	// Contiguous reports so; else a strided view of them.
	Offset, Size int64
}

// NumElements returns the product of Shape.
func (t *TensorInfo) NumElements() int64 {
	n := int64(1)
	for _, d := range t.Shape {
		n *= d
	}
	return n
}

// Contiguous reports whether the tensor's elements lie in C order with
// no gaps: its bytes at Offset are its data.
func (t *TensorInfo) Contiguous() bool {
	want := int64(1)
	for i := len(t.Shape) - 1; i >= 0; i-- {
		if t.Shape[i] != 1 && t.Stride[i] != want {
			return t.NumElements() == 0
		}
		want *= t.Shape[i]
	}
	return true
}

// Header is what a checkpoint holds, without its tensors' bytes.
type Header struct {
	// Tensors are in file order (by Offset, then Name).
	Tensors []TensorInfo
	// Record is the name of the archive's folder ("model" for model.pt
	// as torch.save names it); "" in the legacy format.
	Record string
	// Legacy reports a file in the format of PyTorch before 1.6 (or
	// torch.save(..., _use_new_zipfile_serialization=False)): pickles
	// one after another, each storage's bytes after them, no archive.
	Legacy bool
	// Skipped names the tensors this package does not load (quantized,
	// sparse, nested, of a tensor subclass), each with the function that
	// would rebuild it.
	Skipped []string
}

// storage is a persistent ID's storage: its member, its dtype ("" for
// an UntypedStorage, whose count is of bytes) and its count of
// elements; class names a typed storage of a dtype this package does
// not know (a quantized one).
type storage struct {
	key   string
	dtype Dtype
	n     int64
	class string
}

// legacyMagic starts a checkpoint in the legacy format: a pickle of
// PyTorch's magic number.
var legacyMagic = []byte{0x80, 0x02, 0x8a, 0x0a, 0x6c, 0xfc, 0x9c, 0x46, 0xf9, 0x20, 0x6a, 0xa8, 0x50, 0x19}

// DecodeHeader reads the directory and data.pkl of the torch.save
// archive of size bytes that r reads, and checks every tensor against
// its storage's member, without reading a tensor; of a file in the
// legacy format, its pickles and each storage's count of elements.
func DecodeHeader(r io.ReaderAt, size int64) (*Header, error) {
	if size < 0 {
		return nil, fmt.Errorf("%w: size %d", ErrInvalidCheckpoint, size)
	}
	zr, _, err := zipkit.Open(r, size, ErrInvalidCheckpoint)
	if err != nil {
		head := make([]byte, min(size, int64(len(legacyMagic))))
		if _, rerr := r.ReadAt(head, 0); rerr == nil && bytes.Equal(head, legacyMagic) {
			return decodeLegacy(r, size)
		}
		return nil, err
	}
	a, err := openArchive(zr)
	if err != nil {
		return nil, err
	}
	if err := a.checkByteOrder(); err != nil {
		return nil, err
	}
	pkl, err := a.read(a.pkl, maxPickle)
	if err != nil {
		return nil, err
	}
	// A pickle may refer to one object many times over (a tuple of a
	// tuple of ... each twice, from a few bytes of memo references): the
	// walk visits no more objects than data.pkl has bytes.
	w := &walker{seen: map[any]bool{}, budget: len(pkl) + 64}
	obj, err := pickle.Decode(pkl, persistentStorage)
	if err != nil {
		return nil, fmt.Errorf("%w: %s: %w", ErrInvalidCheckpoint, a.pkl.Name, err)
	}
	if err := w.walk("", obj, 0); err != nil {
		return nil, err
	}
	return w.header(&Header{Record: a.record}, func(t *found) error { return a.place(t, size) })
}

// header completes h with the tensors w found, each placed by place (its
// Offset and Size set), in file order, and what w skipped.
func (w *walker) header(h *Header, place func(t *found) error) (*Header, error) {
	h.Skipped = w.skipped
	for _, t := range w.tensors {
		if err := place(&t); err != nil {
			return nil, fmt.Errorf("tensor %q: %w", t.t.Name, err)
		}
		h.Tensors = append(h.Tensors, t.t)
	}
	slices.SortStableFunc(h.Tensors, func(x, y TensorInfo) int {
		if x.Offset != y.Offset {
			return int(max(-1, min(1, x.Offset-y.Offset)))
		}
		return strings.Compare(x.Name, y.Name)
	})
	return h, nil
}

// archive is a torch.save archive's directory: its record (the folder
// every member is in), data.pkl, and the members by name.
type archive struct {
	record string
	pkl    *zip.File
	files  map[string]*zip.File
}

func openArchive(zr *zip.Reader) (*archive, error) {
	a := &archive{files: make(map[string]*zip.File, len(zr.File))}
	for _, f := range zr.File {
		if _, dup := a.files[f.Name]; dup {
			return nil, fmt.Errorf("%w: two members named %q", ErrInvalidCheckpoint, f.Name)
		}
		a.files[f.Name] = f
		if rec, ok := strings.CutSuffix(f.Name, "/data.pkl"); ok && !strings.Contains(rec, "/") {
			if a.pkl != nil {
				return nil, fmt.Errorf("%w: two data.pkl (%q, %q)", ErrInvalidCheckpoint, a.pkl.Name, f.Name)
			}
			a.record, a.pkl = rec, f
		}
	}
	if a.pkl == nil {
		return nil, fmt.Errorf("%w: no data.pkl in a folder of its own: not a torch.save file", ErrInvalidCheckpoint)
	}
	return a, nil
}

// checkByteOrder refuses storages written big-endian (byteorder, which
// PyTorch 2 writes; older versions wrote none, and were little-endian
// where they ran).
func (a *archive) checkByteOrder() error {
	f := a.files[a.record+"/byteorder"]
	if f == nil {
		return nil
	}
	b, err := a.read(f, 16)
	if err != nil {
		return err
	}
	switch string(b) {
	case "little":
		return nil
	case "big":
		return fmt.Errorf("%w: big-endian storages", ErrUnsupported)
	}
	return fmt.Errorf("%w: byteorder %q", ErrInvalidCheckpoint, b)
}

// read reads member f whole, at most limit bytes of it.
func (a *archive) read(f *zip.File, limit int64) ([]byte, error) {
	if f.UncompressedSize64 > uint64(limit) {
		return nil, fmt.Errorf("%w: %s of %d bytes (at most %d)", ErrInvalidCheckpoint, f.Name, f.UncompressedSize64, limit)
	}
	rc, err := f.Open()
	if err != nil {
		return nil, zipkit.Err(err, ErrInvalidCheckpoint)
	}
	defer rc.Close()
	b, err := io.ReadAll(io.LimitReader(rc, limit+1))
	if err == nil && int64(len(b)) > limit {
		err = fmt.Errorf("%w: %s longer than its %d bytes", ErrInvalidCheckpoint, f.Name, f.UncompressedSize64)
	}
	if err != nil {
		return nil, zipkit.Err(err, ErrInvalidCheckpoint)
	}
	return b, nil
}

// place finds t's storage member in the archive of size bytes, checks
// that t lies in it and sets t's Offset and Size.
func (a *archive) place(t *found, size int64) error {
	name := a.record + "/data/" + t.st.key
	f := a.files[name]
	if f == nil {
		return fmt.Errorf("%w: no member %s for its storage", ErrInvalidCheckpoint, name)
	}
	if f.Method != zip.Store {
		return fmt.Errorf("%w: %s compressed (method %d); torch.save stores storages", ErrUnsupported, name, f.Method)
	}
	if f.CompressedSize64 != f.UncompressedSize64 {
		return fmt.Errorf("%w: %s stored, of %d bytes compressed and %d not", ErrInvalidCheckpoint, name, f.CompressedSize64, f.UncompressedSize64)
	}
	off, err := zipkit.DataAt(f, size, ErrInvalidCheckpoint)
	if err != nil {
		return err
	}
	return placeIn(t, off, int64(f.UncompressedSize64))
}

// placeIn checks that t's storage is the stored bytes [off, off+n) of
// the file and that t lies in it, and sets t's Offset and Size.
func placeIn(t *found, off, n int64) error {
	es := int64(t.t.Dtype.Size())
	stBytes := t.st.n
	if t.st.dtype != "" {
		if t.st.n > math.MaxInt64/es {
			return fmt.Errorf("%w: a storage of %d elements", ErrInvalidCheckpoint, t.st.n)
		}
		stBytes = t.st.n * es
	}
	if stBytes != n {
		return fmt.Errorf("%w: storage %s of %d bytes, its data %d", ErrInvalidCheckpoint, t.st.key, stBytes, n)
	}
	first, span, err := extent(t.t.Shape, t.t.Stride, t.t.StorageOffset)
	if err != nil {
		return err
	}
	if span > 0 && (first > math.MaxInt64/es || span > math.MaxInt64/es-first || (first+span)*es > stBytes) {
		return fmt.Errorf("%w: elements %d to %d of a storage of %d bytes of %s", ErrInvalidCheckpoint, first, first+span, stBytes, t.t.Dtype)
	}
	t.t.Offset, t.t.Size = off+first*es, span*es
	if span == 0 {
		t.t.Offset = off
	}
	return nil
}

// extent returns the first element a tensor of shape and stride at
// offset reads and how many elements from there to its last (0 for none),
// checking for overflow and negative values.
func extent(shape, stride []int64, offset int64) (first, span int64, err error) {
	if len(shape) != len(stride) || offset < 0 {
		return 0, 0, fmt.Errorf("%w: shape %v, stride %v, offset %d", ErrInvalidCheckpoint, shape, stride, offset)
	}
	last := uint64(0)
	for i, d := range shape {
		if d < 0 || stride[i] < 0 {
			return 0, 0, fmt.Errorf("%w: shape %v, stride %v", ErrInvalidCheckpoint, shape, stride)
		}
		if d == 0 {
			return offset, 0, nil
		}
		hi, lo := bits.Mul64(uint64(d-1), uint64(stride[i]))
		var carry uint64
		last, carry = bits.Add64(last, lo, 0)
		if hi != 0 || carry != 0 || last > math.MaxInt64/2 {
			return 0, 0, fmt.Errorf("%w: shape %v, stride %v overflow", ErrInvalidCheckpoint, shape, stride)
		}
	}
	return offset, int64(last) + 1, nil
}

// persistentStorage makes a storage of a persistent ID, as torch.save
// writes them: ("storage", storage type, key, location, count), the type
// a typed storage's class (torch.FloatStorage: a count of elements) or
// torch.storage.UntypedStorage (of bytes); the legacy format adds a
// view's description, None (views of part of a storage, which PyTorch
// before 1.0 wrote, are ErrLegacyFormat).
func persistentStorage(pid any) (any, error) {
	t, ok := pid.(pickle.Tuple)
	if ok && len(t) == 6 && t[5] != nil {
		return nil, fmt.Errorf("%w: %w: a storage viewed in part (%.100v)", ErrUnsupported, ErrLegacyFormat, t[5])
	}
	if !ok || len(t) != 5 && len(t) != 6 || t[0] != "storage" {
		return nil, fmt.Errorf("%w: persistent ID %.100v", ErrInvalidCheckpoint, pid)
	}
	cls, ok1 := t[1].(pickle.Global)
	key, ok2 := t[2].(string)
	n, ok3 := t[4].(int64)
	if !ok1 || !ok2 || !ok3 || n < 0 || !validKey(key) {
		return nil, fmt.Errorf("%w: storage %.100v", ErrInvalidCheckpoint, pid)
	}
	st := &storage{key: key, n: n}
	if cls != (pickle.Global{Module: "torch.storage", Name: "UntypedStorage"}) && cls != (pickle.Global{Module: "torch", Name: "UntypedStorage"}) {
		if st.dtype = storageDtypes[cls.Name]; cls.Module != "torch" || st.dtype == "" {
			st.class = cls.String()
		}
	}
	return st, nil
}

// validKey reports whether a storage key names a member plainly (torch
// numbers them): 1 to 64 letters, digits, '_' and '-'.
func validKey(k string) bool {
	if k == "" || len(k) > 64 {
		return false
	}
	for _, c := range []byte(k) {
		if !('0' <= c && c <= '9' || 'a' <= c && c <= 'z' || 'A' <= c && c <= 'Z' || c == '_' || c == '-') {
			return false
		}
	}
	return true
}

// found is a tensor the walk found, and its storage.
type found struct {
	t  TensorInfo
	st *storage
}

// walker collects the tensors of a decoded pickle.
type walker struct {
	tensors []found
	skipped []string
	seen    map[any]bool // containers already walked
	budget  int          // objects left to visit
}

// rebuilders are the functions of torch._utils that make a tensor of a
// storage: the plain tensor (v2; v3 with the dtype last, for dtypes with
// no typed storage), and a Parameter around one.
const (
	rebuildV2        = "_rebuild_tensor_v2"
	rebuildV3        = "_rebuild_tensor_v3"
	rebuildParameter = "_rebuild_parameter"
	rebuildParamSt   = "_rebuild_parameter_with_state"
)

// walk finds the tensors in v, named name, depth containers deep.
func (w *walker) walk(name string, v any, depth int) error {
	if depth > maxDepth {
		return fmt.Errorf("%w: %q nested deeper than %d", ErrInvalidCheckpoint, name, maxDepth)
	}
	if w.budget--; w.budget < 0 {
		return fmt.Errorf("%w: more objects than data.pkl has bytes (a pickle that refers to one object over and over)", ErrInvalidCheckpoint)
	}
	switch v := v.(type) {
	case *pickle.Dict:
		if w.seen[v] {
			return nil
		}
		w.seen[v] = true
		return w.items(name, v.Keys, v.Values, depth)
	case *pickle.List:
		if w.seen[v] {
			return nil
		}
		w.seen[v] = true
		return w.list(name, v.Items, depth)
	case pickle.Tuple:
		return w.list(name, v, depth)
	case *pickle.Object:
		return w.object(name, v, depth)
	}
	return nil
}

func (w *walker) object(name string, o *pickle.Object, depth int) error {
	g, _ := o.Callable.(pickle.Global)
	if g.Module == "torch._utils" {
		switch g.Name {
		case rebuildV2, rebuildV3:
			return w.tensor(name, o)
		case rebuildParameter, rebuildParamSt:
			if len(o.Args) == 0 {
				return fmt.Errorf("%w: %q: %s with no tensor", ErrInvalidCheckpoint, name, g)
			}
			return w.walk(name, o.Args[0], depth)
		}
		if strings.HasPrefix(g.Name, "_rebuild_") {
			w.skipped = append(w.skipped, fmt.Sprintf("%s (%s)", name, g))
			return nil
		}
	}
	if w.seen[o] {
		return nil
	}
	w.seen[o] = true
	// A dict's or a list's subclass (collections.OrderedDict, a state
	// dict) holds what SETITEMS and APPENDS gave it; any object, its
	// attributes in its state.
	if err := w.items(name, o.Keys, o.Values, depth); err != nil {
		return err
	}
	if err := w.list(name, o.Items, depth); err != nil {
		return err
	}
	return w.state(name, o.State, depth)
}

// moduleContainers are the attributes of a torch.nn.Module that hold its
// submodules, parameters and buffers by name: they add no name of their
// own, so that the tensors of a whole module torch.save pickled are
// named as its state_dict names them ("0.weight", not
// "_modules.0._parameters.weight").
var moduleContainers = map[string]bool{"_modules": true, "_parameters": true, "_buffers": true}

// state walks an object's state (BUILD's argument): a dict of its
// attributes, each named by its key (a TorchScript module's parameters
// and submodules, a pickled module's containers), or a tuple of a
// dict and slots.
func (w *walker) state(name string, s any, depth int) error {
	switch s := s.(type) {
	case *pickle.Dict:
		if w.seen[s] {
			return nil
		}
		w.seen[s] = true
		for i, k := range s.Keys {
			key, ok := keyString(k)
			if !ok {
				continue
			}
			n := join(name, key)
			if moduleContainers[key] {
				n = name
			}
			if err := w.walk(n, s.Values[i], depth+1); err != nil {
				return err
			}
		}
		return nil
	case pickle.Tuple:
		for _, x := range s {
			if err := w.state(name, x, depth+1); err != nil {
				return err
			}
		}
		return nil
	}
	return w.walk(name, s, depth+1)
}

func (w *walker) items(name string, keys, values []any, depth int) error {
	for i, k := range keys {
		s, ok := keyString(k)
		if !ok {
			continue
		}
		if err := w.walk(join(name, s), values[i], depth+1); err != nil {
			return err
		}
	}
	return nil
}

func (w *walker) list(name string, items []any, depth int) error {
	for i, v := range items {
		if err := w.walk(join(name, strconv.Itoa(i)), v, depth+1); err != nil {
			return err
		}
	}
	return nil
}

func join(prefix, key string) string {
	if prefix == "" {
		return key
	}
	return prefix + "." + key
}

// keyString is a dict key as a name: strings as they are, integers and
// booleans as Python prints them; other keys' values are not walked.
func keyString(k any) (string, bool) {
	switch k := k.(type) {
	case string:
		return k, true
	case int64:
		return strconv.FormatInt(k, 10), true
	case bool:
		return map[bool]string{true: "True", false: "False"}[k], true
	}
	return "", false
}

// tensor records the tensor that o, a call of _rebuild_tensor_v2 or v3,
// makes: (storage, storage offset, size, stride, requires_grad,
// backward hooks[, metadata]) for v2, the dtype after the hooks for v3.
func (w *walker) tensor(name string, o *pickle.Object) error {
	g := o.Callable.(pickle.Global)
	if len(o.Args) < 4 {
		return fmt.Errorf("%w: %q: %s with %d arguments", ErrInvalidCheckpoint, name, g, len(o.Args))
	}
	st, ok1 := o.Args[0].(*storage)
	off, ok2 := o.Args[1].(int64)
	shape, ok3 := ints(o.Args[2])
	stride, ok4 := ints(o.Args[3])
	if !ok1 || !ok2 || !ok3 || !ok4 {
		return fmt.Errorf("%w: %q: %s of %.200v", ErrInvalidCheckpoint, name, g, o.Args)
	}
	d := st.dtype
	switch {
	case st.class != "":
		return fmt.Errorf("%w: %q: a storage of %s", ErrUnsupportedDtype, name, st.class)
	case g.Name == rebuildV3:
		dg, ok := pickle.Global{}, len(o.Args) >= 7
		if ok {
			dg, ok = o.Args[6].(pickle.Global)
		}
		if !ok || dg.Module != "torch" || st.dtype != "" {
			return fmt.Errorf("%w: %q: %s without a dtype, or of a typed storage", ErrInvalidCheckpoint, name, g)
		}
		if d = Dtype(dg.Name); d.Size() == 0 {
			return fmt.Errorf("%w: %q: torch.%s", ErrUnsupportedDtype, name, dg.Name)
		}
	case d == "":
		return fmt.Errorf("%w: %q: %s of an untyped storage", ErrInvalidCheckpoint, name, g)
	}
	w.tensors = append(w.tensors, found{t: TensorInfo{Name: name, Dtype: d, Shape: shape, Stride: stride, Storage: st.key, StorageOffset: off}, st: st})
	return nil
}

// ints is a tuple of integers (a shape, a stride), or a torch.Size of
// one.
func ints(v any) ([]int64, bool) {
	if o, ok := v.(*pickle.Object); ok && o.Callable == (pickle.Global{Module: "torch", Name: "Size"}) && len(o.Args) == 1 {
		v = o.Args[0]
	}
	t, ok := v.(pickle.Tuple)
	if !ok || len(t) > 64 {
		return nil, false
	}
	out := make([]int64, len(t))
	for i, x := range t {
		if out[i], ok = x.(int64); !ok {
			return nil, false
		}
	}
	return out, true
}
