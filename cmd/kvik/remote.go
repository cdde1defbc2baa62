package main

import (
	"context"
	"fmt"
	"hash/crc32"
	"io"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"text/tabwriter"
	"time"

	"github.com/kvikgo/kvik"
	"github.com/kvikgo/kvik/internal/hostmem"
)

// isURL reports whether a kvik argument names a remote object rather than
// a local path.
func isURL(s string) bool {
	i := strings.Index(s, "://")
	return i > 0 && !strings.ContainsAny(s[:i], "/.")
}

var castagnoli = crc32.MakeTable(crc32.Castagnoli)

// remoteCopy copies between a URL and a local file through host memory:
// URL -> file with parallel ranged GETs, file -> s3:// with a parallel
// multipart upload. The destination is read back and compared by CRC-32C
// unless --verify=false; an upload reports its own time apart from the
// read-back's.
func remoteCopy(e *env, o *cpOptions, src, dst string) error {
	ctx := e.ctx
	start := time.Now()
	var size int64
	var sum uint32
	dst, err := destPath(src, dst)
	if err != nil {
		return err
	}
	if !isURL(src) {
		u, err := uploadFile(ctx, src, dst, o.verify)
		if err != nil {
			return err
		}
		fmt.Fprint(e.stdout, u.line(src, dst))
		return nil
	}
	size, sum, err = download(ctx, o, src, dst)
	if err != nil {
		return err
	}
	elapsed := time.Since(start)
	verified := "verified"
	if !o.verify {
		verified = "not verified"
	}
	fmt.Fprintf(e.stdout, "copied %s (%d bytes) %s -> %s in %.2f s, %.2f GB/s, %s, CRC-32C %08x\n",
		formatSize(size), size, display(redact(src)), display(redact(dst)), elapsed.Seconds(), gbps(size, elapsed.Seconds()), verified, sum)
	return nil
}

// download writes the object at url to the file path in chunks, through
// a temporary file renamed over path once complete and checked against
// the bytes received.
func download(ctx context.Context, o *cpOptions, url, path string) (int64, uint32, error) {
	h, err := kvik.OpenRemote(ctx, url)
	if err != nil {
		return 0, 0, err
	}
	defer h.Close()
	size, err := h.Size()
	if err != nil {
		return 0, 0, err
	}
	chunk := int64(defaultChunk)
	if o.chunk.set {
		chunk = o.chunk.n
	}
	buf := make([]byte, min(chunk, max(size, 1)))
	if err := kvik.MkdirAll(filepath.Dir(path), 0o755, o.saveOptions()...); err != nil {
		return 0, 0, err
	}
	out, err := createPending(path, 0)
	if err != nil {
		return 0, 0, err
	}
	defer out.Abort()
	var sum uint32
	for off := int64(0); off < size; off += int64(len(buf)) {
		p := buf[:min(int64(len(buf)), size-off)]
		if n, err := h.PRead(ctx, p, off).Get(); err != nil || n != len(p) {
			return 0, 0, transferred(len(p), opResult{n, err})
		}
		sum = crc32.Update(sum, castagnoli, p)
		if _, err := out.WriteAt(p, off); err != nil {
			return 0, 0, err
		}
	}
	if o.sync {
		if err := out.Sync(); err != nil {
			return 0, 0, err
		}
	}
	if o.verify {
		got, err := readerCRC(ctx, out)
		if err != nil {
			return 0, 0, err
		}
		if got != sum {
			return 0, 0, fmt.Errorf("verify: %s has CRC-32C %08x, the object %08x", path, got, sum)
		}
	}
	return size, sum, commit(out, o.sync)
}

// uploadStats is what an upload of kvik cp reports.
type uploadStats struct {
	size   int64
	sum    uint32        // CRC-32C of the bytes sent
	upload time.Duration // the upload alone
	verify time.Duration // the read-back and comparison; 0 when skipped
}

// line is the summary line of an upload from src to dst: the upload's
// own time and speed, then the verification's.
func (u uploadStats) line(src, dst string) string {
	s := fmt.Sprintf("copied %s (%d bytes) %s -> %s: uploaded in %.2f s, %.2f GB/s; ",
		formatSize(u.size), u.size, display(redact(src)), display(redact(dst)), u.upload.Seconds(), gbps(u.size, u.upload.Seconds()))
	if u.verify == 0 {
		return s + fmt.Sprintf("not verified; CRC-32C %08x of the bytes sent\n", u.sum)
	}
	return s + fmt.Sprintf("read back and verified in %.2f s, %.2f GB/s; CRC-32C %08x\n",
		u.verify.Seconds(), gbps(u.size, u.verify.Seconds()), u.sum)
}

// uploadFile uploads the file at path to url (s3:// or an S3 object
// URL) with kvik.UploadFileS3: the parts are read from the file (the
// page cache) into the requests as they are sent, so no copy of the file
// is held in memory, and their CRC-32C is computed as they go
// (kvik.WithUploadCRC32C). A file that shrinks meanwhile fails the
// upload. With verify it then reads the object back, signed as the
// upload, and compares its size and CRC-32C with the bytes sent.
func uploadFile(ctx context.Context, path, url string, verify bool) (uploadStats, error) {
	st, err := os.Stat(path)
	if err != nil {
		return uploadStats{}, err
	}
	u := uploadStats{size: st.Size()}
	start := time.Now()
	if err := kvik.UploadFileS3(ctx, url, path, kvik.WithUploadCRC32C(&u.sum)); err != nil {
		return uploadStats{}, err
	}
	u.upload = time.Since(start)
	if !verify {
		return u, nil
	}
	start = time.Now()
	// Signed, as the upload was: an http(s) URL alone would be read as
	// a public object.
	h, err := kvik.OpenS3URL(ctx, url)
	if err != nil {
		return uploadStats{}, err
	}
	defer h.Close()
	back, err := readerCRC(ctx, h)
	size, _ := h.Size()
	if err != nil || size != u.size || back != u.sum {
		return uploadStats{}, fmt.Errorf("verify: %s reads back %d of %d bytes (%v) or different bytes (CRC-32C %08x, sent %08x)",
			kvik.RedactURL(url), size, u.size, err, back, u.sum)
	}
	u.verify = max(time.Since(start), time.Nanosecond)
	return u, nil
}

// readerCRC reads the whole file or object in chunks and returns its
// CRC-32C, reading the next chunk while the last one is checksummed.
func readerCRC(ctx context.Context, h kvik.Reader) (uint32, error) {
	size, err := h.Size()
	if err != nil || size == 0 {
		return 0, err
	}
	chunk := min(size, defaultChunk/2)
	bufs := [2][]byte{make([]byte, chunk), make([]byte, chunk)}
	read := func(i int, off int64) ([]byte, *kvik.Future) {
		p := bufs[i%2][:min(chunk, size-off)]
		return p, h.PRead(ctx, p, off)
	}
	var sum uint32
	p, f := read(0, 0)
	for i, off := 0, int64(0); off < size; i++ {
		n, err := f.Get()
		if err == nil && n != len(p) {
			err = fmt.Errorf("read %d of %d bytes at %d: %w", n, len(p), off, io.ErrUnexpectedEOF)
		}
		if err != nil {
			return 0, err
		}
		cur := p
		if off += int64(len(cur)); off < size {
			p, f = read(i+1, off)
		}
		sum = crc32.Update(sum, castagnoli, cur)
	}
	return sum, nil
}

// remoteInfo prints what kvik info knows about a URL: the endpoint type
// it resolves to, the object's size and the HTTP settings.
func remoteInfo(e *env, url string, asJSON bool) error {
	h, err := kvik.OpenRemote(context.Background(), url)
	if err != nil {
		return err
	}
	defer h.Close()
	size, err := h.Size()
	if err != nil {
		return err
	}
	d, _ := kvik.GetDefaults()
	r := struct {
		URL          string `json:"url"`
		Endpoint     string `json:"endpoint"`
		Size         int64  `json:"size"`
		MaxAttempts  int    `json:"http_max_attempts"`
		TimeoutS     int64  `json:"http_timeout_s"`
		RetryCodes   string `json:"http_status_codes"`
		Threads      int    `json:"threads"`
		TaskSize     int    `json:"task_size"`
		ParallelGETs int64  `json:"parallel_gets"`
	}{h.URL(), h.EndpointType().String(), size, d.HTTPMaxAttempts, int64(d.HTTPTimeout / time.Second),
		d.HTTPStatusCodes.String(), d.NumThreads, d.TaskSize, (size + int64(d.TaskSize) - 1) / int64(d.TaskSize)}
	if asJSON {
		return writeJSON(e.stdout, r)
	}
	tw := tabwriter.NewWriter(e.stdout, 0, 4, 2, ' ', 0)
	fmt.Fprintf(tw, "URL\t%s\nEndpoint\t%s\nSize\t%s (%d bytes)\n", r.URL, r.Endpoint, formatSize(r.Size), r.Size)
	fmt.Fprintf(tw, "Reads\t%s of %s on %s\n", count(r.ParallelGETs, "ranged GET"), formatSize(int64(r.TaskSize)), count(r.Threads, "worker"))
	fmt.Fprintf(tw, "Retries\t%d attempts, %d s timeout, on HTTP %s\n", r.MaxAttempts, r.TimeoutS, r.RetryCodes)
	return tw.Flush()
}

// benchRemote times reads of the object at url: kvik's parallel ranged
// GETs into host memory, the whole object as one GET stream, and into
// device memory when there is a GPU. Untimed rounds first (--warmup, at
// least one) fault the host buffer in, open the connections and take the
// object's CRC-32C; then the rows take turns, --repeats rounds, each
// timing its read only, and every read is checked against that CRC after
// its timing. It reports each row's best and median, as bench/remote and
// BenchmarkRemoteVariants do.
func benchRemote(e *env, o *benchOptions) error {
	ctx := context.Background()
	h, err := kvik.OpenRemote(ctx, o.url)
	if err != nil {
		return err
	}
	defer h.Close()
	size, err := h.Size()
	if err != nil {
		return err
	}
	if o.size.set {
		size = min(size, o.size.n)
	}
	rows, cleanup, err := remoteRows(h, size)
	defer cleanup()
	if err != nil {
		return err
	}
	var want uint32
	for i := range max(o.warmup, 1) {
		for j, r := range rows {
			if err := r.run(); err != nil {
				return fmt.Errorf("%s: warm-up: %w", r.name, err)
			}
			sum, err := r.sum()
			if err != nil {
				return fmt.Errorf("%s: %w", r.name, err)
			}
			if i == 0 && j == 0 {
				want = sum
			} else if sum != want {
				return fmt.Errorf("%s: reads of %s differ (CRC-32C %08x, then %08x)", r.name, o.url, want, sum)
			}
		}
	}
	secs := make([][]float64, len(rows))
	for range o.repeats {
		for i, r := range rows {
			r.reset()
			t0 := time.Now()
			if err := r.run(); err != nil {
				return fmt.Errorf("%s: %w", r.name, err)
			}
			secs[i] = append(secs[i], time.Since(t0).Seconds())
			if sum, err := r.sum(); err != nil || sum != want {
				return fmt.Errorf("%s: read differs from the object (CRC-32C %08x, want %08x; %v)", r.name, sum, want, err)
			}
		}
	}
	d, _ := kvik.GetDefaults()
	fmt.Fprintf(e.stdout, "%s (%s, %s read), %s, task size %s, %s taking turns after %d warm-up\n",
		h.URL(), h.EndpointType(), formatSize(size), count(d.NumThreads, "worker"), formatSize(int64(d.TaskSize)), count(o.repeats, "repeat"), max(o.warmup, 1))
	tw := tabwriter.NewWriter(e.stdout, 0, 4, 2, ' ', 0)
	fmt.Fprintln(tw, "path\tbest GB/s\tmedian GB/s")
	for i, r := range rows {
		fmt.Fprintf(tw, "%s\t%.2f\t%.2f\n", r.name, gbps(size, slices.Min(secs[i])), gbps(size, median(secs[i])))
	}
	return tw.Flush()
}

// remoteRow is one row of benchRemote: a read of the object, what to do
// before it (untimed), and the CRC-32C of what it read.
type remoteRow struct {
	name  string
	run   func() error
	reset func()
	sum   func() (uint32, error)
}

// remoteRows returns benchRemote's rows for size bytes of h, and a
// function that frees what they hold.
func remoteRows(h *kvik.RemoteHandle, size int64) ([]remoteRow, func(), error) {
	var frees []func()
	cleanup := func() {
		for i := len(frees) - 1; i >= 0; i-- {
			frees[i]()
		}
	}
	if err := hostmem.Check(size, "benchmark buffer"); err != nil {
		return nil, nil, err // the server's claim: an error, not a fatal allocation
	}
	buf := make([]byte, size)
	// A read that writes nothing must not pass its check: clear its start.
	reset := func() { clear(buf[:min(size, 1<<20)]) }
	hostSum := func() (uint32, error) { return crc32.Checksum(buf, castagnoli), nil }
	read := func() error {
		_, err := h.ReadAt(buf, 0)
		return err
	}
	rows := []remoteRow{
		{"kvik parallel -> host", read, reset, hostSum},
		{"one GET stream -> host", func() error {
			restore, err := kvik.UpdateDefaults(func(d *kvik.Defaults) { d.TaskSize = int(max(size, 1)) })
			if err != nil {
				return err
			}
			defer restore()
			return read()
		}, reset, hostSum},
	}
	g, err := openGPU()
	if err != nil {
		return rows, cleanup, nil // no GPU: host rows only
	}
	frees = append(frees, g.close)
	dbuf, err := g.alloc(int(max(size, 1)))
	if err != nil {
		return nil, cleanup, err
	}
	frees = append(frees, func() { dbuf.Close() })
	rows = append(rows, remoteRow{"kvik parallel -> device", func() error {
		_, err := h.ReadDevice(dbuf.Ptr(), int(size), 0, 0)
		return err
	}, func() { g.clear(dbuf.Ptr(), int(min(size, 1<<20))) }, func() (uint32, error) {
		if err := g.dtoh(buf, dbuf.Ptr()); err != nil {
			return 0, err
		}
		return hostSum()
	}})
	return rows, cleanup, nil
}
