// Command compare sets kvik bench results beside KvikIO's (from
// bench/kvikio/kvikio_bench) and prints a table of kvik/KvikIO ratios per
// cell (operation, memory, file size, workers); with --plot it also draws
// them. bench/kvikio/run.sh runs it; see bench/kvikio/README.md.
//
//	compare --kvik kvik.jsonl --kvikio kvikio.jsonl [--plot out.svg]
package main

import (
	"bufio"
	"cmp"
	"encoding/json"
	"errors"
	"flag"
	"fmt"
	"io"
	"os"
	"slices"
	"strings"
)

// row is one timed configuration of either tool.
type row struct {
	Op        string  `json:"op"`
	Path      string  `json:"path"`
	Memory    string  `json:"memory"`
	Threads   int     `json:"threads"`
	SizeBytes int64   `json:"size_bytes"`
	MedianGBs float64 `json:"median_gbps"`
	MinGBs    float64 `json:"min_gbps"`
	MaxGBs    float64 `json:"max_gbps"`
	Seconds   []float64
}

// kvikReport is the part of a kvik bench --json report that compare reads.
type kvikReport struct {
	SizeBytes   int64  `json:"size_bytes"`
	KvikVersion string `json:"kvik_version"`
	Device      string `json:"device"`
	Results     []row  `json:"results"`
}

// cell identifies one comparison.
type cell struct {
	op, memory string
	size       int64
	threads    int
}

// pair is a cell's two measurements.
type pair struct {
	cell
	kvik, kvikio row
}

func main() {
	kvikPath := flag.String("kvik", "", "kvik bench --json reports, one per line (`file`)")
	kvikioPath := flag.String("kvikio", "", "kvikio_bench results, one per line (`file`)")
	plotPath := flag.String("plot", "", "also draw the cells into this `file` (.svg or .png)")
	flag.Parse()
	if *kvikPath == "" || *kvikioPath == "" || flag.NArg() > 0 {
		fmt.Fprintln(os.Stderr, "usage: compare --kvik FILE --kvikio FILE [--plot FILE.svg]")
		os.Exit(2)
	}
	if err := run(os.Stdout, *kvikPath, *kvikioPath, *plotPath); err != nil {
		fmt.Fprintln(os.Stderr, "compare:", err)
		os.Exit(1)
	}
}

func run(w io.Writer, kvikPath, kvikioPath, plotPath string) error {
	kv, version, err := readKvik(kvikPath)
	if err != nil {
		return err
	}
	kio, err := readKvikIO(kvikioPath)
	if err != nil {
		return err
	}
	pairs := match(kv, kio)
	if len(pairs) == 0 {
		return errors.New("no cell was measured by both kvik and KvikIO")
	}
	fmt.Fprintf(w, "kvik %s vs KvikIO C++, median GB/s (min-max)\n\n", version)
	printTable(w, pairs)
	if plotPath != "" {
		return plotPairs(plotPath, pairs)
	}
	return nil
}

// readKvik reads kvik bench --json reports, one per line, and returns the
// rows of kvik's own paths.
func readKvik(path string) ([]row, string, error) {
	var rows []row
	var version string
	err := eachLine(path, func(line []byte) error {
		var r kvikReport
		if err := json.Unmarshal(line, &r); err != nil {
			return err
		}
		version = r.KvikVersion
		for _, x := range r.Results {
			if strings.HasPrefix(x.Path, "kvik ") {
				x.SizeBytes = r.SizeBytes
				rows = append(rows, x)
			}
		}
		return nil
	})
	return rows, version, err
}

// readKvikIO reads kvikio_bench's JSON lines.
func readKvikIO(path string) ([]row, error) {
	var rows []row
	err := eachLine(path, func(line []byte) error {
		var r row
		if err := json.Unmarshal(line, &r); err != nil {
			return err
		}
		rows = append(rows, r)
		return nil
	})
	return rows, err
}

// eachLine calls fn with each non-blank line of the file at path.
func eachLine(path string, fn func([]byte) error) error {
	f, err := os.Open(path)
	if err != nil {
		return err
	}
	defer f.Close()
	sc := bufio.NewScanner(f)
	sc.Buffer(make([]byte, 0, 1<<20), 64<<20)
	for n := 1; sc.Scan(); n++ {
		if len(strings.TrimSpace(sc.Text())) == 0 {
			continue
		}
		if err := fn(sc.Bytes()); err != nil {
			return fmt.Errorf("%s:%d: %w", path, n, err)
		}
	}
	return sc.Err()
}

// match pairs kvik's and KvikIO's rows of the same cell, in table order:
// reads before writes, device before host, then size and workers.
func match(kv, kio []row) []pair {
	key := func(r row) cell { return cell{r.Op, r.Memory, r.SizeBytes, r.Threads} }
	theirs := map[cell]row{}
	for _, r := range kio {
		theirs[key(r)] = r
	}
	var out []pair
	for _, r := range kv {
		if o, ok := theirs[key(r)]; ok {
			out = append(out, pair{key(r), r, o})
		}
	}
	slices.SortStableFunc(out, func(a, b pair) int {
		return cmp.Or(-cmp.Compare(a.op, b.op), cmp.Compare(a.memory, b.memory),
			cmp.Compare(a.size, b.size), cmp.Compare(a.threads, b.threads))
	})
	return out
}

func (p pair) ratio() float64 {
	if p.kvikio.MedianGBs == 0 {
		return 0
	}
	return p.kvik.MedianGBs / p.kvikio.MedianGBs
}

// printTable writes the pairs as a Markdown table and a one-line summary.
func printTable(w io.Writer, pairs []pair) {
	fmt.Fprintln(w, "| op | memory | size | workers | kvik GB/s | KvikIO GB/s | kvik / KvikIO |")
	fmt.Fprintln(w, "|---|---|---:|---:|---:|---:|---:|")
	below, worst := 0, pairs[0]
	for _, p := range pairs {
		fmt.Fprintf(w, "| %s | %s | %s | %d | %s | %s | %.2f |\n", p.op, p.memory, sizeText(p.size), p.threads,
			gbs(p.kvik), gbs(p.kvikio), p.ratio())
		if p.ratio() < 1 {
			below++
		}
		if p.ratio() < worst.ratio() {
			worst = p
		}
	}
	fmt.Fprintf(w, "\n%d cells, %d with kvik below KvikIO; lowest ratio %.2f (%s %s %s, %d workers)\n",
		len(pairs), below, worst.ratio(), worst.op, worst.memory, sizeText(worst.size), worst.threads)
}

func gbs(r row) string {
	return fmt.Sprintf("%.1f (%.1f-%.1f)", r.MedianGBs, r.MinGBs, r.MaxGBs)
}

// sizeText writes n bytes in MiB or GiB.
func sizeText(n int64) string {
	if n >= 1<<30 && n%(1<<30) == 0 {
		return fmt.Sprintf("%d GiB", n>>30)
	}
	if n%(1<<20) == 0 {
		return fmt.Sprintf("%d MiB", n>>20)
	}
	return fmt.Sprintf("%d B", n)
}
