package zarr

import (
	"bytes"
	"encoding/json"
	"fmt"
	"io"
	"maps"
	"math"
	"slices"
	"unicode/utf16"
	"unicode/utf8"

	jsonv2 "github.com/go-json-experiment/json"
	"github.com/go-json-experiment/json/jsontext"
	jsonv1 "github.com/go-json-experiment/json/v1"

	"github.com/kvikgo/kvik/internal/formatkit/npydescr"
)

// Codec names a codec and its configuration: a v3 codec ({"name",
// "configuration"}) or a v2 compressor or filter ({"id", ...}, with Name
// holding the id).
type Codec struct {
	Name          string
	Configuration map[string]any
}

// Metadata describes an array: what Create writes and Open reads.
type Metadata struct {
	// ZarrFormat is 2 or 3; Create treats 0 as 3.
	ZarrFormat int
	Shape      []int
	ChunkShape []int
	DataType   DataType
	// FillValue is a JSON-able value: a number, a bool, or "NaN",
	// "Infinity", "-Infinity"; for a complex type [re, im] of those, or
	// a complex128 or complex64; for a DateTime or TimeDelta an integer
	// or "NaT"; for Bytes or Raw a []byte (or its base64, as Open sets
	// it); for Unicode and VarString a string, for VarBytes a []byte (or
	// its base64); nil means zero (the empty string). Open sets it from
	// the metadata as read.
	FillValue any
	// Codecs is the v3 codec chain; empty means [bytes (little)], or
	// [vlen-utf8] ([vlen-bytes]) for VarString (VarBytes) elements.
	Codecs []Codec
	// ChunkKeyEncoding is "default" (c/0/1) or "v2" (0.1) for v3 arrays;
	// Separator is its separator ("/" and "." by default). For v2 arrays
	// Separator is the dimension_separator.
	ChunkKeyEncoding string
	Separator        string
	// Order ('C' or 'F'), Compressor and Filters are for v2 arrays. An
	// array of VarString or VarBytes elements has its object codec
	// (vlen-utf8, vlen-bytes) first among the filters; Create puts it
	// there where Filters lack it.
	Order      byte
	Compressor *Codec
	Filters    []Codec
	// BigEndian stores v2 elements big-endian (">" type strings).
	BigEndian      bool
	Attributes     map[string]any
	DimensionNames []string

	fill []byte // one little-endian element
}

// maxElements bounds the product of a shape so that sizes never overflow.
const maxElements = 1 << 56

func checkShape(shape, chunks []int) error {
	if len(chunks) != len(shape) {
		return fmt.Errorf("%w: chunk shape %v for array shape %v", ErrInvalidMetadata, chunks, shape)
	}
	n, c := 1, 1
	for i := range shape {
		if shape[i] < 0 || chunks[i] <= 0 || shape[i] > maxElements || chunks[i] > maxElements {
			return fmt.Errorf("%w: shape %v, chunk shape %v", ErrInvalidMetadata, shape, chunks)
		}
		if shape[i] > 0 {
			n *= shape[i]
		}
		c *= chunks[i]
		if n > maxElements || c > 1<<40 {
			return fmt.Errorf("%w: shape %v or chunk shape %v too large", ErrInvalidMetadata, shape, chunks)
		}
	}
	return nil
}

type v2Meta struct {
	ZarrFormat         int               `json:"zarr_format"`
	Shape              []int             `json:"shape"`
	Chunks             []int             `json:"chunks"`
	DType              json.RawMessage   `json:"dtype"`
	Compressor         json.RawMessage   `json:"compressor"`
	FillValue          json.RawMessage   `json:"fill_value"`
	Order              string            `json:"order"`
	Filters            []json.RawMessage `json:"filters"`
	DimensionSeparator string            `json:"dimension_separator,omitempty"`
}

type v3Named struct {
	Name          string          `json:"name"`
	Configuration json.RawMessage `json:"configuration,omitempty"`
}

type v3Meta struct {
	ZarrFormat          int               `json:"zarr_format"`
	NodeType            string            `json:"node_type"`
	Shape               []int             `json:"shape"`
	DataType            json.RawMessage   `json:"data_type"`
	ChunkGrid           v3Named           `json:"chunk_grid"`
	ChunkKeyEncoding    v3Named           `json:"chunk_key_encoding"`
	FillValue           json.RawMessage   `json:"fill_value"`
	Codecs              []json.RawMessage `json:"codecs"`
	Attributes          map[string]any    `json:"attributes,omitempty"`
	DimensionNames      []*string         `json:"dimension_names,omitempty"`
	StorageTransformers []json.RawMessage `json:"storage_transformers,omitempty"`
}

func decodeStrict(b []byte, v any) error {
	d := json.NewDecoder(bytes.NewReader(b))
	d.UseNumber()
	return d.Decode(v)
}

// parseCodecV3 reads {"name": ..., "configuration": {...}} or a bare
// name string.
func parseCodecV3(raw json.RawMessage) (Codec, error) {
	var name string
	if json.Unmarshal(raw, &name) == nil {
		return Codec{Name: name}, nil
	}
	var n v3Named
	if err := json.Unmarshal(raw, &n); err != nil || n.Name == "" {
		return Codec{}, fmt.Errorf("%w: codec %.60s", ErrInvalidMetadata, raw)
	}
	c := Codec{Name: n.Name}
	if len(n.Configuration) > 0 && string(n.Configuration) != "null" {
		if err := decodeStrict(n.Configuration, &c.Configuration); err != nil {
			return Codec{}, fmt.Errorf("%w: codec %q configuration: %v", ErrInvalidMetadata, n.Name, err)
		}
	}
	return c, nil
}

// parseCodecV2 reads {"id": ..., ...}.
func parseCodecV2(raw json.RawMessage) (*Codec, error) {
	if len(raw) == 0 || string(raw) == "null" {
		return nil, nil
	}
	var m map[string]any
	if err := decodeStrict(raw, &m); err != nil {
		return nil, fmt.Errorf("%w: codec %.60s: %v", ErrInvalidMetadata, raw, err)
	}
	id, _ := m["id"].(string)
	if id == "" {
		return nil, fmt.Errorf("%w: codec without id: %.60s", ErrInvalidMetadata, raw)
	}
	delete(m, "id")
	return &Codec{Name: id, Configuration: m}, nil
}

// ParseMetadataV2 parses a .zarray document. storeSep is the separator to
// use when the document names none.
func ParseMetadataV2(b []byte, storeSep string) (*Metadata, error) {
	var v v2Meta
	if err := decodeStrict(b, &v); err != nil {
		return nil, fmt.Errorf("%w: .zarray: %v", ErrInvalidMetadata, err)
	}
	if v.ZarrFormat != 2 {
		return nil, fmt.Errorf("%w: zarr_format %d in .zarray", ErrInvalidMetadata, v.ZarrFormat)
	}
	var dts string
	var dt DataType
	var big bool
	var err error
	switch {
	case json.Unmarshal(v.DType, &dts) != nil:
		if dt, err = parseV2Struct(v.DType); err != nil {
			return nil, err
		}
	case dts != "|O": // an object dtype's kind is its object codec's (below)
		if dt, big, err = parseV2Type(dts); err != nil {
			return nil, err
		}
	}
	if err := checkShape(v.Shape, v.Chunks); err != nil {
		return nil, err
	}
	m := &Metadata{ZarrFormat: 2, Shape: v.Shape, ChunkShape: v.Chunks, DataType: dt, BigEndian: big, Separator: storeSep}
	switch v.Order {
	case "C", "F":
		m.Order = v.Order[0]
	default:
		return nil, fmt.Errorf("%w: order %q", ErrInvalidMetadata, v.Order)
	}
	switch v.DimensionSeparator {
	case "":
	case ".", "/":
		m.Separator = v.DimensionSeparator
	default:
		return nil, fmt.Errorf("%w: dimension_separator %q", ErrInvalidMetadata, v.DimensionSeparator)
	}
	if m.Separator == "" {
		m.Separator = "."
	}
	if m.Compressor, err = parseCodecV2(v.Compressor); err != nil {
		return nil, err
	}
	for _, f := range v.Filters {
		c, err := parseCodecV2(f)
		if err != nil {
			return nil, err
		}
		if c != nil {
			m.Filters = append(m.Filters, *c)
		}
	}
	if dts == "|O" {
		if dt, err = objectType(m.Filters); err != nil {
			return nil, err
		}
		m.DataType = dt
	}
	if m.fill, err = fillBytes(dt, v.FillValue, true); err != nil {
		return nil, err
	}
	m.FillValue = fillJSON(dt, m.fill)
	return m, nil
}

// objectType returns the kind of the elements of a v2 array of NumPy's
// object dtype ("|O"): what its object codec, the first filter, makes of
// them. Only vlen-utf8 and vlen-bytes are read: pickle (which runs code
// of the store's choosing), json2, msgpack2, vlen-array and others fail
// with ErrUnsupportedCodec.
func objectType(filters []Codec) (DataType, error) {
	if len(filters) == 0 {
		return DataType{}, fmt.Errorf("%w: dtype |O without an object codec", ErrInvalidMetadata)
	}
	k, ok := vlenKinds[filters[0].Name]
	if !ok {
		return DataType{}, fmt.Errorf("%w: object codec %q (vlen-utf8 and vlen-bytes are read)", ErrUnsupportedCodec, filters[0].Name)
	}
	return DataType{Kind: k}, nil
}

// The fields of v3 documents this package knows, by node type.
var (
	v3ArrayFields = []string{"zarr_format", "node_type", "shape", "data_type", "chunk_grid", "chunk_key_encoding",
		"fill_value", "codecs", "attributes", "dimension_names", "storage_transformers"}
	v3GroupFields = []string{"zarr_format", "node_type", "attributes", "consolidated_metadata"}
)

// checkExtensions refuses, with ErrUnsupportedExtension, a field of the
// v3 document doc outside known that must be understood: every one but
// an object with "must_understand": false (Zarr v3, extension fields).
func checkExtensions(key string, doc map[string]json.RawMessage, known []string) error {
	for _, k := range slices.Sorted(maps.Keys(doc)) {
		if slices.Contains(known, k) {
			continue
		}
		var ext struct {
			MustUnderstand *bool `json:"must_understand"`
		}
		if json.Unmarshal(doc[k], &ext) == nil && ext.MustUnderstand != nil && !*ext.MustUnderstand {
			continue
		}
		return fmt.Errorf("%w: %s: field %.60q, which must be understood", ErrUnsupportedExtension, key, k)
	}
	return nil
}

// ParseMetadataV3 parses a zarr.json array document. An unknown field
// that must be understood fails with ErrUnsupportedExtension.
func ParseMetadataV3(b []byte) (*Metadata, error) {
	var v v3Meta
	if err := decodeStrict(b, &v); err != nil {
		return nil, fmt.Errorf("%w: zarr.json: %v", ErrInvalidMetadata, err)
	}
	if v.ZarrFormat != 3 || v.NodeType != "array" {
		return nil, fmt.Errorf("%w: zarr_format %d, node_type %q (want an array of format 3)", ErrInvalidMetadata, v.ZarrFormat, v.NodeType)
	}
	var doc map[string]json.RawMessage
	if err := json.Unmarshal(b, &doc); err != nil {
		return nil, fmt.Errorf("%w: zarr.json: %v", ErrInvalidMetadata, err)
	}
	if err := checkExtensions("zarr.json", doc, v3ArrayFields); err != nil {
		return nil, err
	}
	dt, err := parseV3Type(v.DataType)
	if err != nil {
		return nil, err
	}
	if v.ChunkGrid.Name != "regular" {
		return nil, fmt.Errorf("%w: chunk grid %q (only \"regular\")", ErrInvalidMetadata, v.ChunkGrid.Name)
	}
	var grid struct {
		ChunkShape []int `json:"chunk_shape"`
	}
	if err := json.Unmarshal(v.ChunkGrid.Configuration, &grid); err != nil {
		return nil, fmt.Errorf("%w: chunk grid: %v", ErrInvalidMetadata, err)
	}
	if err := checkShape(v.Shape, grid.ChunkShape); err != nil {
		return nil, err
	}
	if len(v.StorageTransformers) > 0 {
		return nil, fmt.Errorf("%w: storage transformers", ErrUnsupportedCodec)
	}
	m := &Metadata{ZarrFormat: 3, Shape: v.Shape, ChunkShape: grid.ChunkShape, DataType: dt, Attributes: v.Attributes}
	var kc struct {
		Separator string `json:"separator"`
	}
	if len(v.ChunkKeyEncoding.Configuration) > 0 {
		if err := json.Unmarshal(v.ChunkKeyEncoding.Configuration, &kc); err != nil {
			return nil, fmt.Errorf("%w: chunk key encoding: %v", ErrInvalidMetadata, err)
		}
	}
	switch v.ChunkKeyEncoding.Name {
	case "default":
		m.Separator = "/"
	case "v2":
		m.Separator = "."
	default:
		return nil, fmt.Errorf("%w: chunk key encoding %q", ErrInvalidMetadata, v.ChunkKeyEncoding.Name)
	}
	m.ChunkKeyEncoding = v.ChunkKeyEncoding.Name
	switch kc.Separator {
	case "":
	case ".", "/":
		m.Separator = kc.Separator
	default:
		return nil, fmt.Errorf("%w: chunk key separator %q", ErrInvalidMetadata, kc.Separator)
	}
	if len(v.Codecs) == 0 {
		return nil, fmt.Errorf("%w: no codecs", ErrInvalidMetadata)
	}
	for _, raw := range v.Codecs {
		c, err := parseCodecV3(raw)
		if err != nil {
			return nil, err
		}
		m.Codecs = append(m.Codecs, c)
	}
	for _, n := range v.DimensionNames {
		s := ""
		if n != nil {
			s = *n
		}
		m.DimensionNames = append(m.DimensionNames, s)
	}
	if err := checkDimensionNames(v.DimensionNames != nil, len(v.DimensionNames), len(v.Shape)); err != nil {
		return nil, err
	}
	if m.fill, err = fillBytes(dt, v.FillValue, false); err != nil {
		return nil, err
	}
	m.FillValue = fillJSON(dt, m.fill)
	return m, nil
}

// checkDimensionNames refuses n dimension names, when given, for an
// array of another rank.
func checkDimensionNames(given bool, n, rank int) error {
	if given && n != rank {
		return fmt.Errorf("%w: %d dimension names for a rank-%d array", ErrInvalidMetadata, n, rank)
	}
	return nil
}

// jsonFill converts a user fill value to JSON, spelling non-finite
// floats as Zarr does.
func jsonFill(v any) (json.RawMessage, error) {
	if c, ok := v.(complex64); ok {
		v = complex128(c)
	}
	if c, ok := v.(complex128); ok {
		re, _ := jsonFill(real(c))
		im, _ := jsonFill(imag(c))
		return json.RawMessage("[" + string(re) + "," + string(im) + "]"), nil
	}
	if f, ok := v.(float64); ok {
		v = fillJSON(DataType{Kind: Float, Size: 8}, func() []byte { b := make([]byte, 8); putFloat(b, f); return b }())
	}
	if f, ok := v.(float32); ok {
		return jsonFill(float64(f))
	}
	if v == nil {
		v = 0
	}
	b, err := json.Marshal(v)
	if err != nil {
		return nil, fmt.Errorf("%w: fill value %v: %v", ErrInvalidMetadata, v, err)
	}
	return b, nil
}

// v2DType is m's data type as a v2 document's dtype: NumPy's, ">"
// where m stores big-endian elements that have a byte order (a
// structured type's descr list, as NumPy writes it).
func (m *Metadata) v2DType() string {
	dt := m.DataType.NumPy()
	if m.BigEndian && m.DataType.swapUnit() > 1 {
		dt = ">" + dt[1:]
	}
	return dt
}

// marshal renders m as the metadata documents of its format: key ->
// document.
func (m *Metadata) marshal() (map[string][]byte, error) {
	// A 0-d array's shapes are empty lists, never null.
	shape, chunks := m.Shape, m.ChunkShape
	if shape == nil {
		shape = []int{}
	}
	if chunks == nil {
		chunks = []int{}
	}
	fill := fillJSON(m.DataType, m.fill)
	if f, ok := fill.(float64); ok && math.Trunc(f) == f && math.Abs(f) < 1e15 {
		fill = json.Number(fmt.Sprintf("%.1f", f))
	}
	if m.ZarrFormat == 2 {
		var dt any = m.v2DType()
		if m.DataType.Struct != "" {
			st, err := npydescr.ParseRepr(m.DataType.Struct) // valid: DataType.check
			if err != nil {
				return nil, fmt.Errorf("%w: %v", ErrUnsupportedDataType, err)
			}
			dt = st.List()
		}
		filters := []any(nil)
		for _, f := range m.Filters {
			filters = append(filters, v2Codec(f))
		}
		var comp any
		if m.Compressor != nil {
			comp = v2Codec(*m.Compressor)
		}
		doc := map[string]any{
			"zarr_format": 2, "shape": shape, "chunks": chunks, "dtype": dt,
			"compressor": comp, "fill_value": fill, "order": string(m.Order), "filters": filters,
			"dimension_separator": m.Separator,
		}
		attrs := m.Attributes
		if attrs == nil {
			attrs = map[string]any{}
		}
		a, err := marshalJSON(doc, "    ")
		if err != nil {
			return nil, err
		}
		b, err := marshalJSON(attrs, "    ")
		if err != nil {
			return nil, err
		}
		return map[string][]byte{".zarray": a, ".zattrs": b}, nil
	}
	codecs := make([]any, len(m.Codecs))
	for i, c := range m.Codecs {
		codecs[i] = v3Codec(c)
	}
	doc := map[string]any{
		"zarr_format": 3, "node_type": "array", "shape": shape, "data_type": m.DataType.v3JSON(),
		"chunk_grid":         map[string]any{"name": "regular", "configuration": map[string]any{"chunk_shape": chunks}},
		"chunk_key_encoding": map[string]any{"name": m.ChunkKeyEncoding, "configuration": map[string]any{"separator": m.Separator}},
		"fill_value":         fill, "codecs": codecs, "attributes": m.Attributes,
	}
	if m.Attributes == nil {
		doc["attributes"] = map[string]any{}
	}
	if len(m.DimensionNames) > 0 {
		doc["dimension_names"] = m.DimensionNames
	}
	b, err := marshalJSON(doc, "  ")
	if err != nil {
		return nil, err
	}
	return map[string][]byte{"zarr.json": b}, nil
}

func v2Codec(c Codec) map[string]any {
	m := map[string]any{"id": c.Name}
	for k, v := range c.Configuration {
		m[k] = v
	}
	return m
}

func v3Codec(c Codec) map[string]any {
	m := map[string]any{"name": c.Name}
	if c.Name == "bytes" && c.Configuration["endian"] == nil {
		// Spelled out so that every reader agrees; little is what
		// decoding assumes for a missing endian.
		c.Configuration = map[string]any{"endian": "little"}
	}
	if len(c.Configuration) > 0 {
		cfg := map[string]any{}
		for k, v := range c.Configuration {
			if k == "codecs" || k == "index_codecs" {
				if l, ok := v.([]Codec); ok {
					out := make([]any, len(l))
					for i, x := range l {
						out[i] = v3Codec(x)
					}
					v = out
				}
			}
			cfg[k] = v
		}
		m["configuration"] = cfg
	}
	return m
}

// marshalJSON indents v without HTML escaping ("<f4" stays readable),
// with every non-ASCII character escaped (\u00e9), as zarr-python writes
// metadata: zarr-python before 2.14 decodes metadata as ASCII. A string
// that is not valid UTF-8 (an attribute, a dimension name, an array's
// path in consolidated metadata) is ErrInvalidMetadata.
func marshalJSON(v any, indent string) ([]byte, error) {
	// encoding/json writes U+FFFD in place of each byte that is not
	// UTF-8, saving an attribute or array under another name: the same
	// encoding by the v2 package, with its strings checked, goes first.
	if err := jsonv2.MarshalWrite(io.Discard, v, strictUTF8); err != nil {
		return nil, fmt.Errorf("%w: %v", ErrInvalidMetadata, err)
	}
	var b bytes.Buffer
	e := json.NewEncoder(&b)
	e.SetEscapeHTML(false)
	e.SetIndent("", indent)
	if err := e.Encode(v); err != nil {
		return nil, err
	}
	return asciiJSON(b.Bytes()), nil
}

// strictUTF8 is encoding/json's behaviour (the v2 package's v1 options)
// with a string that is not valid UTF-8 an error.
var strictUTF8 = jsonv2.JoinOptions(jsonv1.DefaultOptionsV1(), jsontext.AllowInvalidUTF8(false))

// asciiJSON escapes the non-ASCII characters of a JSON document, which
// can only be inside strings, as \uXXXX (UTF-16 surrogate pairs beyond
// the BMP).
func asciiJSON(b []byte) []byte {
	i := bytes.IndexFunc(b, func(r rune) bool { return r >= utf8.RuneSelf })
	if i < 0 {
		return b
	}
	out := append(make([]byte, 0, len(b)+len(b)/4), b[:i]...)
	for _, r := range string(b[i:]) {
		switch {
		case r < utf8.RuneSelf:
			out = append(out, byte(r))
		case r > 0xffff:
			r1, r2 := utf16.EncodeRune(r)
			out = fmt.Appendf(out, "\\u%04x\\u%04x", r1, r2)
		default:
			out = fmt.Appendf(out, "\\u%04x", r)
		}
	}
	return out
}
