package main

import (
	"fmt"
	"io"
	"runtime"
	"slices"
	"strconv"
	"strings"
	"time"

	"golang.org/x/sys/unix"

	"github.com/kvikgo/kvik"
	"github.com/kvikgo/kvik/internal/blockdev"
)

// benchReport is the output of kvik bench; its JSON form is the output of
// kvik bench --json.
type benchReport struct {
	Date        string `json:"date"`
	KvikVersion string `json:"kvik_version"`
	GoVersion   string `json:"go_version"`
	CPUs        int    `json:"cpus"`
	MemTotal    int64  `json:"mem_total_bytes"`
	Device      string `json:"device"`
	Memory      string `json:"memory"`
	MemoryNote  string `json:"memory_note,omitempty"`
	CuFile      string `json:"cufile"`
	File        string `json:"file"`
	Temporary   bool   `json:"temporary"`
	SizeBytes   int64  `json:"size_bytes"`
	FSType      string `json:"fs_type"`
	BlockDevice string `json:"block_device"`
	DirectIO    bool   `json:"direct_io"`
	Repeats     int    `json:"repeats"`
	Warmup      int    `json:"warmup,omitempty"`
	// WarmupAuto is --warmup auto; WarmupRuns the fewest and the most
	// untimed repetitions a row took to settle.
	WarmupAuto  bool          `json:"warmup_auto,omitempty"`
	WarmupRuns  [2]int        `json:"warmup_runs,omitzero"`
	TaskSize    int           `json:"task_size"`
	BounceSize  int           `json:"bounce_buffer_size"`
	DirectRead  bool          `json:"auto_direct_io_read"`
	DirectWrite bool          `json:"auto_direct_io_write"`
	ReadPolicy  string        `json:"read_policy"`
	PageCache   string        `json:"page_cache"`
	Results     []benchResult `json:"results"`
	Notes       []string      `json:"notes,omitempty"`

	dropChecked bool // dropCache checked that dropping works
}

// benchResult is one row: a configuration and its timings.
type benchResult struct {
	Op             string    `json:"op"`
	Path           string    `json:"path"`
	Memory         string    `json:"memory"`
	Threads        int       `json:"threads"`
	Seconds        []float64 `json:"seconds"`
	MedianGBs      float64   `json:"median_gbps"`
	MinGBs         float64   `json:"min_gbps"`
	MaxGBs         float64   `json:"max_gbps"`
	Ceiling        string    `json:"ceiling,omitempty"`
	RatioToCeiling *float64  `json:"ratio_to_ceiling,omitempty"`
	// PairedCeilingGBs is the median of the storage ceiling timed just
	// before each repetition of this row (--paired-ceiling); the row's
	// ratio to the storage ceiling uses it instead of the ceiling's row.
	PairedCeilingGBs float64  `json:"paired_ceiling_gbps,omitempty"`
	SpeedupNaive     *float64 `json:"speedup_vs_naive,omitempty"`
	Verified         bool     `json:"verified"`
}

// newReport fills in the header of a run.
func (b *bench) newReport() benchReport {
	total, _ := memInfo()
	d, _ := kvik.GetDefaults()
	r := benchReport{
		Date: time.Now().UTC().Format(time.RFC3339), KvikVersion: kvikVersion(), GoVersion: runtime.Version(),
		CPUs: runtime.NumCPU(), MemTotal: total, Device: "none", Memory: "host", MemoryNote: b.mem.note,
		CuFile: kvik.ProbeCuFile().Reason, File: b.path, Temporary: b.tmp, SizeBytes: b.size,
		Repeats: b.o.repeats, Warmup: b.o.warmup, TaskSize: d.TaskSize, BounceSize: d.BounceBufferSize,
		DirectRead: d.AutoDirectIORead, DirectWrite: d.AutoDirectIOWrite, ReadPolicy: d.ReadPolicy().String(),
	}
	b.applyFlags(&r)
	if b.mem.device {
		r.Device, r.Memory = b.mem.gpu.String(), "device"
	}
	r.FSType, _ = blockdev.FSType(b.path)
	if dev, err := blockdev.ForPath(b.path); err == nil {
		r.BlockDevice = blockInfo{Name: dev.Name, Parent: dev.Parent, Device: fmt.Sprintf("%d:%d", dev.Major, dev.Minor), Rotational: dev.Rotational}.describe()
	}
	if fd, err := unix.Open(b.path, unix.O_RDONLY|unix.O_DIRECT|unix.O_CLOEXEC, 0); err == nil {
		r.DirectIO = true
		unix.Close(fd)
	}
	r.PageCache = b.pageCacheState()
	return r
}

// applyFlags records the settings that flags override.
func (b *bench) applyFlags(r *benchReport) {
	if b.o.taskSize.set {
		r.TaskSize = int(b.o.taskSize.n)
	}
	if b.o.bounce.set {
		r.BounceSize = int(b.o.bounce.n)
	}
	if b.o.direct.set {
		r.DirectRead, r.DirectWrite = b.o.direct.v, b.o.direct.v
		r.ReadPolicy = yesNo(b.o.direct.v, "direct", "buffered")
	}
}

// pageCacheState describes the page cache before the reads.
func (b *bench) pageCacheState() string {
	if b.o.cache.mode != "" {
		return b.o.cache.describe()
	}
	if b.o.dropCache {
		return "dropped before every read"
	}
	res, total, err := kvik.PageCacheInfo(b.path, 0, b.size)
	if err != nil || total == 0 {
		return "warm (not dropped)"
	}
	return fmt.Sprintf("not dropped, %.0f%% of the file resident at start", 100*float64(res)/float64(total))
}

// note adds a line under the table.
func (r *benchReport) note(format string, args ...any) {
	msg := oneLine(fmt.Sprintf(format, args...))
	if !slices.Contains(r.Notes, msg) {
		r.Notes = append(r.Notes, msg)
	}
}

// warmedUp records a row's untimed repetitions under --warmup auto.
func (r *benchReport) warmedUp(n int) {
	if !r.WarmupAuto {
		r.WarmupAuto, r.WarmupRuns = true, [2]int{n, n}
	}
	r.WarmupRuns = [2]int{min(r.WarmupRuns[0], n), max(r.WarmupRuns[1], n)}
}

// add records the timings of case c, which moved size bytes per run, and
// those of the storage ceiling paired with them (none without
// --paired-ceiling).
func (r *benchReport) add(c benchCase, size int64, secs, paired []float64, verified bool) {
	row := benchResult{
		Op: c.op, Path: c.path, Memory: c.memory, Threads: c.threads, Seconds: secs,
		MedianGBs: medianGBs(size, secs), MinGBs: gbps(size, slices.Max(secs)), MaxGBs: gbps(size, slices.Min(secs)),
		Ceiling: c.ceiling, Verified: verified,
	}
	if len(paired) > 0 {
		row.PairedCeilingGBs = medianGBs(size, paired)
	}
	r.Results = append(r.Results, row)
}

// medianGBs returns the median of the throughputs of runs that moved size
// bytes in secs (not empty): for an even count, the mean of the middle two
// throughputs, which the time halfway between the middle two times is not.
func medianGBs(size int64, secs []float64) float64 {
	rates := make([]float64, len(secs))
	for i, t := range secs {
		rates[i] = gbps(size, t)
	}
	return median(rates)
}

// median returns the median of secs (not empty).
func median(secs []float64) float64 {
	sorted := slices.Sorted(slices.Values(secs))
	if n := len(sorted); n%2 == 0 {
		return (sorted[n/2-1] + sorted[n/2]) / 2
	}
	return sorted[len(sorted)/2]
}

// finish computes each row's ratio to its ceiling (storage for host
// memory; the lower of storage and PCIe for device memory) and to the
// naive baseline.
func (r *benchReport) finish() {
	for i := range r.Results {
		row := &r.Results[i]
		if row.Ceiling != "" {
			continue
		}
		if c := r.ceilingFor(row); c > 0 {
			row.RatioToCeiling = ptr(row.MedianGBs / c)
		}
		if n := r.find(row.Op, func(x benchResult) bool { return x.Path[:5] == "naive" }); n > 0 && row.Path[:5] != "naive" {
			row.SpeedupNaive = ptr(row.MedianGBs / n)
		}
	}
	if !strings.HasPrefix(r.PageCache, "dropped") && !strings.HasPrefix(r.PageCache, "half") && !strings.HasPrefix(r.PageCache, "whole") && r.hasOp("read") {
		r.note("reads did not drop the page cache, so buffered paths may read from memory and pass the storage ceiling (use --drop-cache)")
	}
}

// ceilingFor returns the median of the ceiling that bounds row: its paired
// storage ceiling where it has one.
func (r *benchReport) ceilingFor(row *benchResult) float64 {
	storage := r.find(row.Op, func(x benchResult) bool { return x.Ceiling == "storage" })
	if row.PairedCeilingGBs > 0 {
		storage = row.PairedCeilingGBs
	}
	pcie := r.find(row.Op, func(x benchResult) bool { return x.Ceiling == "pcie" })
	if row.Memory == "device" && pcie > 0 && (storage == 0 || pcie < storage) {
		return pcie
	}
	return storage
}

// find returns the median GB/s of the first row of op matching match.
func (r *benchReport) find(op string, match func(benchResult) bool) float64 {
	for _, x := range r.Results {
		if x.Op == op && match(x) {
			return x.MedianGBs
		}
	}
	return 0
}

func (r *benchReport) hasOp(op string) bool {
	return r.find(op, func(benchResult) bool { return true }) > 0
}

func ptr(f float64) *float64 { return &f }

// print writes the report as a table, or as JSON with --json.
func (b *bench) print() error {
	if b.o.json {
		return writeJSON(b.e.stdout, b.report)
	}
	b.report.print(b.e.stdout)
	return nil
}

// print writes the header, the table, a summary and the notes.
func (r *benchReport) print(w io.Writer) {
	fmt.Fprintf(w, "kvik bench %s  kvik %s (%s), %d CPUs, %s memory\n", r.Date, r.KvikVersion, r.GoVersion, r.CPUs, formatSize(r.MemTotal))
	mem := r.Memory + " memory"
	if r.MemoryNote != "" {
		mem += " (" + r.MemoryNote + ")"
	}
	fmt.Fprintf(w, "device: %s; %s\n", r.Device, mem)
	fmt.Fprintf(w, "file:   %s%s, %s, %s on %s, O_DIRECT %s\n", r.File, yesNo(r.Temporary, " (temporary)", ""),
		formatSize(r.SizeBytes), r.FSType, orNone(r.BlockDevice), yesNo(r.DirectIO, "yes", "no"))
	warm := ""
	if r.Warmup > 0 {
		warm = fmt.Sprintf(" after %d untimed", r.Warmup)
	}
	if r.WarmupAuto {
		runs := fmt.Sprint(r.WarmupRuns[0])
		if r.WarmupRuns[1] != r.WarmupRuns[0] {
			runs += fmt.Sprintf("-%d", r.WarmupRuns[1])
		}
		warm = fmt.Sprintf(" after %s untimed (--warmup auto: until three agreed within 5%%, at most %d or %v a row)", runs, warmupMax, warmupTime)
	}
	reads, writes := r.hasOp("read"), r.hasOp("write")
	setup := fmt.Sprintf("%s%s, task %s, bounce %s", repeatsText(r.Repeats), warm, formatSize(int64(r.TaskSize)), formatSize(int64(r.BounceSize)))
	if reads {
		setup += fmt.Sprintf(", kvik read policy %s", r.ReadPolicy)
	}
	if writes {
		setup += fmt.Sprintf(", O_DIRECT write %v", r.DirectWrite)
	}
	if reads {
		setup += ", page cache " + r.PageCache
	}
	if writes {
		setup += "; writes include fsync"
	}
	fmt.Fprintf(w, "setup:  %s\n", setup)
	if r.Memory == "device" {
		fmt.Fprintf(w, "cuFile: %s\n", shortenTried(r.CuFile))
	}
	fmt.Fprintln(w)
	rows := [][]string{{"op", "path", "memory", "threads", "median GB/s", "min", "max", "vs ceiling", "vs naive"}}
	for _, x := range r.Results {
		rows = append(rows, []string{x.Op, x.Path, x.Memory, strconv.Itoa(x.Threads),
			fmt.Sprintf("%.2f", x.MedianGBs), fmt.Sprintf("%.2f", x.MinGBs), fmt.Sprintf("%.2f", x.MaxGBs),
			ratioText(x.RatioToCeiling, x.Ceiling), ratioText(x.SpeedupNaive, "")})
	}
	printTable(w, rows, 3)
	r.printSummary(w)
	for _, n := range r.Notes {
		fmt.Fprintf(w, "note: %s\n", shortenTried(n))
	}
}

// printSummary names the fastest kvik path of each operation.
func (r *benchReport) printSummary(w io.Writer) {
	fmt.Fprintln(w)
	for _, op := range []string{"read", "write"} {
		var best *benchResult
		for i, x := range r.Results {
			if x.Op == op && len(x.Path) > 4 && x.Path[:4] == "kvik" && (best == nil || x.MedianGBs > best.MedianGBs) {
				best = &r.Results[i]
			}
		}
		if best == nil {
			continue
		}
		line := fmt.Sprintf("%s: best kvik path %s with %d thread%s, %.2f GB/s", op, best.Path, best.Threads, plural(best.Threads), best.MedianGBs)
		// Without baselines (--no-baselines) there is nothing to compare.
		var vs []string
		if best.SpeedupNaive != nil {
			vs = append(vs, timesText(best.SpeedupNaive)+" the naive baseline")
		}
		if best.RatioToCeiling != nil {
			vs = append(vs, timesText(best.RatioToCeiling)+" its ceiling")
		}
		if len(vs) > 0 {
			line += ": " + strings.Join(vs, ", ")
		}
		fmt.Fprintln(w, line)
	}
}

// repeatsText says how many timed runs each row had and what its median
// is: "3 repeats (median of 3)", "2 repeats (median of 2: the mean of both)".
func repeatsText(n int) string {
	switch {
	case n == 1:
		return "1 repeat (no median: one run)"
	case n == 2:
		return "2 repeats (median of 2: the mean of both GB/s)"
	case n%2 == 0:
		return fmt.Sprintf("%d repeats (median of %d: the mean of the middle two GB/s)", n, n)
	}
	return fmt.Sprintf("%d repeats (median of %d)", n, n)
}

func ratioText(v *float64, ceiling string) string {
	if ceiling != "" {
		return "(" + ceiling + ")"
	}
	if v == nil {
		return "-"
	}
	return strconv.FormatFloat(*v, 'f', 2, 64)
}

func timesText(v *float64) string {
	if v == nil {
		return "n/a"
	}
	return strconv.FormatFloat(*v, 'f', 2, 64) + "x"
}

func orNone(s string) string {
	if s == "" {
		return "no block device"
	}
	return s
}

// printTable writes rows as columns two spaces apart, the columns before
// index firstRight aligned left and the rest (numbers) aligned right.
func printTable(w io.Writer, rows [][]string, firstRight int) {
	widths := make([]int, len(rows[0]))
	for _, row := range rows {
		for i, cell := range row {
			widths[i] = max(widths[i], len(cell))
		}
	}
	for _, row := range rows {
		var line strings.Builder
		for i, cell := range row {
			pad := strings.Repeat(" ", widths[i]-len(cell))
			if i >= firstRight {
				line.WriteString(pad + cell)
			} else {
				line.WriteString(cell + pad)
			}
			if i < len(row)-1 {
				line.WriteString("  ")
			}
		}
		fmt.Fprintln(w, strings.TrimRight(line.String(), " "))
	}
}

func plural(n int) string {
	if n == 1 {
		return ""
	}
	return "s"
}
