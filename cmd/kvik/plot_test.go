package main

import (
	"bytes"
	"encoding/json"
	"encoding/xml"
	"errors"
	"image/png"
	"io"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"

	"github.com/kvikgo/kvik/internal/benchplot"
)

// syntheticReport is a device run of size bytes: ceilings, the naive
// baseline and two kvik paths at 1, 4 and 16 threads, for read and write.
func syntheticReport(size int64, scale float64) benchReport {
	r := benchReport{SizeBytes: size, Memory: "device"}
	for _, op := range []string{"read", "write"} {
		r.Results = append(r.Results,
			benchResult{Op: op, Path: "storage ceiling", Memory: "host", Threads: 16, MedianGBs: 40 * scale, Ceiling: "storage"},
			benchResult{Op: op, Path: "pcie ceiling", Memory: "device", Threads: 1, MedianGBs: 55 * scale, Ceiling: "pcie"},
			benchResult{Op: op, Path: "naive os.File", Memory: "device", Threads: 1, MedianGBs: 3 * scale})
		for _, n := range []int{1, 4, 16} {
			r.Results = append(r.Results,
				benchResult{Op: op, Path: "kvik host", Memory: "host", Threads: n, MedianGBs: float64(n) * 2.5 * scale},
				benchResult{Op: op, Path: "kvik posix+bounce", Memory: "device", Threads: n, MedianGBs: float64(n) * 2.1 * scale})
		}
	}
	return r
}

// seriesNames returns the names of a panel's series.
func seriesNames(p benchplot.Panel) []string {
	var out []string
	for _, s := range p.Series {
		out = append(out, s.Name)
	}
	return out
}

func TestReportPanelsOneSize(t *testing.T) {
	panels := reportPanels([]benchReport{syntheticReport(64<<20, 1)})
	if len(panels) != 2 {
		t.Fatalf("%d panels, want 2 (read, write)", len(panels))
	}
	want := []string{"storage ceiling (16 threads)", "pcie ceiling (1 thread)", "naive os.File (1 thread)", "kvik host", "kvik posix+bounce"}
	for i, op := range []string{"read", "write"} {
		p := panels[i]
		if p.X != benchplot.Workers || !strings.HasPrefix(p.Title, op+", 64 MiB file") {
			t.Errorf("panel %d: %q, axis %v", i, p.Title, p.X)
		}
		if got := seriesNames(p); !slices.Equal(got, want) {
			t.Errorf("panel %q series %q, want %q", p.Title, got, want)
		}
		for _, s := range p.Series {
			ref := s.Name[:4] != "kvik"
			if s.Reference != ref || (!ref && !slices.Equal(s.X, []float64{1, 4, 16})) {
				t.Errorf("series %+v: reference %v, want %v", s, s.Reference, ref)
			}
		}
		// The kvik host line holds the report's medians.
		if s := p.Series[3]; !slices.Equal(s.Y, []float64{2.5, 10, 40}) {
			t.Errorf("kvik host Y = %v", s.Y)
		}
	}
}

func TestReportPanelsSizeSweep(t *testing.T) {
	reports := []benchReport{syntheticReport(1<<30, 2), syntheticReport(16<<20, 1)}
	panels := reportPanels(reports)
	var titles []string
	for _, p := range panels {
		titles = append(titles, p.Title)
	}
	want := []string{"read, 16 MiB file, device memory", "read, 1 GiB file, device memory", "read against file size",
		"write, 16 MiB file, device memory", "write, 1 GiB file, device memory", "write against file size"}
	if !slices.Equal(titles, want) {
		t.Fatalf("panels %q, want %q", titles, want)
	}
	size := panels[2]
	if size.X != benchplot.Bytes {
		t.Errorf("size panel axis %v", size.X)
	}
	for _, s := range size.Series {
		if len(s.X) != 2 || s.Reference {
			t.Errorf("size series %+v: want a line over both sizes", s)
		}
	}
	// kvik paths at their largest worker count, in report order.
	i := slices.IndexFunc(size.Series, func(s benchplot.Series) bool { return s.Name == "kvik host (16 threads)" })
	if i < 0 || !slices.Equal(size.Series[i].X, []float64{1 << 30, 16 << 20}) || !slices.Equal(size.Series[i].Y, []float64{80, 40}) {
		t.Errorf("size panel series %+v", size.Series)
	}
}

// svgTextSet returns the text of every text element of an SVG document,
// failing the test when it is not XML with an svg root.
func svgTextSet(t *testing.T, doc []byte) map[string]bool {
	t.Helper()
	dec := xml.NewDecoder(bytes.NewReader(doc))
	texts := map[string]bool{}
	root, in := "", false
	for {
		tok, err := dec.Token()
		if errors.Is(err, io.EOF) {
			break
		}
		if err != nil {
			t.Fatalf("not XML: %v", err)
		}
		switch v := tok.(type) {
		case xml.StartElement:
			if root == "" {
				root = v.Name.Local
			}
			in = v.Name.Local == "text"
		case xml.CharData:
			if in {
				texts[strings.TrimSpace(string(v))] = true
			}
		case xml.EndElement:
			in = false
		}
	}
	if root != "svg" {
		t.Fatalf("root element %q, want svg", root)
	}
	return texts
}

func TestPlotReportsFiles(t *testing.T) {
	dir := t.TempDir()
	reports := []benchReport{syntheticReport(16<<20, 1), syntheticReport(4<<30, 3)}
	svg := filepath.Join(dir, "r.svg")
	if err := plotReports(svg, reports); err != nil {
		t.Fatal(err)
	}
	b, _ := os.ReadFile(svg)
	texts := svgTextSet(t, b)
	for _, w := range []string{"kvik host", "kvik posix+bounce", "storage ceiling (16 threads)", "pcie ceiling (1 thread)",
		"read against file size", "write, 4 GiB file, device memory", "kvik posix+bounce (16 threads)"} {
		if !texts[w] {
			t.Errorf("SVG lacks %q", w)
		}
	}
	pngPath := filepath.Join(dir, "r.png")
	if err := plotReports(pngPath, reports); err != nil {
		t.Fatal(err)
	}
	f, _ := os.Open(pngPath)
	defer f.Close()
	img, err := png.Decode(f)
	if err != nil {
		t.Fatal(err)
	}
	w, h := benchplot.PixelSize(6)
	if b := img.Bounds(); b.Dx() != w || b.Dy() != h {
		t.Errorf("PNG %v, want %dx%d", b, w, h)
	}
	if err := plotReports(filepath.Join(dir, "none.svg"), nil); !errors.Is(err, benchplot.ErrEmpty) {
		t.Errorf("no reports: %v, want ErrEmpty", err)
	}
}

func TestReadReports(t *testing.T) {
	dir := t.TempDir()
	write := func(name string, v ...any) string {
		var buf bytes.Buffer
		for _, x := range v {
			b, _ := json.MarshalIndent(x, "", "  ")
			buf.Write(append(b, '\n'))
		}
		p := filepath.Join(dir, name)
		os.WriteFile(p, buf.Bytes(), 0o644)
		return p
	}
	two := write("two.json", syntheticReport(1<<20, 1), syntheticReport(2<<20, 1))
	one := write("one.json", syntheticReport(3<<20, 1))
	got, err := readReports([]string{two, one})
	if err != nil {
		t.Fatal(err)
	}
	if len(got) != 3 || got[0].SizeBytes != 1<<20 || got[2].SizeBytes != 3<<20 || len(got[1].Results) != 18 {
		t.Errorf("read %d reports: %+v", len(got), got)
	}
	empty := write("empty.json")
	notReport := write("other.json", map[string]int{"x": 1})
	garbage := filepath.Join(dir, "garbage.json")
	os.WriteFile(garbage, []byte("{not json"), 0o644)
	for _, p := range []string{empty, notReport, garbage, filepath.Join(dir, "missing.json")} {
		if _, err := readReports([]string{p}); err == nil || !strings.Contains(err.Error(), filepath.Base(p)) {
			t.Errorf("%s: error %v, want one naming the file", filepath.Base(p), err)
		}
	}
}

func TestBenchPlotCLI(t *testing.T) {
	dir := t.TempDir()
	src := randomFile(t, 3<<20+17)
	svg := filepath.Join(dir, "bench.svg")
	r := runKvik(t, nil, "bench", "--file", src, "--memory", "host", "--threads", "1,2", "--repeats", "1", "--plot", svg).expect(t, 0)
	if !strings.Contains(r.stdout, "kvik host") {
		t.Errorf("no table with --plot:\n%s", r.stdout)
	}
	b, err := os.ReadFile(svg)
	if err != nil {
		t.Fatal(err)
	}
	texts := svgTextSet(t, b)
	for _, w := range []string{"kvik host", "storage ceiling (16 threads)", "naive os.File (1 thread)", "GB/s", "workers"} {
		if !texts[w] {
			t.Errorf("SVG lacks %q", w)
		}
	}

	// A size sweep: two --json runs drawn with --plot-from.
	var inputs []string
	for _, size := range []string{"1MiB", "2MiB"} {
		r := runKvik(t, nil, "bench", "--file", src, "--size", size, "--memory", "host", "--threads", "1,2", "--repeats", "1", "--json").expect(t, 0)
		p := filepath.Join(dir, size+".json")
		if err := os.WriteFile(p, []byte(r.stdout), 0o644); err != nil {
			t.Fatal(err)
		}
		inputs = append(inputs, p)
	}
	pngPath := filepath.Join(dir, "sweep.png")
	runKvik(t, nil, "bench", "--plot", pngPath, "--plot-from", strings.Join(inputs, ",")).expect(t, 0)
	f, err := os.Open(pngPath)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	img, err := png.Decode(f)
	if err != nil {
		t.Fatal(err)
	}
	w, h := benchplot.PixelSize(3) // read at 1 MiB, at 2 MiB, against size
	if b := img.Bounds(); b.Dx() != w || b.Dy() != h {
		t.Errorf("PNG %v, want %dx%d", b, w, h)
	}

	runKvik(t, nil, "bench", "--file", src, "--plot", filepath.Join(dir, "x.gif")).expect(t, 2).oneLineError(t, ".svg or .png")
	runKvik(t, nil, "bench", "--plot-from", inputs[0]).expect(t, 2).oneLineError(t, "needs --plot")
	runKvik(t, nil, "bench", "--plot", svg, "--plot-from", src).expect(t, 1)
}
