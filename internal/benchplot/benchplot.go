// Package benchplot draws benchmark throughput charts (GB/s against workers
// or file size) as SVG or PNG with gonum.org/v1/plot. kvik bench --plot and
// bench/kvikio/compare use it.
package benchplot

import (
	"cmp"
	"errors"
	"fmt"
	"image/color"
	"io"
	"math"
	"os"
	"path/filepath"
	"slices"
	"strings"

	"gonum.org/v1/plot"
	"gonum.org/v1/plot/plotter"
	"gonum.org/v1/plot/plotutil"
	"gonum.org/v1/plot/vg"
	"gonum.org/v1/plot/vg/draw"
	"gonum.org/v1/plot/vg/vgimg"
	"gonum.org/v1/plot/vg/vgsvg"
)

// Panel size, and the resolution of PNG output.
const (
	PanelWidth  = 5 * vg.Inch
	PanelHeight = 3.5 * vg.Inch
	DPI         = 96
	maxColumns  = 2
)

// ErrFormat reports an output name that is neither .svg nor .png.
var ErrFormat = errors.New("benchplot: unsupported format (want .svg or .png)")

// ErrEmpty reports a chart with nothing to draw.
var ErrEmpty = errors.New("benchplot: nothing to plot")

// Series is one line of a panel: throughput Y (GB/s) at each X.
type Series struct {
	Name string
	X, Y []float64
	// Color and Dash index gonum's plotutil palettes, so that series of
	// several panels can share a style.
	Color, Dash int
	// Reference draws Y[0] as a horizontal line across the panel (a
	// ceiling or a baseline measured once).
	Reference bool
}

// Axis says what a panel's X is.
type Axis int

const (
	Workers Axis = iota // worker (thread) count
	Bytes               // file size in bytes
	GPUs                // GPU count, on a linear axis
)

// Panel is one chart.
type Panel struct {
	Title  string
	X      Axis
	Series []Series
}

// Size returns the size of an image of n panels: up to two columns of
// PanelWidth by PanelHeight.
func Size(n int) (w, h vg.Length) {
	cols := min(n, maxColumns)
	rows := (n + cols - 1) / cols
	return vg.Length(cols) * PanelWidth, vg.Length(rows) * PanelHeight
}

// PixelSize returns the size in pixels of the PNG of n panels.
func PixelSize(n int) (w, h int) {
	wl, hl := Size(n)
	return int(math.Ceil(wl.Dots(DPI))), int(math.Ceil(hl.Dots(DPI)))
}

// Save draws panels into the file at path, SVG or PNG by its extension.
func Save(path string, panels []Panel) error {
	format, err := FormatOf(path)
	if err != nil {
		return err
	}
	f, err := os.Create(path)
	if err != nil {
		return err
	}
	if err := Render(f, format, panels); err != nil {
		f.Close()
		return fmt.Errorf("%s: %w", path, err)
	}
	return f.Close()
}

// FormatOf returns "svg" or "png" for a file name, or ErrFormat.
func FormatOf(path string) (string, error) {
	switch ext := strings.ToLower(filepath.Ext(path)); ext {
	case ".svg", ".png":
		return ext[1:], nil
	}
	return "", fmt.Errorf("%s: %w", path, ErrFormat)
}

// Render draws panels as format ("svg" or "png") to w.
func Render(w io.Writer, format string, panels []Panel) error {
	if len(panels) == 0 {
		return ErrEmpty
	}
	width, height := Size(len(panels))
	var c vg.CanvasWriterTo
	switch format {
	case "svg":
		c = vgsvg.New(width, height)
	case "png":
		c = vgimg.PngCanvas{Canvas: vgimg.NewWith(vgimg.UseWH(width, height), vgimg.UseDPI(DPI), vgimg.UseBackgroundColor(color.White))}
	default:
		return ErrFormat
	}
	cols := min(len(panels), maxColumns)
	rows := (len(panels) + cols - 1) / cols
	grid := make([][]*plot.Plot, rows)
	for i := range grid {
		grid[i] = make([]*plot.Plot, cols)
	}
	for i, p := range panels {
		pl, err := p.plot()
		if err != nil {
			return fmt.Errorf("panel %q: %w", p.Title, err)
		}
		grid[i/cols][i%cols] = pl
	}
	tiles := draw.Tiles{Rows: rows, Cols: cols, PadX: vg.Millimeter, PadY: vg.Millimeter,
		PadTop: vg.Millimeter, PadBottom: vg.Millimeter, PadLeft: vg.Millimeter, PadRight: vg.Millimeter}
	canvases := plot.Align(grid, tiles, draw.New(c))
	for i := range grid {
		for j, pl := range grid[i] {
			if pl != nil {
				pl.Draw(canvases[i][j])
			}
		}
	}
	_, err := c.WriteTo(w)
	return err
}

// plot builds the gonum plot of p.
func (p Panel) plot() (*plot.Plot, error) {
	xs := p.xValues()
	if len(xs) == 0 {
		return nil, ErrEmpty
	}
	if xs[0] <= 0 {
		return nil, fmt.Errorf("x %v is not positive (the X axis is logarithmic)", xs[0])
	}
	pl := plot.New()
	pl.Title.Text = p.Title
	pl.Y.Label.Text = "GB/s"
	pl.Y.Min = 0
	pl.Legend.Top, pl.Legend.Left = true, true
	pl.Legend.TextStyle.Font.Size = vg.Points(8)
	pl.Legend.Padding = vg.Points(1.5)
	lo, hi := xs[0], xs[len(xs)-1]
	switch p.X {
	case GPUs:
		pl.X.Label.Text = "GPUs"
		lo, hi = lo-0.5, hi+0.5
	default:
		pl.X.Label.Text = "workers"
		if p.X == Bytes {
			pl.X.Label.Text = "file size"
		}
		if lo == hi {
			lo, hi = lo/2, hi*2
		}
		pl.X.Scale = plot.LogScale{}
	}
	pl.X.Min, pl.X.Max = lo, hi
	pl.X.Tick.Marker = p.ticks(xs)
	pl.Add(plotter.NewGrid())
	ymax := 0.0
	for _, s := range p.Series {
		if len(s.X) != len(s.Y) || len(s.Y) == 0 {
			return nil, fmt.Errorf("series %q: %d x and %d y values", s.Name, len(s.X), len(s.Y))
		}
		if err := addSeries(pl, s, lo, hi); err != nil {
			return nil, err
		}
		ymax = max(ymax, slices.Max(s.Y))
	}
	// Headroom above the highest line for the legend.
	pl.Y.Max = ymax * (1.15 + 0.07*float64(len(p.Series)))
	return pl, nil
}

// addSeries adds one line, with markers unless it is a reference line.
func addSeries(pl *plot.Plot, s Series, lo, hi float64) error {
	for _, y := range s.Y {
		if math.IsNaN(y) || math.IsInf(y, 0) || y < 0 {
			return fmt.Errorf("series %q: invalid throughput %v", s.Name, y)
		}
	}
	if s.Reference {
		l, err := plotter.NewLine(plotter.XYs{{X: lo, Y: s.Y[0]}, {X: hi, Y: s.Y[0]}})
		if err != nil {
			return err
		}
		l.Color = plotutil.Color(s.Color)
		l.Dashes = plotutil.Dashes(s.Dash + 1)
		pl.Add(l)
		pl.Legend.Add(s.Name, l)
		return nil
	}
	xys := make(plotter.XYs, len(s.X))
	for i := range s.X {
		if s.X[i] <= 0 {
			return fmt.Errorf("series %q: x %v is not positive", s.Name, s.X[i])
		}
		xys[i] = plotter.XY{X: s.X[i], Y: s.Y[i]}
	}
	slices.SortFunc(xys, func(a, b plotter.XY) int { return cmp.Compare(a.X, b.X) })
	l, pts, err := plotter.NewLinePoints(xys)
	if err != nil {
		return err
	}
	l.Color = plotutil.Color(s.Color)
	l.Dashes = plotutil.Dashes(s.Dash)
	pts.Color = l.Color
	pts.Shape = plotutil.Shape(s.Color)
	pl.Add(l, pts)
	pl.Legend.Add(s.Name, l, pts)
	return nil
}

// xValues returns the sorted distinct X values of the non-reference series.
func (p Panel) xValues() []float64 {
	var xs []float64
	for _, s := range p.Series {
		if !s.Reference {
			xs = append(xs, s.X...)
		}
	}
	if len(xs) == 0 {
		for _, s := range p.Series {
			xs = append(xs, s.X...)
		}
	}
	slices.Sort(xs)
	return slices.Compact(xs)
}

// ticks marks each measured X, labelled as a count or a size.
func (p Panel) ticks(xs []float64) plot.ConstantTicks {
	t := make(plot.ConstantTicks, len(xs))
	for i, x := range xs {
		t[i] = plot.Tick{Value: x, Label: fmt.Sprint(x)}
		if p.X == Bytes {
			t[i].Label = SizeLabel(x)
		}
	}
	return t
}

// SizeLabel writes a byte count in KiB, MiB or GiB.
func SizeLabel(n float64) string {
	for _, u := range []struct {
		name string
		size float64
	}{{"GiB", 1 << 30}, {"MiB", 1 << 20}, {"KiB", 1 << 10}} {
		if n >= u.size {
			return strings.TrimSuffix(strings.TrimRight(fmt.Sprintf("%.1f", n/u.size), "0"), ".") + " " + u.name
		}
	}
	return fmt.Sprintf("%.0f B", n)
}
