package main

import (
	"context"
	"net/url"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
	"unicode/utf8"

	"github.com/kvikgo/kvik/gguf"
	"github.com/kvikgo/kvik/safetensors"
	"github.com/kvikgo/kvik/zarr"
)

// Names a hostile file may hold: one sets the terminal's title, one
// erases the line and fakes a table row, one reverses the text after it.
const (
	titleName = "w\x1b]0;owned\a"
	rowName   = "w\x1b[2K\r  fake.weight  F32  [1]  4"
	bidiName  = "w\u202egpj.exe"
)

// TestDisplay keeps ordinary names as they are and quotes, reversibly,
// any with a control character (C0, DEL, C1 alone or in UTF-8), a
// bidirectional override or isolate, a zero-width or separator
// character, or a byte that is not UTF-8; escapeUnprintable escapes the
// same characters where they stand.
func TestDisplay(t *testing.T) {
	for _, s := range []string{"model.layers.0.self_attn.q_proj.weight", "权重.bias", "café", "a b", "x'y", `a\b`, "🙂", "blk.0.ffn_up"} {
		if got := display(s); got != s {
			t.Errorf("display(%q) = %q, want it unchanged", s, got)
		}
		if got := escapeUnprintable(s); got != s {
			t.Errorf("escapeUnprintable(%q) = %q, want it unchanged", s, got)
		}
	}
	for _, s := range []string{titleName, rowName, bidiName, "a\tb", "a\nb", "a\x7f", "a\u009b31m", "a\x9b31m", "a\xff",
		"a\u2066b\u2069", "a\u200bb", "a\u2028b", "a\ufffd", "", `"quoted"`} {
		got := display(s)
		if back, err := strconv.Unquote(got); err != nil || back != s {
			t.Errorf("display(%q) = %q, not s quoted (%v)", s, got, err)
		}
		checkPrintable(t, "display("+strconv.Quote(s)+")", got)
		checkPrintable(t, "escapeUnprintable("+strconv.Quote(s)+")", escapeUnprintable(s))
	}
	if got := escapeUnprintable("open " + titleName + ": no such file"); got != `open w\x1b]0;owned\a: no such file` {
		t.Errorf("escapeUnprintable = %q", got)
	}
	long := strings.Repeat("é", 60) // 120 bytes: a cut at byte 100 would split none
	if got := displayValue(long); !strings.HasPrefix(got, `"`+strings.Repeat("é", 50)+`"...`) {
		t.Errorf("displayValue of a long value = %q", got)
	}
	if got := displayValue("x" + long); strings.Contains(got, `\x`) {
		t.Errorf("displayValue cut a character in two: %q", got)
	}
}

// checkPrintable fails the test if out holds anything a terminal acts
// on besides the newline: a C0 or C1 control, DEL, a bidirectional
// override or isolate, or bytes that are not UTF-8.
func checkPrintable(t *testing.T, what, out string) {
	t.Helper()
	if !utf8.ValidString(out) {
		t.Errorf("%s: output is not UTF-8: %q", what, out)
		return
	}
	for _, r := range out {
		if (r < ' ' && r != '\n') || (r >= 0x7f && r <= 0x9f) || (r >= 0x202a && r <= 0x202e) || (r >= 0x2066 && r <= 0x2069) {
			t.Errorf("%s: output holds %U:\n%q", what, r, out)
			return
		}
	}
}

// TestInfoHostileNames lists a safetensors file, a sharded checkpoint, a
// GGUF file and a Zarr store whose names, keys and values hold terminal
// escape sequences: kvik info prints each quoted, with no control
// character, and the ordinary names beside them as they are. An error
// naming a hostile path is escaped too.
func TestInfoHostileNames(t *testing.T) {
	ctx := context.Background()
	dir := t.TempDir()
	data := []byte{1, 2, 3, 4}
	ts := []safetensors.SaveTensor{
		{Name: "model.layers.0.weight", Dtype: safetensors.F32, Shape: []int64{1}, Data: data},
		{Name: titleName, Dtype: safetensors.U8, Shape: []int64{4}, Data: data},
		{Name: rowName, Dtype: safetensors.U8, Shape: []int64{2}, Data: data[:2]},
		{Name: bidiName, Dtype: safetensors.U8, Shape: []int64{1}, Data: data[:1]},
	}
	meta := map[string]string{titleName: "v", "format": rowName, "ok": "pt"}
	st := filepath.Join(dir, "m.safetensors")
	if err := safetensors.Save(ctx, st, ts, meta); err != nil {
		t.Fatal(err)
	}
	index, err := safetensors.SaveSharded(ctx, filepath.Join(dir, "ckpt"), ts, meta, &safetensors.ShardOptions{Name: "m\x1b]0;owned\a", MaxShardSize: 4})
	if err != nil {
		t.Fatal(err)
	}
	var gm gguf.Metadata
	for k, v := range map[string]string{"general.architecture": titleName, rowName: "x", "general.name": bidiName} {
		if err := gm.Set(k, v); err != nil {
			t.Fatal(err)
		}
	}
	gg := filepath.Join(dir, "m.gguf")
	gts := []gguf.SaveTensor{{Name: "blk.0.ffn_up", Type: gguf.I8, Shape: []int64{4}, Data: data}, {Name: titleName, Type: gguf.I8, Shape: []int64{4}, Data: data}}
	if err := gguf.Save(ctx, gg, gts, gm); err != nil {
		t.Fatal(err)
	}
	zs := filepath.Join(dir, "s.zarr")
	s, err := zarr.NewDirStore(zs)
	if err != nil {
		t.Fatal(err)
	}
	for _, p := range []string{"plain", titleName, "g/" + rowName} {
		if _, err := zarr.Create(ctx, s, p, zarr.Metadata{Shape: []int{4}, ChunkShape: []int{2}, DataType: zarr.DataType{Kind: zarr.Uint, Size: 1}}); err != nil {
			t.Fatal(err)
		}
	}
	os.WriteFile(filepath.Join(zs, "g", rowName, "zarr.json"), []byte(`{"zarr_format":3,"node_type":"array","codecs":[{"name":"x\u001b]0;owned\u0007"}]}`), 0o644)

	for _, c := range []struct {
		name  string
		plain []string // ordinary names, printed as they are
	}{
		{st, []string{"model.layers.0.weight", "metadata ok = pt"}},
		{index, []string{"model.layers.0.weight"}},
		{gg, []string{"blk.0.ffn_up"}},
		{zs, []string{"plain"}},
	} {
		r := runKvik(t, nil, "info", c.name)
		checkPrintable(t, "kvik info "+c.name, r.stdout+r.stderr)
		for _, w := range append(c.plain, strconv.Quote(titleName)) {
			if !strings.Contains(r.stdout, w) {
				t.Errorf("kvik info %q lacks %q:\n%s%s", c.name, w, r.stdout, r.stderr)
			}
		}
	}
	r := runKvik(t, nil, "info", filepath.Join(dir, "missing"+titleName+".safetensors")).expect(t, exitFailure)
	checkPrintable(t, "kvik info of a missing file", r.stderr)
	r.oneLineError(t, `missingw\x1b]0;owned\a.safetensors`)
}

// TestCpHostileShardNames downloads a sharded checkpoint whose shard
// files' names hold escape sequences: each copy's line names them
// quoted.
func TestCpHostileShardNames(t *testing.T) {
	ctx := context.Background()
	src := t.TempDir()
	ts := []safetensors.SaveTensor{
		{Name: "a", Dtype: safetensors.U8, Shape: []int64{3}, Data: []byte{1, 2, 3}},
		{Name: "b", Dtype: safetensors.U8, Shape: []int64{2}, Data: []byte{4, 5}},
	}
	index, err := safetensors.SaveSharded(ctx, src, ts, nil, &safetensors.ShardOptions{Name: "m" + rowName, MaxShardSize: 3})
	if err != nil {
		t.Fatal(err)
	}
	dst := t.TempDir() + "/"
	r := runKvik(t, nil, "cp", "--memory", "host", serveDir(t, src)+"/"+url.PathEscape(filepath.Base(index)), dst).expect(t, exitOK)
	checkPrintable(t, "kvik cp", r.stdout+r.stderr)
	if !strings.Contains(r.stdout, `mw\x1b[2K\r`) || !strings.Contains(r.stdout, "copied 3 files") {
		t.Errorf("kvik cp output:\n%s", r.stdout)
	}
	shard := safetensors.ShardFileName("m"+rowName, 1, 2)
	sameFile(t, filepath.Join(src, shard), filepath.Join(dst, shard))
}
