package benchplot

import (
	"bytes"
	"encoding/xml"
	"errors"
	"image/png"
	"io"
	"math"
	"os"
	"path/filepath"
	"strings"
	"testing"
)

// synthetic returns n panels: a workers sweep of two paths with a ceiling,
// and size sweeps.
func synthetic(n int) []Panel {
	var ps []Panel
	for i := range n {
		p := Panel{Title: "panel " + string(rune('A'+i)), X: Workers}
		if i%2 == 1 {
			p.X = Bytes
		}
		xs := []float64{1, 4, 16, 32}
		if p.X == Bytes {
			xs = []float64{16 << 20, 64 << 20, 1 << 30, 4 << 30}
		}
		p.Series = []Series{
			{Name: "kvik host", X: xs, Y: []float64{5.2, 16.6, 42.9, 42.1}},
			{Name: "KvikIO host", X: xs, Y: []float64{4.1, 18.0, 42.4, 41.5}, Color: 1, Dash: 1},
			{Name: "storage ceiling", X: []float64{16}, Y: []float64{44.5}, Color: 2, Reference: true},
		}
		ps = append(ps, p)
	}
	return ps
}

// svgTexts parses an SVG document and returns its root element name and
// the contents of its text elements.
func svgTexts(t *testing.T, doc []byte) (string, []string) {
	t.Helper()
	dec := xml.NewDecoder(bytes.NewReader(doc))
	var root string
	var texts []string
	inText := false
	for {
		tok, err := dec.Token()
		if errors.Is(err, io.EOF) {
			break
		}
		if err != nil {
			t.Fatalf("SVG is not XML: %v", err)
		}
		switch v := tok.(type) {
		case xml.StartElement:
			if root == "" {
				root = v.Name.Local
			}
			inText = v.Name.Local == "text"
		case xml.CharData:
			if inText {
				texts = append(texts, strings.TrimSpace(string(v)))
			}
		case xml.EndElement:
			inText = false
		}
	}
	return root, texts
}

func TestRenderSVG(t *testing.T) {
	panels := synthetic(3)
	var buf bytes.Buffer
	if err := Render(&buf, "svg", panels); err != nil {
		t.Fatal(err)
	}
	root, texts := svgTexts(t, buf.Bytes())
	if root != "svg" {
		t.Fatalf("root element %q, want svg", root)
	}
	count := map[string]int{}
	for _, s := range texts {
		count[s]++
	}
	for _, want := range []string{"panel A", "panel B", "panel C", "GB/s", "workers", "file size", "16 MiB", "4 GiB", "32"} {
		if count[want] == 0 {
			t.Errorf("SVG lacks text %q; has %q", want, texts)
		}
	}
	// Each series is in the legend of each of the three panels.
	for _, want := range []string{"kvik host", "KvikIO host", "storage ceiling"} {
		if count[want] != 3 {
			t.Errorf("legend entry %q appears %d times, want 3", want, count[want])
		}
	}
}

func TestRenderPNG(t *testing.T) {
	for _, n := range []int{1, 2, 3, 6} {
		var buf bytes.Buffer
		if err := Render(&buf, "png", synthetic(n)); err != nil {
			t.Fatal(err)
		}
		img, err := png.Decode(&buf)
		if err != nil {
			t.Fatalf("%d panels: PNG does not decode: %v", n, err)
		}
		w, h := PixelSize(n)
		if b := img.Bounds(); b.Dx() != w || b.Dy() != h {
			t.Errorf("%d panels: image %dx%d, want %dx%d", n, b.Dx(), b.Dy(), w, h)
		}
		cols, rows := min(n, 2), (n+1)/2
		if want := int(math.Ceil(5 * DPI * float64(cols))); w != want {
			t.Errorf("%d panels: width %d, want %d", n, w, want)
		}
		if want := int(math.Ceil(3.5 * DPI * float64(rows))); h != want {
			t.Errorf("%d panels: height %d, want %d", n, h, want)
		}
		// Not a blank image: lines and text darken some pixels.
		dark := 0
		for y := 0; y < h; y += 2 {
			for x := 0; x < w; x += 2 {
				if r, _, _, _ := img.At(x, y).RGBA(); r < 0x8000 {
					dark++
				}
			}
		}
		if dark < 100 {
			t.Errorf("%d panels: only %d dark pixels", n, dark)
		}
	}
}

func TestSave(t *testing.T) {
	dir := t.TempDir()
	for _, name := range []string{"a.svg", "b.PNG"} {
		path := filepath.Join(dir, name)
		if err := Save(path, synthetic(2)); err != nil {
			t.Fatal(err)
		}
		b, err := os.ReadFile(path)
		if err != nil {
			t.Fatal(err)
		}
		if strings.HasSuffix(name, "svg") {
			if root, _ := svgTexts(t, b); root != "svg" {
				t.Errorf("%s: root %q", name, root)
			}
		} else if _, err := png.Decode(bytes.NewReader(b)); err != nil {
			t.Errorf("%s: %v", name, err)
		}
	}
	err := Save(filepath.Join(dir, "c.pdf"), synthetic(1))
	if !errors.Is(err, ErrFormat) {
		t.Errorf("Save .pdf: %v, want ErrFormat", err)
	}
	if _, err := os.Stat(filepath.Join(dir, "c.pdf")); !errors.Is(err, os.ErrNotExist) {
		t.Error("Save .pdf created a file")
	}
}

func TestRenderErrors(t *testing.T) {
	bad := func(mut func(*Series)) []Panel {
		ps := synthetic(1)
		mut(&ps[0].Series[0])
		return ps
	}
	cases := map[string]struct {
		panels []Panel
		format string
		want   error
	}{
		"no panels":  {nil, "svg", ErrEmpty},
		"format":     {synthetic(1), "gif", ErrFormat},
		"empty":      {[]Panel{{Title: "x"}}, "svg", ErrEmpty},
		"short y":    {bad(func(s *Series) { s.Y = s.Y[:2] }), "png", nil},
		"NaN":        {bad(func(s *Series) { s.Y[1] = math.NaN() }), "svg", nil},
		"negative":   {bad(func(s *Series) { s.Y[1] = -1 }), "svg", nil},
		"zero x log": {bad(func(s *Series) { s.X = []float64{0, 4, 16, 32} }), "svg", nil},
	}
	for name, c := range cases {
		err := Render(io.Discard, c.format, c.panels)
		if err == nil {
			t.Errorf("%s: no error", name)
		} else if c.want != nil && !errors.Is(err, c.want) {
			t.Errorf("%s: %v, want %v", name, err, c.want)
		}
	}
}

func TestSizeLabel(t *testing.T) {
	for n, want := range map[float64]string{
		512: "512 B", 4096: "4 KiB", 16 << 20: "16 MiB", 1.5 * (1 << 20): "1.5 MiB", 1 << 30: "1 GiB", 4 << 30: "4 GiB",
	} {
		if got := SizeLabel(n); got != want {
			t.Errorf("SizeLabel(%v) = %q, want %q", n, got, want)
		}
	}
}

func TestRenderReferenceOnly(t *testing.T) {
	p := Panel{Title: "ceilings", Series: []Series{{Name: "pcie ceiling", X: []float64{16}, Y: []float64{55}, Reference: true}}}
	if err := Render(io.Discard, "svg", []Panel{p}); err != nil {
		t.Errorf("a panel of one reference line: %v", err)
	}
	p.Series[0].X[0] = 0
	if err := Render(io.Discard, "svg", []Panel{p}); err == nil {
		t.Error("a reference line at x=0 on a log axis: no error")
	}
}
