package main

import (
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"os"
	"slices"
	"strings"

	"github.com/kvikgo/kvik/internal/benchplot"
)

// plotReports draws the results of one or more kvik bench runs into path
// (.svg or .png): per operation and file size, GB/s against workers for
// each kvik path, with the ceilings and the naive baseline as horizontal
// lines; and, when the runs cover several file sizes, GB/s against size.
func plotReports(path string, reports []benchReport) error {
	panels := reportPanels(reports)
	if len(panels) == 0 {
		return fmt.Errorf("--plot %s: %w", path, benchplot.ErrEmpty)
	}
	return benchplot.Save(path, panels)
}

// reportPanels turns reports into chart panels.
func reportPanels(reports []benchReport) []benchplot.Panel {
	var sizes []int64
	for _, r := range reports {
		sizes = append(sizes, r.SizeBytes)
	}
	slices.Sort(sizes)
	sizes = slices.Compact(sizes)
	st := newStyles()
	var panels []benchplot.Panel
	for _, op := range []string{"read", "write"} {
		for _, size := range sizes {
			if p, ok := workerPanel(reports, op, size, st); ok {
				panels = append(panels, p)
			}
		}
		if len(sizes) > 1 {
			if p, ok := sizePanel(reports, op, st); ok {
				panels = append(panels, p)
			}
		}
	}
	return panels
}

// styles hands each path the same color in every panel.
type styles map[string]int

func newStyles() styles { return styles{} }

func (s styles) color(path string) int {
	if c, ok := s[path]; ok {
		return c
	}
	s[path] = len(s)
	return s[path]
}

// isReference reports whether a row is measured once, not per worker count:
// a ceiling or the naive baseline.
func isReference(x benchResult) bool {
	return x.Ceiling != "" || strings.HasPrefix(x.Path, "naive")
}

// workerPanel is GB/s against workers for op on files of size bytes.
func workerPanel(reports []benchReport, op string, size int64, st styles) (benchplot.Panel, bool) {
	p := benchplot.Panel{X: benchplot.Workers}
	byPath := map[string]*benchplot.Series{}
	var order []string
	memory := ""
	for _, r := range reports {
		if r.SizeBytes != size {
			continue
		}
		memory = r.Memory
		for _, x := range r.Results {
			if x.Op != op {
				continue
			}
			s, ok := byPath[x.Path]
			if !ok {
				s = &benchplot.Series{Name: x.Path, Color: st.color(x.Path), Reference: isReference(x)}
				if s.Reference {
					s.Name = fmt.Sprintf("%s (%d thread%s)", x.Path, x.Threads, plural(x.Threads))
					s.Dash = len(order)
				}
				byPath[x.Path] = s
				order = append(order, x.Path)
			}
			if s.Reference && len(s.Y) > 0 {
				continue
			}
			s.X = append(s.X, float64(x.Threads))
			s.Y = append(s.Y, x.MedianGBs)
		}
	}
	for _, path := range order {
		p.Series = append(p.Series, *byPath[path])
	}
	p.Title = fmt.Sprintf("%s, %s file, %s memory", op, formatSize(size), memory)
	return p, len(p.Series) > 0
}

// sizePanel is GB/s against file size for op: each kvik path at its
// largest worker count, and the ceilings.
func sizePanel(reports []benchReport, op string, st styles) (benchplot.Panel, bool) {
	p := benchplot.Panel{X: benchplot.Bytes, Title: op + " against file size"}
	byName := map[string]*benchplot.Series{}
	var order []string
	lines := map[string]int{} // series per path so far: each gets its own dash
	for _, r := range reports {
		best := map[string]benchResult{}
		for _, x := range r.Results {
			if x.Op == op && (best[x.Path].Threads == 0 || x.Threads > best[x.Path].Threads) {
				best[x.Path] = x
			}
		}
		for _, x := range r.Results {
			if x.Op != op || best[x.Path].Threads != x.Threads {
				continue
			}
			name := fmt.Sprintf("%s (%d thread%s)", x.Path, x.Threads, plural(x.Threads))
			s, ok := byName[name]
			if !ok {
				s = &benchplot.Series{Name: name, Color: st.color(x.Path), Dash: lines[x.Path]}
				lines[x.Path]++
				byName[name] = s
				order = append(order, name)
			}
			if slices.Contains(s.X, float64(r.SizeBytes)) {
				continue // one point per size: the first report's
			}
			s.X = append(s.X, float64(r.SizeBytes))
			s.Y = append(s.Y, x.MedianGBs)
		}
	}
	for _, name := range order {
		p.Series = append(p.Series, *byName[name])
	}
	return p, len(p.Series) > 0
}

// readReports reads kvik bench --json output: one or more reports per
// file.
func readReports(paths []string) ([]benchReport, error) {
	var out []benchReport
	for _, path := range paths {
		f, err := os.Open(path)
		if err != nil {
			return nil, err
		}
		dec := json.NewDecoder(f)
		n := 0
		for {
			var r benchReport
			err := dec.Decode(&r)
			if errors.Is(err, io.EOF) {
				break
			}
			if err != nil {
				f.Close()
				return nil, fmt.Errorf("%s: report %d: %w", path, n+1, err)
			}
			if r.SizeBytes <= 0 || len(r.Results) == 0 {
				f.Close()
				return nil, fmt.Errorf("%s: report %d: not a kvik bench --json report (no size or results)", path, n+1)
			}
			out = append(out, r)
			n++
		}
		f.Close()
		if n == 0 {
			return nil, fmt.Errorf("%s: no kvik bench report", path)
		}
	}
	return out, nil
}
