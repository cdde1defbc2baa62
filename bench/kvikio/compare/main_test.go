package main

import (
	"bytes"
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"
)

// writeInputs writes a kvik report per (size, threads) and KvikIO lines for
// the same cells, KvikIO at kvikio times kvik's rate.
func writeInputs(t *testing.T, dir string, sizes []int64, threads []int, kvikio float64) (string, string) {
	t.Helper()
	var kv, kio bytes.Buffer
	for _, size := range sizes {
		for _, n := range threads {
			rep := map[string]any{"size_bytes": size, "kvik_version": "test", "results": []map[string]any{
				{"op": "read", "path": "storage ceiling", "memory": "host", "threads": 16, "median_gbps": 50.0, "ceiling": "storage"},
				{"op": "read", "path": "naive os.File", "memory": "device", "threads": 1, "median_gbps": 2.0},
				{"op": "read", "path": "kvik host", "memory": "host", "threads": n, "median_gbps": float64(n), "min_gbps": 0.5, "max_gbps": float64(n) + 1},
				{"op": "read", "path": "kvik posix+bounce", "memory": "device", "threads": n, "median_gbps": float64(2 * n)},
			}}
			b, _ := json.MarshalIndent(rep, "", "  ")
			kv.Write(bytes.ReplaceAll(b, []byte("\n"), nil))
			kv.WriteByte('\n')
			for _, m := range []struct {
				mem, path string
				rate      float64
			}{{"host", "kvikio host", float64(n)}, {"device", "kvikio posix+bounce", float64(2 * n)}} {
				fmt.Fprintf(&kio, `{"tool":"kvikio","size_bytes":%d,"op":"read","path":%q,"memory":%q,"threads":%d,"seconds":[1,2,3],"median_gbps":%g,"min_gbps":1,"max_gbps":99,"verified":true}`+"\n",
					size, m.path, m.mem, n, m.rate*kvikio)
			}
		}
	}
	a, b := filepath.Join(dir, "kvik.jsonl"), filepath.Join(dir, "kvikio.jsonl")
	os.WriteFile(a, kv.Bytes(), 0o644)
	os.WriteFile(b, kio.Bytes(), 0o644)
	return a, b
}

func TestRunTableAndPlot(t *testing.T) {
	dir := t.TempDir()
	kv, kio := writeInputs(t, dir, []int64{64 << 20, 16 << 20}, []int{4, 1}, 0.5)
	var out bytes.Buffer
	svg := filepath.Join(dir, "p.svg")
	if err := run(&out, kv, kio, svg); err != nil {
		t.Fatal(err)
	}
	lines := strings.Split(out.String(), "\n")
	var rows []string
	for _, l := range lines {
		if strings.HasPrefix(l, "| read") {
			rows = append(rows, l)
		}
	}
	// device before host, then size, then workers; ceilings and naive are
	// not cells.
	want := []string{
		"| read | device | 16 MiB | 1 | 2.0 (0.0-0.0) | 1.0 (1.0-99.0) | 2.00 |",
		"| read | device | 16 MiB | 4 | 8.0 (0.0-0.0) | 4.0 (1.0-99.0) | 2.00 |",
		"| read | device | 64 MiB | 1 |",
		"| read | device | 64 MiB | 4 |",
		"| read | host | 16 MiB | 1 | 1.0 (0.5-2.0) | 0.5 (1.0-99.0) | 2.00 |",
	}
	if len(rows) != 8 {
		t.Fatalf("%d rows, want 8:\n%s", len(rows), out.String())
	}
	for i, w := range want {
		if !strings.HasPrefix(rows[i], w) {
			t.Errorf("row %d = %q, want prefix %q", i, rows[i], w)
		}
	}
	if !strings.Contains(out.String(), "8 cells, 0 with kvik below KvikIO; lowest ratio 2.00") {
		t.Errorf("summary missing:\n%s", out.String())
	}
	b, err := os.ReadFile(svg)
	if err != nil {
		t.Fatal(err)
	}
	for _, w := range []string{"<svg", "read, 16 MiB file", "read, 64 MiB file", "read against file size, 4 workers", "KvikIO device", "kvik host"} {
		if !bytes.Contains(b, []byte(w)) {
			t.Errorf("SVG lacks %q", w)
		}
	}
}

func TestRunSlower(t *testing.T) {
	dir := t.TempDir()
	kv, kio := writeInputs(t, dir, []int64{1 << 30}, []int{16}, 1.25)
	var out bytes.Buffer
	if err := run(&out, kv, kio, ""); err != nil {
		t.Fatal(err)
	}
	if !strings.Contains(out.String(), "2 cells, 2 with kvik below KvikIO; lowest ratio 0.80 (read device 1 GiB, 16 workers)") {
		t.Errorf("summary:\n%s", out.String())
	}
}

func TestRunErrors(t *testing.T) {
	dir := t.TempDir()
	kv, kio := writeInputs(t, dir, []int64{1 << 20}, []int{1}, 1)
	other, _ := writeInputs(t, t.TempDir(), []int64{2 << 20}, []int{1}, 1)
	bad := filepath.Join(dir, "bad.jsonl")
	os.WriteFile(bad, []byte("\n{\"op\":\"read\"}\nnot json\n"), 0o644)
	for name, args := range map[string][2]string{
		"no common cell": {other, kio},
		"bad line":       {kv, bad},
		"missing":        {kv, filepath.Join(dir, "missing")},
	} {
		if err := run(&bytes.Buffer{}, args[0], args[1], ""); err == nil {
			t.Errorf("%s: no error", name)
		} else if name == "bad line" && !strings.Contains(err.Error(), "bad.jsonl:3") {
			t.Errorf("%s: %v, want the file and line", name, err)
		}
	}
}
