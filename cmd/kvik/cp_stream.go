package main

import (
	"cmp"
	"context"
	"fmt"
	"io"
	"path/filepath"
	"slices"

	"golang.org/x/sync/errgroup"

	"github.com/kvikgo/kvik"
	"github.com/kvikgo/kvik/internal/crcsum"
	"github.com/kvikgo/kvik/internal/formatkit/tensorload"
	"github.com/kvikgo/kvik/safetensors"
	"github.com/kvikgo/kvik/torch"
)

// A checkpoint converted into a local safetensors file is streamed: each
// tensor's bytes read from the checkpoint, summed and written at their
// place in the new file, a few jobs of convertSegment bytes at a time,
// so that the conversion holds about convertJobs*convertSegment bytes of
// host memory whatever the model's size (loaded whole, a 16 GB
// checkpoint took 16 GB, and 32 GB with the check reading it back). The
// check reads the file back the same way (verifySaved).

// convertSegment is the most bytes of the destination one job holds (a
// strided tensor, gathered whole, may make a larger one); convertJobs
// jobs run at once, each read and write parallel within (kvik's
// engine). Tests lower convertSegment.
var convertSegment int64 = 64 << 20

const convertJobs = 4

// streamRun is bytes [at, at+n) of tensor t's bytes (C order).
type streamRun struct {
	t     int
	at, n int64
}

// streamJob is runs that lie back to back in the file from dst on.
type streamJob struct {
	dst, n int64
	runs   []streamRun
}

// planStream cuts tensors of size[i] bytes at offset off[i] of a file
// into jobs of at most seg bytes of it, in the file's order: a tensor
// larger than seg into runs of seg bytes, unless whole(i) (it is
// gathered at once), small ones that follow one another into one job.
func planStream(off, size []int64, whole func(i int) bool, seg int64) []streamJob {
	order := make([]int, len(off))
	for i := range order {
		order[i] = i
	}
	slices.SortStableFunc(order, func(a, b int) int { return cmp.Compare(off[a], off[b]) })
	var jobs []streamJob
	add := func(r streamRun, dst int64) {
		if k := len(jobs) - 1; k >= 0 && jobs[k].dst+jobs[k].n == dst && jobs[k].n+r.n <= seg {
			jobs[k].runs = append(jobs[k].runs, r)
			jobs[k].n += r.n
			return
		}
		jobs = append(jobs, streamJob{dst: dst, n: r.n, runs: []streamRun{r}})
	}
	for _, i := range order {
		if size[i] <= seg || whole(i) {
			add(streamRun{i, 0, size[i]}, off[i])
			continue
		}
		for at := int64(0); at < size[i]; at += seg {
			add(streamRun{i, at, min(seg, size[i]-at)}, off[i]+at)
		}
	}
	return jobs
}

// runSums holds the CRC-32C of every run of a stream's tensors, in
// order, and joins them into each tensor's.
type runSums struct {
	seg  int64
	runs [][]uint32 // per tensor, per run (at/seg)
	size []int64
}

// newRunSums holds the sums of the runs planStream makes of tensors of
// size bytes, with seg and whole.
func newRunSums(size []int64, seg int64, whole func(i int) bool) *runSums {
	s := &runSums{seg: seg, runs: make([][]uint32, len(size)), size: size}
	for i, n := range size {
		k := int64(1)
		if !whole(i) {
			k = max(1, (n+seg-1)/seg)
		}
		s.runs[i] = make([]uint32, k)
	}
	return s
}

// sum records the CRC-32C of b, run r's bytes.
func (s *runSums) sum(r streamRun, b []byte) {
	s.runs[r.t][r.at/s.seg] = crcsum.Castagnoli.Sum(0, b)
}

// tensor returns tensor i's CRC-32C: its runs' joined.
func (s *runSums) tensor(i int) uint32 {
	c := s.runs[i][0]
	for k := 1; k < len(s.runs[i]); k++ {
		c = crcsum.Castagnoli.Combine(c, s.runs[i][k], min(s.seg, s.size[i]-int64(k)*s.seg))
	}
	return c
}

// runStream calls do for each job with a buffer of its n bytes,
// convertJobs at once; the first error cancels the rest.
func runStream(parent context.Context, jobs []streamJob, do func(ctx context.Context, j *streamJob, buf []byte) error) error {
	g, ctx := errgroup.WithContext(parent)
	bufs := make(chan []byte, convertJobs)
	for range convertJobs {
		bufs <- nil
	}
	for k := range jobs {
		var buf []byte
		select {
		case buf = <-bufs:
		case <-ctx.Done():
		}
		if ctx.Err() != nil {
			break
		}
		j := &jobs[k]
		if int64(cap(buf)) < j.n {
			buf = make([]byte, max(j.n, min(convertSegment, 1<<20)))
		}
		g.Go(func() error {
			err := do(ctx, j, buf[:j.n])
			if int64(cap(buf)) > convertSegment {
				buf = nil // a large strided tensor's: not kept
			}
			bufs <- buf
			return err
		})
	}
	if err := g.Wait(); err != nil {
		return err
	}
	return parent.Err()
}

// readFull fills p from r at off: a short read is an error.
func readFull(ctx context.Context, r kvik.Reader, p []byte, off int64) error {
	if len(p) == 0 {
		return nil
	}
	n, err := r.PRead(ctx, p, off).Get()
	if err == nil && n < len(p) {
		err = fmt.Errorf("%s: %d bytes at %d, want %d: %w", r.Name(), n, off, len(p), io.ErrUnexpectedEOF)
	}
	return err
}

// streamed is what streamConvert did: the tensors converted, their bytes,
// each one's CRC-32C by name, and the tensors skipped.
type streamed struct {
	n       int
	size    int64
	sums    map[string]uint32
	skipped []string
}

// streamConvert converts the checkpoint r reads (the tensors names
// lists only, when not nil) into a new safetensors file at dst, a local
// path, streamed (see convertSegment), checked unless --verify=false.
func streamConvert(ctx context.Context, o *cpOptions, r kvik.Reader, dst string, names []string) (res streamed, err error) {
	changed := kvik.WatchFile(r)
	h, err := torch.ReadHeaderReader(ctx, r, nil)
	if err != nil {
		return res, err
	}
	ts, err := tensorload.Select(h.Tensors, func(t *torch.TensorInfo) string { return t.Name }, names, nil, torch.ErrNotFound)
	if err != nil {
		return res, err
	}
	save := make([]safetensors.SaveTensor, len(ts))
	sizes := make([]int64, len(ts))
	for i := range ts {
		t := &ts[i]
		if save[i], err = saveTensor(t); err != nil {
			return res, err
		}
		sizes[i] = t.NumElements() * int64(t.Dtype.Size())
		res.size += sizes[i]
	}
	hdr, offs, err := safetensors.EncodeHeader(save, map[string]string{"format": "pt"})
	if err != nil {
		return res, err
	}
	if err := kvik.MkdirAll(filepath.Dir(dst), 0o755, o.saveOptions()...); err != nil {
		return res, err
	}
	p, err := createPending(dst, 0) // 0: a replaced file keeps its mode and owner
	if err != nil {
		return res, err
	}
	defer p.Abort()
	if err := p.Reserve(int64(len(hdr)) + res.size); err != nil {
		return res, err
	}
	if _, err := p.PWrite(ctx, hdr, 0).Get(); err != nil {
		return res, err
	}
	seg := convertSegment
	strided := func(i int) bool { return !ts[i].Contiguous() }
	sums := newRunSums(sizes, seg, strided)
	jobs := planStream(offs, sizes, strided, seg)
	err = runStream(ctx, jobs, func(ctx context.Context, j *streamJob, buf []byte) error {
		at := int64(0)
		for _, run := range j.runs {
			b := buf[at : at+run.n]
			if err := readRun(ctx, r, &ts[run.t], run, b); err != nil {
				return fmt.Errorf("tensor %q: %w", ts[run.t].Name, err)
			}
			sums.sum(run, b)
			at += run.n
		}
		_, err := p.PWrite(ctx, buf, j.dst).Get()
		return err
	})
	if err == nil {
		err = changed() // a checkpoint written to meanwhile: its parts may disagree
	}
	if err != nil {
		return res, err
	}
	res.sums = make(map[string]uint32, len(ts))
	for i, t := range ts {
		res.sums[t.Name] = sums.tensor(i)
	}
	if o.verify {
		if err := verifyConverted(ctx, p, res.sums); err != nil {
			return res, err
		}
	}
	res.n, res.skipped = len(ts), h.Skipped
	return res, commit(p, o.sync)
}

// readRun reads run's bytes of t from r into b: straight from the file
// where t is contiguous there, else its span gathered by its strides.
func readRun(ctx context.Context, r kvik.Reader, t *torch.TensorInfo, run streamRun, b []byte) error {
	if t.Contiguous() {
		return readFull(ctx, r, b, t.Offset+run.at)
	}
	x := torch.Tensor{TensorInfo: *t}
	x.Data = make([]byte, t.Size)
	if err := readFull(ctx, r, x.Data, t.Offset); err != nil {
		return err
	}
	d, err := x.Dense()
	if err == nil {
		copy(b, d)
	}
	return err
}

// verifySaved reads back the safetensors file r reads, streamed as the
// conversion wrote it, and compares each tensor's CRC-32C with sums.
func verifySaved(ctx context.Context, r kvik.Reader, sums map[string]uint32) error {
	name := r.Name()
	h, err := safetensors.ReadHeaderReader(ctx, r, nil)
	if err != nil {
		return fmt.Errorf("verify: %w", err)
	}
	if len(h.Tensors) != len(sums) {
		return fmt.Errorf("verify: %s holds %d tensors, %d were saved", name, len(h.Tensors), len(sums))
	}
	offs, sizes := make([]int64, len(h.Tensors)), make([]int64, len(h.Tensors))
	for i, t := range h.Tensors {
		offs[i], sizes[i] = h.DataOffset+t.Begin, t.Size()
	}
	seg := convertSegment
	split := func(int) bool { return false }
	got := newRunSums(sizes, seg, split)
	err = runStream(ctx, planStream(offs, sizes, split, seg), func(ctx context.Context, j *streamJob, buf []byte) error {
		if err := readFull(ctx, r, buf, j.dst); err != nil {
			return err
		}
		at := int64(0)
		for _, run := range j.runs {
			got.sum(run, buf[at:at+run.n])
			at += run.n
		}
		return nil
	})
	if err != nil {
		return fmt.Errorf("verify: %w", err)
	}
	for i, t := range h.Tensors {
		want, ok := sums[t.Name]
		if c := got.tensor(i); !ok || c != want {
			return fmt.Errorf("verify: %s: tensor %q has CRC-32C %08x, the bytes saved %08x", name, t.Name, c, want)
		}
	}
	return nil
}
