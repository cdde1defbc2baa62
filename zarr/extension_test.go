package zarr

import (
	"bytes"
	"encoding/json"
	"errors"
	"math/rand/v2"
	"slices"
	"testing"
)

// withField sets field name of the JSON document under key to raw.
func withField(t *testing.T, s Store, key, name, raw string) {
	t.Helper()
	b, err := s.Get(bg, key, nil)
	if err != nil {
		t.Fatal(err)
	}
	var doc map[string]json.RawMessage
	if err := json.Unmarshal(b, &doc); err != nil {
		t.Fatal(err)
	}
	if raw == "" {
		delete(doc, name)
	} else {
		doc[name] = json.RawMessage(raw)
	}
	if b, err = json.Marshal(doc); err != nil {
		t.Fatal(err)
	}
	if err := s.Set(bg, key, b); err != nil {
		t.Fatal(err)
	}
}

// TestMustUnderstand: an unknown field of a v3 array document is refused
// with ErrUnsupportedExtension unless it is an object with
// "must_understand": false, which is ignored (the array reads and writes
// as before). A group with such a field gets no new array and is not
// consolidated. Arrays with must_understand: true fields were opened and
// written to.
func TestMustUnderstand(t *testing.T) {
	rng := rand.New(rand.NewPCG(39, 11))
	s, _ := NewDirStore(t.TempDir())
	m := Metadata{Shape: []int{7, 5}, ChunkShape: []int{3, 2}, DataType: DataType{Kind: Float, Size: 4}}
	a, err := Create(bg, s, "g/a", m)
	if err != nil {
		t.Fatal(err)
	}
	want := randValues(rng, m.DataType, 35)
	if err := a.WriteRegion(bg, []int{0, 0}, m.Shape, want); err != nil {
		t.Fatal(err)
	}
	refused := []string{`{"must_understand": true}`, `{"must_understand": true, "configuration": {}}`, `{}`, `{"must_understand": "false"}`,
		`{"must_understand": null}`, `1`, `"x"`, `[{"must_understand": false}]`, `null`}
	for _, raw := range refused {
		withField(t, s, "g/a/zarr.json", "an_extension", raw)
		if _, err := Open(bg, s, "g/a"); !errors.Is(err, ErrUnsupportedExtension) {
			t.Errorf("array with an extension field %s: %v, want ErrUnsupportedExtension", raw, err)
		}
	}
	for _, raw := range []string{`{"must_understand": false}`, `{"must_understand": false, "configuration": {"k": [1, 2]}}`} {
		withField(t, s, "g/a/zarr.json", "an_extension", raw)
		b, err := Open(bg, s, "g/a")
		if err != nil {
			t.Fatalf("extension field %s: %v", raw, err)
		}
		got := make([]byte, len(want))
		if err := b.ReadRegion(bg, []int{0, 0}, m.Shape, got); err != nil || !bytes.Equal(got, want) {
			t.Fatalf("read with an extension field %s: %v, equal %v", raw, err, bytes.Equal(got, want))
		}
		part := randValues(rng, m.DataType, 4)
		if err := b.WriteRegion(bg, []int{2, 1}, []int{4, 3}, part); err != nil {
			t.Fatal(err)
		}
		(model{shape: m.Shape, es: 4, buf: want}).write([]int{2, 1}, []int{4, 3}, part)
	}
	withField(t, s, "g/a/zarr.json", "an_extension", "")

	// A group: no array created in it, no consolidation.
	withField(t, s, "g/zarr.json", "group_extension", `{"must_understand": true}`)
	if _, err := Create(bg, s, "g/new", m); !errors.Is(err, ErrUnsupportedExtension) {
		t.Errorf("Create in a group with a must_understand field: %v", err)
	}
	if keys, _ := s.List(bg, "g/new"); len(keys) != 0 {
		t.Errorf("the refused Create wrote %q", keys)
	}
	before := snapshot(t, s)
	if err := Consolidate(bg, s); !errors.Is(err, ErrUnsupportedExtension) {
		t.Errorf("Consolidate with a must_understand group field: %v", err)
	}
	withField(t, s, "g/zarr.json", "group_extension", "")
	withField(t, s, "zarr.json", "root_extension", `{"must_understand": true}`)
	if err := Consolidate(bg, s); !errors.Is(err, ErrUnsupportedExtension) {
		t.Errorf("Consolidate with a must_understand root field: %v", err)
	}
	withField(t, s, "zarr.json", "root_extension", "")
	if after := snapshot(t, s); len(after) != len(before) {
		t.Errorf("refused calls changed the store: %d keys, %d before", len(after), len(before))
	}
	withField(t, s, "zarr.json", "root_extension", `{"must_understand": false}`)
	if _, err := Create(bg, s, "g/new", m); err != nil {
		t.Fatal(err)
	}
	if err := Consolidate(bg, s); err != nil {
		t.Fatal(err)
	}
}

// TestDimensionNames: dimension_names of another length than the shape
// fail with ErrInvalidMetadata, read or created; one per dimension (null
// entries too) opens, and none is fine.
func TestDimensionNames(t *testing.T) {
	s, _ := NewDirStore(t.TempDir())
	m := Metadata{Shape: []int{4, 3, 2}, ChunkShape: []int{2, 2, 2}, DataType: DataType{Kind: Int, Size: 8}}
	if _, err := Create(bg, s, "a", m); err != nil {
		t.Fatal(err)
	}
	for _, raw := range []string{`["x"]`, `["x", "y"]`, `["x", "y", "z", "w"]`, `[]`, `[null, null]`} {
		withField(t, s, "a/zarr.json", "dimension_names", raw)
		if _, err := Open(bg, s, "a"); !errors.Is(err, ErrInvalidMetadata) {
			t.Errorf("dimension_names %s for rank 3: %v, want ErrInvalidMetadata", raw, err)
		}
	}
	for raw, want := range map[string][]string{`["x", "y", "z"]`: {"x", "y", "z"}, `[null, "y", null]`: {"", "y", ""}, `null`: nil} {
		withField(t, s, "a/zarr.json", "dimension_names", raw)
		a, err := Open(bg, s, "a")
		if err != nil || !slices.Equal(a.Metadata().DimensionNames, want) {
			t.Errorf("dimension_names %s: %v", raw, err)
		}
	}
	for _, names := range [][]string{{"x"}, {"x", "y", "z", "w"}} {
		m.DimensionNames = names
		if _, err := Create(bg, s, "b", m); !errors.Is(err, ErrInvalidMetadata) {
			t.Errorf("Create with dimension names %q for rank 3: %v", names, err)
		}
	}
	m.DimensionNames = []string{"t", "y", "x"}
	if _, err := Create(bg, s, "b", m); err != nil {
		t.Fatal(err)
	}
	if b, err := Open(bg, s, "b"); err != nil || !slices.Equal(b.Metadata().DimensionNames, m.DimensionNames) {
		t.Fatalf("round trip of dimension names: %v", err)
	}
}
