package zarr

import (
	"encoding/json"
	"fmt"
	"math"
)

// numcodecs filters that pack elements for the compressor after them:
// the lossy FixedScaleOffset, Quantize, BitRound, and AsType, PackBits
// (v2 filters fixedscaleoffset, quantize, bitround, astype, packbits;
// numcodecs' v3 forms of them are array-to-array codecs, which this
// package does not read). Each encodes as NumPy computes it (arithmetic
// in the dtype's float width, np.around's rounding half to even), so
// kvik's chunks are numcodecs' byte for byte; where NumPy would wrap a
// value that does not fit the stored type, encode fails instead
// (ErrInvalidRegion), but for the array's fill value, which a chunk's
// padding holds: that wraps as NumPy's cast does on x86-64, as
// zarr-python stores it. Decode fails a stored value that does not fit
// the array's type (ErrCorruptChunk).

// numType is a numeric NumPy type of a filter's configuration, with its
// byte order.
type numType struct {
	DataType
	big bool
}

// cfgNumType parses the NumPy type string cfg[key] (def where absent):
// a bool, integer or float.
func cfgNumType(cfg map[string]any, key, def string) (numType, error) {
	s, err := cfgString(cfg, key, def)
	if err != nil {
		return numType{}, err
	}
	t, big, err := parseV2Type(s)
	if err != nil {
		return numType{}, err
	}
	if t.Kind != Int && t.Kind != Uint && t.Kind != Float {
		return numType{}, fmt.Errorf("%w: %s %q in a filter", ErrUnsupportedCodec, key, s)
	}
	return numType{t, big}, nil
}

// cfgFloat returns cfg[key] as a float64 (def where absent).
func cfgFloat(cfg map[string]any, key string, def float64) (float64, bool) {
	switch x := cfg[key].(type) {
	case nil:
		return def, true
	case json.Number:
		f, err := x.Float64()
		return f, err == nil
	case float64:
		return x, true
	case int:
		return float64(x), true
	}
	return 0, false
}

// load reads one element of t as a float64 (an integer exactly up to
// 2^53, as NumPy converts it).
func (t numType) load(b []byte) float64 {
	if t.Kind == Float {
		return loadFloat(b, t.big)
	}
	u := loadUint(b, t.big)
	if t.Kind == Int {
		return float64(int64(signExtend(u, t.Size)))
	}
	return float64(u)
}

// store writes f as one element of t: a float rounded to t's width, an
// integer truncated toward zero (as NumPy's astype), failing where f is
// NaN or outside t's range, unless wrap is set: then it stores what
// NumPy's cast stores on x86-64, the low bytes of the int64 truncation
// (of math.MinInt64 for NaN and what int64 cannot hold).
func (t numType) store(b []byte, f float64, wrap bool) bool {
	if t.Kind == Float {
		storeFloat(b, f, t.big)
		return true
	}
	f = math.Trunc(f)
	bits := float64(uint64(1) << (8*t.Size - 1))
	lo, hi := -bits, bits // [lo, hi) for signed types
	if t.Kind == Uint {
		lo, hi = 0, 2*bits
	}
	if math.IsNaN(f) || f < lo || f >= hi {
		if !wrap {
			return false
		}
		i := int64(math.MinInt64)
		if f >= -(1<<63) && f < 1<<63 {
			i = int64(f)
		}
		storeUint(b, uint64(i), t.big)
		return true
	}
	if t.Kind == Int {
		storeUint(b, uint64(int64(f)), t.big)
	} else {
		storeUint(b, uint64(f), t.big)
	}
	return true
}

// arith rounds f to the float width NumPy computes t's elements in with
// a Python float: t's own for a float type, float64 for an integer one.
func (t numType) arith(f float64) float64 {
	if t.Kind == Float {
		return roundFloat(f, t.Size)
	}
	return f
}

// convert maps every element of src, of type from, through f into a new
// buffer of elements of type to, of at most limit bytes, failing (with
// err's class) on a value to cannot hold but one whose bytes are fill
// (wrapped, see store). A
// nil f casts as NumPy's astype: between integer types exactly (past
// 2^53 too), else through a float64.
func convert(src []byte, from, to numType, f func(float64) float64, fill []byte, limit int, err error) ([]byte, error) {
	if len(src)%from.Size != 0 {
		return nil, fmt.Errorf("%w: %d bytes are no whole number of %d-byte elements", err, len(src), from.Size)
	}
	if len(src)/from.Size*to.Size > limit {
		return nil, fmt.Errorf("%w: %d bytes converted pass %d", err, len(src)/from.Size*to.Size, limit)
	}
	ints := f == nil && from.Kind != Float && to.Kind != Float
	if f == nil {
		f = to.arith
	}
	n := len(src) / from.Size
	out := make([]byte, n*to.Size)
	for i := range n {
		e := src[i*from.Size:][:from.Size]
		o := out[i*to.Size:][:to.Size]
		wrap := fill != nil && string(e) == string(fill)
		if ints {
			if !castInt(o, to, e, from) && !wrap {
				return nil, fmt.Errorf("%w: element %d does not fit %s", err, i, to.NumPy())
			}
			continue
		}
		if v := f(from.load(e)); !to.store(o, v, wrap) {
			return nil, fmt.Errorf("%w: element %d, %g, does not fit %s", err, i, v, to.NumPy())
		}
	}
	return out, nil
}

// castInt writes the integer e, of type from, into o as an integer of
// type to (its low bytes, as NumPy's cast) and reports whether to holds
// it.
func castInt(o []byte, to numType, e []byte, from numType) bool {
	u := loadUint(e, from.big)
	maxU := uint64(math.MaxUint64) >> (64 - 8*to.Size)
	maxI := int64(math.MaxInt64) >> (64 - 8*to.Size)
	var fits bool
	switch v := int64(signExtend(u, from.Size)); {
	case from.Kind == Int && to.Kind == Int:
		fits = v >= -maxI-1 && v <= maxI
	case from.Kind == Int:
		fits = v >= 0 && uint64(v) <= maxU
	case to.Kind == Int:
		fits = u <= uint64(maxI)
	default:
		fits = u <= maxU
	}
	if from.Kind == Int {
		u = signExtend(u, from.Size)
	}
	storeUint(o, u, to.big)
	return fits
}

// fixedScaleOffsetCodec stores round((x - offset) * scale) as astype and
// reads y / scale + offset back as dtype.
type fixedScaleOffsetCodec struct {
	scale, offset float64
	dt, as        numType
	fill          []byte // the array's fill value, as the filter sees it
}

// cfgDtypes parses a filter's dtype and astype (astype defaulting to
// dtype).
func cfgDtypes(cfg map[string]any) (dt, as numType, err error) {
	if dt, err = cfgNumType(cfg, "dtype", ""); err != nil {
		return dt, as, err
	}
	as, err = cfgNumType(cfg, "astype", dt.NumPy())
	return dt, as, err
}

func newFixedScaleOffset(cfg map[string]any) (bytesCodec, error) {
	c := fixedScaleOffsetCodec{}
	var err error
	if c.dt, c.as, err = cfgDtypes(cfg); err != nil {
		return nil, err
	}
	var ok bool
	if c.scale, ok = cfgFloat(cfg, "scale", 1); !ok || c.scale == 0 {
		return nil, fmt.Errorf("%w: fixedscaleoffset scale %v", ErrInvalidMetadata, cfg["scale"])
	}
	if c.offset, ok = cfgFloat(cfg, "offset", 0); !ok {
		return nil, fmt.Errorf("%w: fixedscaleoffset offset %v", ErrInvalidMetadata, cfg["offset"])
	}
	return c, nil
}

func (c fixedScaleOffsetCodec) encode(src, _ []byte) ([]byte, error) {
	return convert(src, c.dt, c.as, func(x float64) float64 {
		return math.RoundToEven(c.dt.arith(c.dt.arith(x-c.dt.arith(c.offset)) * c.dt.arith(c.scale)))
	}, c.fill, math.MaxInt, ErrInvalidRegion)
}

func (c fixedScaleOffsetCodec) decode(src, _ []byte, limit int) ([]byte, error) {
	return convert(src, c.as, c.dt, func(y float64) float64 {
		return c.as.arith(c.as.arith(y/c.as.arith(c.scale)) + c.as.arith(c.offset))
	}, nil, limit, ErrCorruptChunk)
}

// quantizeCodec keeps digits decimal digits of floats: round(x * 2^b) /
// 2^b, 2^b the power of two past 10^digits, stored as astype; reading
// casts back to dtype.
type quantizeCodec struct {
	scale  float64
	dt, as numType
	fill   []byte // the array's fill value, as the filter sees it
}

func newQuantize(cfg map[string]any) (bytesCodec, error) {
	c := quantizeCodec{}
	var err error
	if c.dt, c.as, err = cfgDtypes(cfg); err != nil {
		return nil, err
	}
	digits, err := cfgNumber(cfg, "digits", 0)
	if err != nil {
		return nil, err
	}
	if c.dt.Kind != Float || digits < -300 || digits > 300 {
		return nil, fmt.Errorf("%w: quantize of %s to %d digits", ErrInvalidMetadata, c.dt.NumPy(), digits)
	}
	// numcodecs: precision 10^-digits, its decimal exponent rounded
	// away from zero, the bits that hold 10^-exp, rounded up.
	exp := math.Log10(math.Pow(10, -float64(digits)))
	if exp < 0 {
		exp = math.Floor(exp)
	} else {
		exp = math.Ceil(exp)
	}
	c.scale = math.Pow(2, math.Ceil(math.Log2(math.Pow(10, -exp))))
	return c, nil
}

func (c quantizeCodec) encode(src, _ []byte) ([]byte, error) {
	return convert(src, c.dt, c.as, func(x float64) float64 {
		s := c.dt.arith(c.scale)
		return c.dt.arith(math.RoundToEven(c.dt.arith(s*x)) / s)
	}, c.fill, math.MaxInt, ErrInvalidRegion)
}

func (c quantizeCodec) decode(src, _ []byte, limit int) ([]byte, error) {
	return convert(src, c.as, c.dt, nil, nil, limit, ErrCorruptChunk)
}

// bitRoundCodec keeps keepbits bits of each float's mantissa, rounding
// half to even, the rest zero; reading changes nothing.
type bitRoundCodec struct {
	keep int
	dt   DataType
}

// mantissaBits are the explicit mantissa bits of a float of a size.
var mantissaBits = map[int]int{2: 10, 4: 23, 8: 52}

func newBitRound(cfg map[string]any, dt DataType) (bytesCodec, error) {
	keep, err := cfgNumber(cfg, "keepbits", -1)
	if err != nil {
		return nil, err
	}
	if dt.Kind != Float || keep < 0 || keep > mantissaBits[dt.Size] {
		return nil, fmt.Errorf("%w: bitround of %v keeping %d bits", ErrInvalidMetadata, dt, keep)
	}
	return bitRoundCodec{keep: keep, dt: dt}, nil
}

func (c bitRoundCodec) encode(src, _ []byte) ([]byte, error) {
	es := c.dt.Size
	if len(src)%es != 0 {
		return nil, fmt.Errorf("%w: %d bytes are no whole number of %d-byte floats", ErrInvalidRegion, len(src), es)
	}
	out := make([]byte, len(src))
	mask := mantissaBits[es] - c.keep
	for i := 0; i < len(src); i += es {
		b := loadUint(src[i:i+es], false)
		if mask > 0 {
			// Half a quantum less one, plus the lowest kept bit: ties
			// go to the even quantum, carries into the exponent.
			b += (b>>mask)&1 + (1<<(mask-1) - 1)
			b &^= 1<<mask - 1
		}
		storeUint(out[i:i+es], b, false)
	}
	return out, nil
}

func (c bitRoundCodec) decode(src, _ []byte, limit int) ([]byte, error) {
	if len(src) > limit {
		return nil, fmt.Errorf("%w: bitround output exceeds %d bytes", ErrCorruptChunk, limit)
	}
	return src, nil
}

// asTypeCodec is numcodecs' AsType filter: elements of decode_dtype (the
// array's) stored as encode_dtype, converted both ways as NumPy's astype
// converts (a float to an integer truncated; a value the other type
// cannot hold fails, but the padding's fill value, as for
// fixedScaleOffsetCodec).
type asTypeCodec struct {
	enc, dec numType
	fill     []byte // the array's fill value, as the filter sees it
}

func newAsType(cfg map[string]any) (bytesCodec, error) {
	c := asTypeCodec{}
	var err error
	if c.dec, err = cfgNumType(cfg, "decode_dtype", ""); err != nil {
		return nil, err
	}
	if c.enc, err = cfgNumType(cfg, "encode_dtype", ""); err != nil {
		return nil, err
	}
	return c, nil
}

func (c asTypeCodec) encode(src, _ []byte) ([]byte, error) {
	return convert(src, c.dec, c.enc, nil, c.fill, math.MaxInt, ErrInvalidRegion)
}

func (c asTypeCodec) decode(src, _ []byte, limit int) ([]byte, error) {
	return convert(src, c.enc, c.dec, nil, nil, limit, ErrCorruptChunk)
}

// withFill returns c knowing fill, the array's fill value as it sees
// it, where c converts elements to another type (fixedscaleoffset,
// quantize, astype: the padding's fill value wraps there as NumPy wraps
// it, where another value that does not fit fails); else c.
func withFill(c bytesCodec, fill []byte) bytesCodec {
	switch f := c.(type) {
	case fixedScaleOffsetCodec:
		f.fill = fill
		return f
	case quantizeCodec:
		f.fill = fill
		return f
	case asTypeCodec:
		f.fill = fill
		return f
	}
	return c
}

// packBitsCodec is numcodecs' PackBits filter of bools: the count of
// padding bits of the last byte, then eight elements a byte, the first
// the highest bit (np.packbits).
type packBitsCodec struct{}

func (packBitsCodec) encode(src, _ []byte) ([]byte, error) {
	out := make([]byte, 1+(len(src)+7)/8)
	out[0] = byte((8 - len(src)%8) % 8)
	for i, b := range src {
		if b != 0 {
			out[1+i/8] |= 0x80 >> (i % 8)
		}
	}
	return out, nil
}

func (packBitsCodec) decode(src, _ []byte, limit int) ([]byte, error) {
	if len(src) == 0 || src[0] > 7 || len(src) == 1 && src[0] != 0 {
		return nil, fmt.Errorf("%w: packbits of %d bytes", ErrCorruptChunk, len(src))
	}
	n := 8*(len(src)-1) - int(src[0])
	if n > limit {
		return nil, fmt.Errorf("%w: packbits output of %d bytes exceeds %d", ErrCorruptChunk, n, limit)
	}
	out := make([]byte, n)
	for i := range out {
		out[i] = src[1+i/8] >> (7 - i%8) & 1
	}
	return out, nil
}
