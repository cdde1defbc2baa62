package main

import (
	"fmt"
	"slices"

	"github.com/kvikgo/kvik/internal/benchplot"
)

// plotPairs draws the cells: per read size, GB/s against workers; reads
// and writes against file size at the worker count they share. kvik is
// one color and KvikIO another; device memory solid, host memory dashed.
func plotPairs(path string, pairs []pair) error {
	return benchplot.Save(path, pairPanels(pairs))
}

// pairPanels builds the panels of plotPairs.
func pairPanels(pairs []pair) []benchplot.Panel {
	var panels []benchplot.Panel
	for _, size := range distinct(pairs, func(p pair) int64 { return p.size }, "read") {
		p := benchplot.Panel{Title: "read, " + sizeText(size) + " file", X: benchplot.Workers}
		p.Series = seriesOf(pairs, func(q pair) (float64, bool) {
			return float64(q.threads), q.op == "read" && q.size == size
		})
		panels = append(panels, p)
	}
	for _, op := range []string{"read", "write"} {
		threads := distinct(pairs, func(p pair) int { return p.threads }, op)
		if len(threads) == 0 {
			continue
		}
		// The largest worker count at or below 16: the default and the
		// one writes are measured with.
		t := threads[0]
		for _, x := range threads {
			if x <= 16 {
				t = x
			}
		}
		p := benchplot.Panel{Title: fmt.Sprintf("%s against file size, %d workers", op, t), X: benchplot.Bytes}
		p.Series = seriesOf(pairs, func(q pair) (float64, bool) {
			return float64(q.size), q.op == op && q.threads == t
		})
		if len(p.Series) > 0 {
			panels = append(panels, p)
		}
	}
	return panels
}

// seriesOf returns kvik's and KvikIO's series of the selected pairs, per
// memory; x gives a pair's X and whether it belongs.
func seriesOf(pairs []pair, x func(pair) (float64, bool)) []benchplot.Series {
	var out []benchplot.Series
	for dash, memory := range []string{"device", "host"} {
		kv := benchplot.Series{Name: "kvik " + memory, Color: 0, Dash: dash}
		kio := benchplot.Series{Name: "KvikIO " + memory, Color: 1, Dash: dash}
		for _, p := range pairs {
			if v, ok := x(p); ok && p.memory == memory {
				kv.X, kv.Y = append(kv.X, v), append(kv.Y, p.kvik.MedianGBs)
				kio.X, kio.Y = append(kio.X, v), append(kio.Y, p.kvikio.MedianGBs)
			}
		}
		if len(kv.X) > 0 {
			out = append(out, kv, kio)
		}
	}
	return out
}

// distinct returns the sorted distinct values of key over the pairs of op.
func distinct[T int | int64](pairs []pair, key func(pair) T, op string) []T {
	var out []T
	for _, p := range pairs {
		if p.op == op {
			out = append(out, key(p))
		}
	}
	slices.Sort(out)
	return slices.Compact(out)
}
