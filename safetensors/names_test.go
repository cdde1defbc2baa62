package safetensors

import (
	"bytes"
	"context"
	"errors"
	"math/rand/v2"
	"os"
	"path/filepath"
	"slices"
	"testing"
	"unicode/utf8"
)

// TestSaveRefusesInvalidUTF8 saves a tensor name, a metadata key, a
// metadata value and a shard name that are not valid UTF-8 (JSON would
// hold U+FFFD in their place): each save fails with ErrInvalidArgument
// before writing anything, the file saved before stays as it was, and
// SaveSharded makes no directory.
func TestSaveRefusesInvalidUTF8(t *testing.T) {
	rng := rand.New(rand.NewPCG(39, 4))
	good := f32Tensor(rng, "w", 100+rng.IntN(100))
	for _, c := range []struct {
		what  string
		names []string
		meta  map[string]string
		shard string
	}{
		{what: "tensor name", names: []string{"w\xff"}},
		{what: "two names that would both become w\ufffd", names: []string{"w\xff", "w\xfe"}},
		{what: "a cut rune", names: []string{"layer.\xe2\x82"}},
		{what: "a surrogate", names: []string{"w\xed\xa0\x80"}},
		{what: "metadata key", names: []string{"w"}, meta: map[string]string{"k\xff": "v"}},
		{what: "metadata value", names: []string{"w"}, meta: map[string]string{"k": "v\xc0\xaf"}},
		{what: "shard name", names: []string{"w"}, shard: "model\xff"},
	} {
		ts := make([]SaveTensor, len(c.names))
		for i, n := range c.names {
			ts[i] = f32Tensor(rng, n, 1+rng.IntN(50))
		}
		dir := t.TempDir()
		if c.shard == "" {
			path := filepath.Join(dir, "m.safetensors")
			if err := Save(context.Background(), path, []SaveTensor{good}, nil); err != nil {
				t.Fatal(err)
			}
			old, _ := os.ReadFile(path)
			err := Save(context.Background(), path, ts, c.meta)
			if !errors.Is(err, ErrInvalidArgument) {
				t.Errorf("Save, %s: %v, want ErrInvalidArgument", c.what, err)
			}
			if now, _ := os.ReadFile(path); !bytes.Equal(now, old) {
				t.Errorf("Save, %s: the file saved before changed", c.what)
			}
			if ents, _ := os.ReadDir(dir); len(ents) != 1 {
				t.Errorf("Save, %s: %d entries in the directory, want the old file alone", c.what, len(ents))
			}
		}
		sdir := filepath.Join(dir, "sharded")
		_, err := SaveSharded(context.Background(), sdir, ts, c.meta, &ShardOptions{Name: c.shard, MaxShardSize: 100})
		if !errors.Is(err, ErrInvalidArgument) {
			t.Errorf("SaveSharded, %s: %v, want ErrInvalidArgument", c.what, err)
		}
		if _, err := os.Stat(sdir); !errors.Is(err, os.ErrNotExist) {
			t.Errorf("SaveSharded, %s: a refused save made its directory", c.what)
		}
	}
}

// randomName returns a name of random bytes, often valid UTF-8 (ASCII,
// accented letters, CJK, emoji, control characters, quotes and
// backslashes), sometimes not (a stray byte anywhere).
func randomName(rng *rand.Rand) string {
	pieces := []string{"a", "layer.", "0", `"`, `\`, "/", " ", "\x00", "\x1b]0;x\a", "\t", "é", "权重", "🙂", "\u202e", "\ufffd"}
	var b []byte
	for range 1 + rng.IntN(6) {
		if rng.IntN(12) == 0 {
			b = append(b, byte(0x80+rng.IntN(0x80))) // a continuation or lead byte alone
			continue
		}
		b = append(b, pieces[rng.IntN(len(pieces))]...)
	}
	return string(b)
}

// TestSaveNamesProperty saves tensors and metadata under random byte
// strings, valid UTF-8 or not: a save either fails with
// ErrInvalidArgument and writes nothing, or loads back (Save and
// SaveSharded alike) with exactly the names, metadata and bytes given,
// never under another name.
func TestSaveNamesProperty(t *testing.T) {
	rng := rand.New(rand.NewPCG(39, 39))
	saved, refused := 0, 0
	for trial := range 150 {
		var ts []SaveTensor
		valid := true
		seen := map[string]bool{}
		for range 1 + rng.IntN(4) {
			n := randomName(rng)
			if seen[n] {
				continue
			}
			seen[n] = true
			valid = valid && utf8.ValidString(n)
			ts = append(ts, f32Tensor(rng, n, 1+rng.IntN(40)))
		}
		meta := map[string]string{}
		for range rng.IntN(3) {
			k, v := randomName(rng), randomName(rng)
			valid = valid && utf8.ValidString(k) && utf8.ValidString(v)
			meta[k] = v
		}
		dir := t.TempDir()
		path := filepath.Join(dir, "m.safetensors")
		err := Save(context.Background(), path, ts, meta)
		if !valid {
			refused++
			if !errors.Is(err, ErrInvalidArgument) {
				t.Fatalf("trial %d: a name that is not UTF-8 saved: %v", trial, err)
			}
			if ents, _ := os.ReadDir(dir); len(ents) != 0 {
				t.Fatalf("trial %d: a refused save left %d files", trial, len(ents))
			}
			if _, err := SaveSharded(context.Background(), filepath.Join(dir, "s"), ts, meta, &ShardOptions{MaxShardSize: 64}); !errors.Is(err, ErrInvalidArgument) {
				t.Fatalf("trial %d: SaveSharded of a name that is not UTF-8: %v", trial, err)
			}
			continue
		}
		saved++
		if err != nil {
			t.Fatalf("trial %d: %v", trial, err)
		}
		m, err := LoadHost(context.Background(), path, nil)
		if err != nil {
			t.Fatalf("trial %d: %v", trial, err)
		}
		checkNames(t, m, ts, meta)
		m.Close()
		index, err := SaveSharded(context.Background(), filepath.Join(dir, "s"), ts, meta, &ShardOptions{MaxShardSize: 64})
		if err != nil {
			t.Fatalf("trial %d: SaveSharded: %v", trial, err)
		}
		m, err = LoadIndexHost(context.Background(), index, nil)
		if err != nil {
			t.Fatalf("trial %d: LoadIndexHost: %v", trial, err)
		}
		delete(m.Metadata, "total_size")
		checkNames(t, m, ts, meta)
		m.Close()
	}
	if saved < 20 || refused < 20 {
		t.Fatalf("%d saved, %d refused: the names drawn test too little", saved, refused)
	}
}

// checkNames checks that m holds exactly ts, by name, and meta.
func checkNames(t *testing.T, m *Model, ts []SaveTensor, meta map[string]string) {
	t.Helper()
	var got, want []string
	for _, x := range m.Tensors {
		got = append(got, x.Name)
	}
	for _, x := range ts {
		want = append(want, x.Name)
		if g := m.Tensor(x.Name); g == nil || !bytes.Equal(g.Data, x.Data) {
			t.Fatalf("tensor %q did not load back with its bytes", x.Name)
		}
	}
	slices.Sort(got)
	slices.Sort(want)
	if !slices.Equal(got, want) {
		t.Fatalf("loaded names %q, saved %q", got, want)
	}
	if len(meta) != len(m.Metadata) {
		t.Fatalf("metadata %q, saved %q", m.Metadata, meta)
	}
	for k, v := range meta {
		if m.Metadata[k] != v {
			t.Fatalf("metadata %q = %q, saved %q", k, m.Metadata[k], v)
		}
	}
}

// TestIndexNamesTwice loads indexes whose JSON names a tensor twice (as
// SaveSharded wrote names that were not UTF-8: both became w\ufffd), a
// metadata key twice, or a name that is not UTF-8: each is
// ErrInvalidIndex, where encoding/json kept the last entry and the load
// returned fewer tensors than the index lists, or a name it made up.
func TestIndexNamesTwice(t *testing.T) {
	rng := rand.New(rand.NewPCG(39, 40))
	dir := t.TempDir()
	for i, name := range []string{"w\ufffd", "v"} {
		p := filepath.Join(dir, []string{"s1.safetensors", "s2.safetensors"}[i])
		if err := Save(context.Background(), p, []SaveTensor{f32Tensor(rng, name, 1+rng.IntN(30))}, nil); err != nil {
			t.Fatal(err)
		}
	}
	for name, body := range map[string]string{
		"tensor twice":    `{"weight_map":{"w\ufffd":"s1.safetensors","w\ufffd":"s2.safetensors"}}`,
		"escaped twice":   `{"weight_map":{"v":"s2.safetensors","\u0076":"s2.safetensors"}}`,
		"metadata twice":  `{"metadata":{"total_size":1,"total_size":2},"weight_map":{"v":"s2.safetensors"}}`,
		"weight_map x2":   `{"weight_map":{"v":"s2.safetensors"},"weight_map":{"w\ufffd":"s1.safetensors"}}`,
		"not UTF-8":       "{\"weight_map\":{\"w\xff\":\"s1.safetensors\"}}",
		"lone surrogate":  `{"weight_map":{"w\ud800":"s1.safetensors"}}`,
		"not UTF-8 value": "{\"metadata\":{\"k\":\"\xfe\"},\"weight_map\":{\"v\":\"s2.safetensors\"}}",
	} {
		p := filepath.Join(dir, "m.safetensors.index.json")
		if err := os.WriteFile(p, []byte(body), 0o644); err != nil {
			t.Fatal(err)
		}
		m, err := LoadIndexHost(context.Background(), p, nil)
		if !errors.Is(err, ErrInvalidIndex) {
			n := -1
			if m != nil {
				n = len(m.Tensors)
				m.Close()
			}
			t.Errorf("%s: %v (%d tensors), want ErrInvalidIndex", name, err, n)
		}
	}
	// The same files, each name once, load whole.
	p := filepath.Join(dir, "ok.safetensors.index.json")
	os.WriteFile(p, []byte(`{"weight_map":{"w\ufffd":"s1.safetensors","v":"s2.safetensors"}}`), 0o644)
	m, err := LoadIndexHost(context.Background(), p, nil)
	if err != nil || len(m.Tensors) != 2 || m.Tensor("w\ufffd") == nil {
		t.Fatalf("the good index: %v", err)
	}
	m.Close()
}
