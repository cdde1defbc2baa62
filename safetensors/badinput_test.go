package safetensors

import (
	"bytes"
	"context"
	"encoding/binary"
	"errors"
	"fmt"
	"math/rand/v2"
	"os"
	"path/filepath"
	"strings"
	"testing"
)

// file builds a safetensors file from a header string and a data size.
func file(hdr string, data int) []byte {
	b := binary.LittleEndian.AppendUint64(nil, uint64(len(hdr)))
	b = append(b, hdr...)
	return append(b, bytes.Repeat([]byte{0xa5}, data)...)
}

// TestBadHeaders checks every kind of broken or hostile header gets its
// typed error before any data is read.
func TestBadHeaders(t *testing.T) {
	huge := binary.LittleEndian.AppendUint64(nil, 1<<40)
	cases := []struct {
		name string
		b    []byte
		want error
	}{
		{"short", []byte{1, 2, 3}, ErrInvalidHeader},
		{"length 0", file("", 0), ErrInvalidHeader},
		{"huge length", append(huge, '{', '}'), ErrInvalidHeader},
		{"length past end", append(binary.LittleEndian.AppendUint64(nil, 64), "{}"...), ErrInvalidHeader},
		{"not json", file("{nope", 0), ErrInvalidHeader},
		{"array", file("[]", 0), ErrInvalidHeader},
		{"trailing", file(`{} x`, 0), ErrInvalidHeader},
		{"dup", file(`{"a":{"dtype":"U8","shape":[1],"data_offsets":[0,1]},"a":{"dtype":"U8","shape":[1],"data_offsets":[0,1]}}`, 1), ErrInvalidHeader},
		{"unknown field", file(`{"a":{"dtype":"U8","shape":[1],"data_offsets":[0,1],"x":1}}`, 1), ErrInvalidHeader},
		{"missing field", file(`{"a":{"dtype":"U8","shape":[1]}}`, 1), ErrInvalidHeader},
		{"bad metadata", file(`{"__metadata__":{"a":1}}`, 0), ErrInvalidHeader},
		{"null metadata value", file(`{"__metadata__":{"a":null}}`, 0), ErrInvalidHeader},
		{"field name case", file(`{"a":{"DType":"U8","shape":[1],"data_offsets":[0,1]}}`, 1), ErrInvalidHeader},
		{"field twice", file(`{"a":{"dtype":"U8","shape":[1],"shape":[1],"data_offsets":[0,1]}}`, 1), ErrInvalidHeader},
		{"nested shape", file(`{"a":{"dtype":"U8","shape":[[1]],"data_offsets":[0,1]}}`, 1), ErrInvalidHeader},
		{"exponent", file(`{"a":{"dtype":"U8","shape":[1e0],"data_offsets":[0,1]}}`, 1), ErrInvalidHeader},
		{"dtype", file(`{"a":{"dtype":"F128","shape":[1],"data_offsets":[0,16]}}`, 16), ErrUnknownDtype},
		{"negative shape", file(`{"a":{"dtype":"U8","shape":[-1],"data_offsets":[0,1]}}`, 1), ErrInvalidHeader},
		{"float shape", file(`{"a":{"dtype":"U8","shape":[1.5],"data_offsets":[0,1]}}`, 1), ErrInvalidHeader},
		{"size mismatch", file(`{"a":{"dtype":"F32","shape":[2],"data_offsets":[0,4]}}`, 4), ErrInvalidOffsets},
		{"reversed", file(`{"a":{"dtype":"U8","shape":[0],"data_offsets":[4,0]}}`, 4), ErrInvalidOffsets},
		{"three offsets", file(`{"a":{"dtype":"U8","shape":[1],"data_offsets":[0,1,2]}}`, 1), ErrInvalidOffsets},
		{"overflow", file(`{"a":{"dtype":"F64","shape":[4294967296,4294967296],"data_offsets":[0,0]}}`, 0), ErrInvalidOffsets},
		{"huge offsets", file(`{"a":{"dtype":"U8","shape":[18446744073709551615],"data_offsets":[0,18446744073709551615]}}`, 0), ErrInvalidOffsets},
		{"past data", file(`{"a":{"dtype":"U8","shape":[8],"data_offsets":[0,8]}}`, 4), ErrInvalidOffsets},
		{"short of data", file(`{"a":{"dtype":"U8","shape":[2],"data_offsets":[0,2]}}`, 4), ErrInvalidOffsets},
		{"gap", file(`{"a":{"dtype":"U8","shape":[2],"data_offsets":[0,2]},"b":{"dtype":"U8","shape":[2],"data_offsets":[3,5]}}`, 5), ErrInvalidOffsets},
		{"overlap", file(`{"a":{"dtype":"U8","shape":[3],"data_offsets":[0,3]},"b":{"dtype":"U8","shape":[2],"data_offsets":[2,4]}}`, 4), ErrInvalidOffsets},
		{"invalid utf-8", file("{\"a\xff\":{\"dtype\":\"U8\",\"shape\":[1],\"data_offsets\":[0,1]}}", 1), ErrInvalidHeader},
		{"half byte", file(`{"a":{"dtype":"F4","shape":[3],"data_offsets":[0,2]}}`, 2), ErrInvalidOffsets},
	}
	dir := t.TempDir()
	for _, c := range cases {
		p := filepath.Join(dir, strings.ReplaceAll(c.name, " ", "_"))
		if err := os.WriteFile(p, c.b, 0o644); err != nil {
			t.Fatal(err)
		}
		if _, err := LoadHost(context.Background(), p, nil); !errors.Is(err, c.want) {
			t.Errorf("%s: %v, want %v", c.name, err, c.want)
		}
	}
}

// TestWhitespacePadding checks JSON white space after the object is
// accepted, as the reference library accepts it.
func TestWhitespacePadding(t *testing.T) {
	for _, pad := range []string{"", "   ", "\n", " \t\r\n "} {
		b := file(`{"a":{"dtype":"U8","shape":[2],"data_offsets":[0,2]}}`+pad, 2)
		h, err := DecodeHeader(bytes.NewReader(b), int64(len(b)))
		if err != nil || len(h.Tensors) != 1 {
			t.Errorf("padding %q: %v", pad, err)
		}
	}
}

// TestSplitSixBit checks a split 6-bit tensor is cut on element
// boundaries (tensorload cuts at multiples of the unit).
func TestSplitSixBit(t *testing.T) {
	for _, d := range []Dtype{F6E2M3, F6E3M2, F4, BF16} {
		u := splitUnit(&TensorInfo{Dtype: d})
		if u%Alignment != 0 || (u*8)%int64(d.Bits()) != 0 {
			t.Errorf("%s: split unit %d cuts an element or breaks alignment", d, u)
		}
	}
}

// TestTruncated cuts a valid file at every length and expects a typed
// error each time (never a panic or a short load).
func TestTruncated(t *testing.T) {
	ts := randomTensors(rand.New(rand.NewPCG(4, 4)), 5)
	p := filepath.Join(t.TempDir(), "a.safetensors")
	if err := Save(context.Background(), p, ts, nil); err != nil {
		t.Fatal(err)
	}
	b, _ := os.ReadFile(p)
	hlen := 8 + int(binary.LittleEndian.Uint64(b))
	for n := 0; n < len(b); n++ {
		if n > hlen+16 && n%61 != 0 { // every cut in the header, a sample in the data
			continue
		}
		_, err := DecodeHeader(bytes.NewReader(b[:n]), int64(n))
		if !errors.Is(err, ErrInvalidHeader) && !errors.Is(err, ErrInvalidOffsets) {
			t.Fatalf("cut at %d of %d: %v", n, len(b), err)
		}
	}
}

// FuzzDecodeHeader checks no input panics, every error is typed, and an
// accepted header tiles exactly the data the file holds.
func FuzzDecodeHeader(f *testing.F) {
	names, _ := filepath.Glob("testdata/*.safetensors")
	for _, n := range names {
		if b, err := os.ReadFile(n); err == nil && len(b) < 1<<16 {
			f.Add(b)
		}
	}
	f.Add(file(`{"__metadata__":{"k":"v"},"a":{"dtype":"BF16","shape":[2,2],"data_offsets":[0,8]}}`, 8))
	f.Fuzz(func(t *testing.T, b []byte) {
		h, err := DecodeHeader(bytes.NewReader(b), int64(len(b)))
		if err != nil {
			if !errors.Is(err, ErrInvalidHeader) && !errors.Is(err, ErrInvalidOffsets) && !errors.Is(err, ErrUnknownDtype) {
				t.Fatalf("untyped error %v", err)
			}
			return
		}
		at := int64(0)
		for _, ti := range h.Tensors {
			if ti.Begin != at || ti.End < ti.Begin {
				t.Fatalf("accepted a gap or overlap at %q", ti.Name)
			}
			at = ti.End
		}
		if h.DataOffset+at != int64(len(b)) {
			t.Fatalf("accepted tensors ending at %d of %d", h.DataOffset+at, len(b))
		}
	})
}

// TestProbeReused decodes the headers of files longer than the first
// read one after the other: those reads share pooled buffers, so a
// header that kept a slice of its buffer (a name, the metadata) would
// change when the next file is read.
func TestProbeReused(t *testing.T) {
	var hs []*Header
	for i := range 8 {
		hdr := fmt.Sprintf(`{"__metadata__":{"k":"v%d"},"t%d":{"dtype":"U8","shape":[%d],"data_offsets":[0,%d]}}`, i, i, headerProbe, headerProbe)
		b := file(hdr, headerProbe)
		h, err := DecodeHeader(bytes.NewReader(b), int64(len(b)))
		if err != nil {
			t.Fatal(err)
		}
		hs = append(hs, h)
	}
	for i, h := range hs {
		if name, meta := fmt.Sprintf("t%d", i), fmt.Sprintf("v%d", i); h.Tensors[0].Name != name || h.Metadata["k"] != meta {
			t.Errorf("header %d: tensor %q, metadata %q after later reads; want %q, %q", i, h.Tensors[0].Name, h.Metadata["k"], name, meta)
		}
	}
}

// TestNullMetadata checks a null __metadata__ is accepted as none, as
// before (the reference library's Option), while a null value inside it
// is not (TestBadHeaders).
func TestNullMetadata(t *testing.T) {
	b := file(`{"__metadata__":null,"a":{"dtype":"U8","shape":[2],"data_offsets":[0,2]}}`, 2)
	h, err := DecodeHeader(bytes.NewReader(b), int64(len(b)))
	if err != nil || h.Metadata != nil || len(h.Tensors) != 1 {
		t.Fatalf("null metadata: %v, %v", h, err)
	}
}
