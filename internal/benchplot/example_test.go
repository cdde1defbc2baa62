package benchplot_test

import (
	"bytes"
	"fmt"

	"github.com/kvikgo/kvik/internal/benchplot"
)

// Two paths against worker counts, with a ceiling as a horizontal line.
func ExampleRender() {
	panel := benchplot.Panel{
		Title: "read, 1 GiB file",
		X:     benchplot.Workers,
		Series: []benchplot.Series{
			{Name: "kvik host", X: []float64{1, 4, 16}, Y: []float64{5.2, 15.6, 40.9}},
			{Name: "kvik posix+bounce", X: []float64{1, 4, 16}, Y: []float64{6.2, 14.7, 42.9}, Color: 1},
			{Name: "pcie ceiling", X: []float64{1}, Y: []float64{55}, Color: 2, Reference: true},
		},
	}
	var svg bytes.Buffer
	if err := benchplot.Render(&svg, "svg", []benchplot.Panel{panel}); err != nil {
		fmt.Println(err)
		return
	}
	fmt.Println(bytes.Contains(svg.Bytes(), []byte(">kvik posix+bounce</text>")))
	w, h := benchplot.PixelSize(1)
	fmt.Printf("as PNG: %dx%d pixels\n", w, h)
	// Output:
	// true
	// as PNG: 480x336 pixels
}
