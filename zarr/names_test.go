package zarr

import (
	"context"
	"errors"
	"os"
	"path/filepath"
	"reflect"
	"strings"
	"testing"
)

// TestCreateRefusesInvalidUTF8 creates arrays whose attributes (a key,
// a value, a string deep in a list) or dimension names hold bytes that
// are not valid UTF-8: each is ErrInvalidMetadata with nothing written
// (encoding/json wrote U+FFFD in their place, so they read back as other
// strings), in both formats. Valid strings, U+FFFD itself and control
// characters included, read back exactly.
func TestCreateRefusesInvalidUTF8(t *testing.T) {
	ctx := context.Background()
	base := Metadata{Shape: []int{3}, ChunkShape: []int{2}, DataType: DataType{Kind: Int, Size: 2}}
	for _, f := range []int{2, 3} {
		for name, change := range map[string]func(m *Metadata){
			"attribute key":   func(m *Metadata) { m.Attributes = map[string]any{"units\xff": "m"} },
			"attribute value": func(m *Metadata) { m.Attributes = map[string]any{"units": "\xc0\xafm"} },
			"in a list":       func(m *Metadata) { m.Attributes = map[string]any{"l": []any{1, map[string]any{"k": "a\xed\xa0\x80"}}} },
			"dimension name":  func(m *Metadata) { m.DimensionNames = []string{"x\xfe"} },
		} {
			if f == 2 && name == "dimension name" {
				continue // v2 has no dimension names
			}
			dir := t.TempDir()
			s, err := NewDirStore(dir)
			if err != nil {
				t.Fatal(err)
			}
			m := base
			m.ZarrFormat = f
			change(&m)
			if _, err := Create(ctx, s, "a", m); !errors.Is(err, ErrInvalidMetadata) {
				t.Errorf("v%d, %s: Create = %v, want ErrInvalidMetadata", f, name, err)
			}
			if ents, _ := os.ReadDir(dir); len(ents) != 0 {
				t.Errorf("v%d, %s: a refused Create wrote %d entries", f, name, len(ents))
			}
		}
		s, _ := NewDirStore(t.TempDir())
		m := base
		m.ZarrFormat = f
		m.Attributes = map[string]any{"é\ufffd\x1b]0;t\a": []any{"\u202e", "\x00", "权"}}
		if f == 3 {
			m.DimensionNames = []string{"\ufffd\t"}
		}
		if _, err := Create(ctx, s, "a", m); err != nil {
			t.Fatalf("v%d: %v", f, err)
		}
		a, err := Open(ctx, s, "a")
		if err != nil {
			t.Fatal(err)
		}
		if got := a.Metadata(); !reflect.DeepEqual(got.Attributes, m.Attributes) || !reflect.DeepEqual(got.DimensionNames, m.DimensionNames) {
			t.Errorf("v%d: read back %q %q, want %q %q", f, got.Attributes, got.DimensionNames, m.Attributes, m.DimensionNames)
		}
	}
}

// TestConsolidateRefusesInvalidUTF8 consolidates a store holding an
// array whose path is not valid UTF-8 (a fine file name): the
// consolidated document would list it as a\ufffd, an array that does
// not exist, so Consolidate fails with ErrInvalidMetadata and writes
// nothing.
func TestConsolidateRefusesInvalidUTF8(t *testing.T) {
	ctx := context.Background()
	for _, f := range []int{2, 3} {
		dir := t.TempDir()
		s, _ := NewDirStore(dir)
		m := Metadata{ZarrFormat: f, Shape: []int{3}, ChunkShape: []int{3}, DataType: DataType{Kind: Uint, Size: 1}}
		for _, p := range []string{"ok", "a\xff"} {
			if _, err := Create(ctx, s, p, m); err != nil {
				t.Fatal(err)
			}
		}
		before, _ := os.ReadFile(filepath.Join(dir, map[int]string{2: ".zgroup", 3: "zarr.json"}[f]))
		if err := Consolidate(ctx, s); !errors.Is(err, ErrInvalidMetadata) {
			t.Errorf("v%d: Consolidate = %v, want ErrInvalidMetadata", f, err)
		}
		after, _ := os.ReadFile(filepath.Join(dir, map[int]string{2: ".zgroup", 3: "zarr.json"}[f]))
		if _, err := os.Stat(filepath.Join(dir, ".zmetadata")); err == nil || string(before) != string(after) {
			t.Errorf("v%d: a refused Consolidate wrote its document", f)
		}
	}
}

// TestErrorsQuoteNames opens an array whose codec name, from the file,
// holds terminal escape sequences: the error names it quoted, without
// a control byte, so printing it cannot drive the terminal.
func TestErrorsQuoteNames(t *testing.T) {
	ctx := context.Background()
	dir := t.TempDir()
	doc := `{"zarr_format":3,"node_type":"array","shape":[2],"data_type":"uint8",` +
		`"chunk_grid":{"name":"regular","configuration":{"chunk_shape":[2]}},` +
		`"chunk_key_encoding":{"name":"default"},"fill_value":0,` +
		`"codecs":[{"name":"bytes\u001b]0;owned\u0007\u001b[2K\r","configuration":5}]}`
	os.MkdirAll(filepath.Join(dir, "a"), 0o755)
	if err := os.WriteFile(filepath.Join(dir, "a", "zarr.json"), []byte(doc), 0o644); err != nil {
		t.Fatal(err)
	}
	s, _ := NewDirStore(dir)
	_, err := Open(ctx, s, "a")
	if !errors.Is(err, ErrInvalidMetadata) {
		t.Fatalf("Open = %v, want ErrInvalidMetadata", err)
	}
	if strings.ContainsFunc(err.Error(), func(r rune) bool { return r < ' ' || r == 0x7f }) {
		t.Fatalf("the error holds control characters: %q", err)
	}
}
