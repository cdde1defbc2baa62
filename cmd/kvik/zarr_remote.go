package main

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"hash/crc32"
	"net/url"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"text/tabwriter"
	"time"
	"unicode/utf8"

	"github.com/kvikgo/kvik"
	"github.com/kvikgo/kvik/cuda"
	"github.com/kvikgo/kvik/internal/hostmem"
	"github.com/kvikgo/kvik/internal/realpath"
	"github.com/kvikgo/kvik/npy"
	"github.com/kvikgo/kvik/zarr"
	"golang.org/x/sync/errgroup"
)

// isZarr reports whether a kvik argument names a Zarr store or array: a
// path or URL with a ".zarr" component, or a local directory holding Zarr
// metadata.
func isZarr(name string) bool {
	n := strings.TrimRight(name, "/")
	if strings.HasSuffix(n, ".zarr") || strings.Contains(n, ".zarr/") {
		return true
	}
	if isURL(name) {
		return false
	}
	for _, doc := range []string{"zarr.json", ".zarray", ".zgroup", ".zmetadata"} {
		if _, err := os.Stat(filepath.Join(name, doc)); err == nil {
			return true
		}
	}
	return false
}

// maxDocUsage is the help of --max-document.
const maxDocUsage = "Zarr: the largest metadata document (consolidated metadata) read from a remote store, `size` (default 64MiB)"

// zarrOptions returns the store options of a --max-document flag.
func zarrOptions(maxDoc *sizeFlag) []zarr.StoreOption {
	if !maxDoc.set {
		return nil
	}
	return []zarr.StoreOption{zarr.WithMaxDocumentSize(maxDoc.n)}
}

// zarrReadFlags are the flags of the Zarr stores that kvik cp and kvik
// bench read arrays from.
type zarrReadFlags struct {
	maxDoc      sizeFlag
	requests    int
	wholeShards bool
}

// register adds the flags to fs.
func (z *zarrReadFlags) register(fs *flag.FlagSet) {
	fs.Var(&z.maxDoc, "max-document", maxDocUsage)
	fs.IntVar(&z.requests, "requests", 0, "Zarr: GETs a remote store keeps in flight, a `count` (default zarr.DefaultMaxRequests: KVIKIO_NTHREADS, at least 32)")
	fs.BoolVar(&z.wholeShards, "whole-shards", false, "Zarr: read a shard of uncompressed chunks that a read wants all of with one GET of the whole object, however large (zarr.WithWholeShards: for servers that send whole objects faster than parts, as versitygw does)")
}

// set reports whether any of the flags was given.
func (z *zarrReadFlags) set() bool { return z.maxDoc.set || z.requests != 0 || z.wholeShards }

// validate checks the flags' values.
func (z *zarrReadFlags) validate() error {
	if z.requests < 0 {
		return usagef("--requests %d: want 1 or more (0: the default)", z.requests)
	}
	return nil
}

// options returns the store options the flags ask for.
func (z *zarrReadFlags) options() []zarr.StoreOption {
	opts := zarrOptions(&z.maxDoc)
	if z.requests != 0 {
		opts = append(opts, zarr.WithMaxRequests(z.requests))
	}
	if z.wholeShards {
		opts = append(opts, zarr.WithWholeShards())
	}
	return opts
}

// zarrArrayInfo is one array of kvik info's Zarr report.
type zarrArrayInfo struct {
	Path   string   `json:"path"`
	Format int      `json:"zarr_format"`
	Dtype  string   `json:"dtype"`
	Shape  []int    `json:"shape"`
	Chunks []int    `json:"chunks"`
	Codecs []string `json:"codecs"`
	Bytes  *int64   `json:"bytes"` // null for variable-length elements
	Error  string   `json:"error,omitempty"`
}

// zarrStoreInfo is kvik info's report for a Zarr store, local or remote.
type zarrStoreInfo struct {
	Store        string          `json:"store"`
	Endpoint     string          `json:"endpoint"`
	Consolidated bool            `json:"consolidated"`
	MaxRequests  int             `json:"max_requests,omitempty"`
	Zstd         codecInfo       `json:"zstd"`
	LZ4          codecInfo       `json:"lz4"`
	Deflate      codecInfo       `json:"deflate"`
	Arrays       []zarrArrayInfo `json:"arrays"`
}

// zarrInfo implements kvik info for a Zarr store or array.
func zarrInfo(e *env, name string, asJSON bool, opts []zarr.StoreOption) error {
	ctx := context.Background()
	s, err := zarr.OpenStore(ctx, name, opts...)
	if err != nil {
		return err
	}
	defer closeStore(s)
	r := zarrStoreInfo{Store: name, Endpoint: "local directory", Zstd: zstdNow(), LZ4: lz4Now(), Deflate: deflateNow()}
	if rs, ok := s.(*zarr.RemoteStore); ok {
		r.Endpoint, r.Consolidated, r.MaxRequests = rs.EndpointType().String(), rs.Consolidated(), rs.MaxRequests()
	}
	paths, err := zarr.ArrayPaths(ctx, s)
	if err != nil {
		return fmt.Errorf("%s: %w", name, err)
	}
	for _, p := range paths {
		r.Arrays = append(r.Arrays, describeArray(ctx, s, p))
	}
	if asJSON {
		return writeJSON(e.stdout, r)
	}
	tw := tabwriter.NewWriter(e.stdout, 0, 4, 2, ' ', 0)
	fmt.Fprintf(tw, "Store\t%s\nEndpoint\t%s\n", display(r.Store), r.Endpoint)
	if r.MaxRequests > 0 {
		fmt.Fprintf(tw, "Consolidated\t%v\nRequests\tup to %d in flight\n", r.Consolidated, r.MaxRequests)
	}
	fmt.Fprintf(tw, "zstd\t%s\nlz4\t%s\ndeflate\t%s\n", r.Zstd, r.LZ4, r.Deflate)
	fmt.Fprintf(tw, "Arrays\t%d\n\narray\tformat\tdtype\tshape\tchunks\tcodecs\tsize\n", len(r.Arrays))
	for _, a := range r.Arrays {
		if a.Error != "" {
			fmt.Fprintf(tw, "%s\t\t\t\t\t%s\t\n", orRoot(a.Path), oneLine(a.Error))
			continue
		}
		size := "variable"
		if a.Bytes != nil {
			size = formatSize(*a.Bytes)
		}
		fmt.Fprintf(tw, "%s\tv%d\t%s\t%v\t%v\t%s\t%s\n", orRoot(a.Path), a.Format, a.Dtype, a.Shape, a.Chunks, display(strings.Join(a.Codecs, ",")), size)
	}
	return tw.Flush()
}

// orRoot names an array's path for kvik info's table (display), the
// root "(root)".
func orRoot(p string) string {
	if p == "" {
		return "(root)"
	}
	return display(p)
}

func describeArray(ctx context.Context, s zarr.Store, p string) zarrArrayInfo {
	a, err := zarr.Open(ctx, s, p)
	if err != nil {
		return zarrArrayInfo{Path: p, Error: err.Error()}
	}
	m := a.Metadata()
	info := zarrArrayInfo{Path: p, Format: m.ZarrFormat, Dtype: m.DataType.String(), Shape: m.Shape, Chunks: m.ChunkShape}
	if !m.DataType.Variable() {
		n := int64(m.DataType.Size)
		for _, d := range m.Shape {
			n *= int64(d)
		}
		info.Bytes = &n
	}
	for _, c := range m.Codecs {
		info.Codecs = append(info.Codecs, c.Name)
	}
	for _, c := range m.Filters {
		info.Codecs = append(info.Codecs, c.Name)
	}
	if m.Compressor != nil {
		info.Codecs = append(info.Codecs, m.Compressor.Name)
	}
	return info
}

func closeStore(s zarr.Store) {
	if c, ok := s.(interface{ Close() error }); ok {
		c.Close()
	}
}

// zarrCopy implements kvik cp with a Zarr source or destination: an
// array into a .npy file through GPU (or host) memory, or a whole store
// into another (local directory or S3), key by key, chunks first and
// metadata last, each value read back and compared.
func zarrCopy(e *env, o *cpOptions, src, dst string) error {
	if strings.HasSuffix(dst, ".npy") {
		return zarrToNpy(e, o, src, dst)
	}
	if storesOverlap(src, dst) {
		return fmt.Errorf("%s -> %s: %w", src, dst, errStoresOverlap)
	}
	ctx := e.ctx
	from, err := zarr.OpenStore(ctx, src, o.zarr.options()...)
	if err != nil {
		return err
	}
	defer closeStore(from)
	toOpts := o.zarr.options()
	if !o.sync {
		toOpts = append(toOpts, zarr.WithoutSync())
	}
	to, err := zarr.OpenStore(ctx, dst, toOpts...)
	if err != nil {
		return err
	}
	defer closeStore(to)
	start := time.Now()
	keys, bytes, err := copyStore(ctx, from, to)
	if errors.Is(err, zarr.ErrNoStore) {
		return fmt.Errorf("%s: %w", src, err)
	}
	if err != nil {
		return err
	}
	el := time.Since(start)
	fmt.Fprintf(e.stdout, "copied %d keys (%s) %s -> %s in %.2f s, %.2f GB/s, verified\n", keys, formatSize(bytes), display(src), display(dst), el.Seconds(), gbps(bytes, el.Seconds()))
	return nil
}

// errStoresOverlap refuses a store copy into itself: the same store
// (every key rewritten for nothing) or one inside the other (a copy of
// the store nested in it on every run), as cp -r refuses both.
var errStoresOverlap = errors.New("the source and destination are one store, or one is inside the other")

// storesOverlap reports whether the stores src and dst are one, or one
// lies inside the other: local paths with links and ".." resolved, URLs
// by scheme, host (an s3:// URL's bucket) and path decoded once. An
// s3:// URL and an http(s) URL of one bucket are not recognised as one.
func storesOverlap(src, dst string) bool {
	if isURL(src) != isURL(dst) {
		return false
	}
	if !isURL(src) {
		return realpath.Within(src, dst) || realpath.Within(dst, src)
	}
	a, b := urlLocation(src), urlLocation(dst)
	return a != "" && b != "" && (strings.HasPrefix(a, b) || strings.HasPrefix(b, a))
}

// urlLocation returns scheme://host/path/ of a URL, its path decoded
// once (as kvik decodes an s3:// URL's key), "" if it does not parse.
func urlLocation(raw string) string {
	u, err := url.Parse(raw)
	if err != nil {
		return ""
	}
	return strings.ToLower(u.Scheme) + "://" + strings.ToLower(u.Host) + strings.TrimSuffix(u.Path, "/") + "/"
}

// copyStore copies every key of from to to: chunks concurrently, then
// the metadata documents, so that a reader of to never finds an array
// whose chunks are still on their way. Each value is read back.
func copyStore(ctx context.Context, from, to zarr.Store) (int, int64, error) {
	keys, err := from.List(ctx, "")
	if err != nil {
		return 0, 0, fmt.Errorf("listing the source: %w", err)
	}
	// A mistyped source is an error, not a copy of nothing.
	if !slices.ContainsFunc(keys, func(k string) bool { return !strings.Contains(k, "/") && zarr.IsMetadataKey(k) }) {
		return 0, 0, zarr.ErrNoStore
	}
	var chunks, meta []string
	for _, k := range keys {
		if zarr.IsMetadataKey(k) {
			meta = append(meta, k)
		} else {
			chunks = append(chunks, k)
		}
	}
	var total int64
	var mu sync.Mutex
	copyKey := func(ctx context.Context, k string) error {
		b, err := getWhole(ctx, from, k)
		if err != nil {
			return err
		}
		if err := to.Set(ctx, k, b); err != nil {
			return err
		}
		back, err := getWhole(ctx, to, k)
		if err != nil {
			return err
		}
		if crc32.Checksum(back, castagnoli) != crc32.Checksum(b, castagnoli) || len(back) != len(b) {
			return fmt.Errorf("verify: %q differs after the copy", k)
		}
		mu.Lock()
		total += int64(len(b))
		mu.Unlock()
		return nil
	}
	d, _ := kvik.GetDefaults()
	if err := eachKey(ctx, chunks, d.NumThreads, copyKey); err != nil {
		return 0, 0, err
	}
	for _, k := range meta {
		if err := copyKey(ctx, k); err != nil {
			return 0, 0, err
		}
	}
	return len(keys), total, nil
}

// eachKey runs f on every key on up to n goroutines, with a context of
// ctx that the first error cancels: the keys not yet started are not,
// and those in flight may stop early.
func eachKey(ctx context.Context, keys []string, n int, f func(context.Context, string) error) error {
	g, gctx := errgroup.WithContext(ctx)
	g.SetLimit(max(1, n))
	for _, k := range keys {
		if gctx.Err() != nil {
			break
		}
		g.Go(func() error { return f(gctx, k) })
	}
	return g.Wait()
}

// zarrToNpy reads the whole array at src into GPU memory (host memory
// with --memory host or without a GPU) and saves it as a .npy file,
// then checks the file against the array's bytes by CRC-32C.
func zarrToNpy(e *env, o *cpOptions, src, dst string) error {
	ctx := e.ctx
	mem, err := chooseMemory(o.memory)
	if err != nil {
		return err
	}
	if mem.gpu != nil {
		defer mem.gpu.close()
	}
	a, err := zarr.OpenArray(ctx, src, o.zarr.options()...)
	if err != nil {
		return err
	}
	defer closeStore(a.Store())
	dt := a.DataType()
	if dt.Variable() {
		return varStringsToNpy(e, o, a, src, dst)
	}
	nd, err := npy.ParseDtype(dt.NumPy())
	if err != nil {
		return err
	}
	shape := a.Shape()
	shape64 := make([]int64, len(shape))
	size := dt.Size
	for i, n := range shape {
		shape64[i], size = int64(n), size*n
	}
	host := make([]byte, size)
	start := time.Now()
	via := "host memory"
	if mem.device {
		via = "GPU memory"
		buf, err := mem.gpu.alloc(max(size, 1))
		if err != nil {
			return err
		}
		defer buf.Close()
		if err := a.ReadRegionDevice(ctx, make([]int, len(shape)), shape, buf.Ptr()); err != nil {
			return err
		}
		if err := npy.Save(ctx, dst, npy.SaveArray{Dtype: nd, Shape: shape64, Ptr: buf.Ptr()}, o.saveOptions()...); err != nil {
			return err
		}
		if err := mem.gpu.do(func() error { return cuda.MemcpyDtoH(host, buf.Ptr()) }); err != nil {
			return err
		}
	} else {
		if err := a.ReadRegion(ctx, make([]int, len(shape)), shape, host); err != nil {
			return err
		}
		if err := npy.Save(ctx, dst, npy.SaveArray{Dtype: nd, Shape: shape64, Data: host}, o.saveOptions()...); err != nil {
			return err
		}
	}
	return savedNpy(e, o, copied{nd, shape, dt, host, src, dst, via, time.Since(start)})
}

// copied is a Zarr array saved as a .npy file: its dtype there, shape and
// Zarr type, the bytes saved, where from and to, through what, how long.
type copied struct {
	nd       npy.Dtype
	shape    []int
	dt       zarr.DataType
	host     []byte
	src, dst string
	via      string
	took     time.Duration
}

// savedNpy checksums the saved bytes, reads the file back to compare
// where o verifies, and prints the copy's line, which says "verified"
// only where it was (as a file's copy says "not verified").
func savedNpy(e *env, o *cpOptions, c copied) error {
	size := int64(len(c.host))
	sum := crc32.Checksum(c.host, castagnoli)
	check := "not verified"
	if o.verify {
		if err := verifyNpy(c.dst, size, sum); err != nil {
			return err
		}
		check = "verified"
	}
	fmt.Fprintf(e.stdout, "copied %s %v %s (%s) %s -> %s through %s in %.2f s, %.2f GB/s, %s, CRC-32C %08x\n",
		c.nd, c.shape, c.dt, formatSize(size), c.src, c.dst, c.via, c.took.Seconds(), gbps(size, c.took.Seconds()), check, sum)
	return nil
}

// varStringsToNpy saves the array a of variable-length strings (bytes)
// as a .npy file of NumPy's fixed-length ones, as np.array makes of a
// list of str (bytes): <U (|S) of the longest element, in code points
// (bytes). It refuses what NumPy would not give back: an element ending
// in NUL (fixed-length strings drop trailing NULs), and a file more than
// 8 times the strings' bytes (and 64 MiB), which one long element among
// short ones would make.
func varStringsToNpy(e *env, o *cpOptions, a *zarr.Array, src, dst string) error {
	start := time.Now()
	shape := a.Shape()
	ss, err := a.ReadStrings(e.ctx, make([]int, len(shape)), shape)
	if err != nil {
		return err
	}
	fixed := zarr.DataType{Kind: zarr.Unicode, Size: 4}
	if a.DataType().Kind == zarr.VarBytes {
		fixed = zarr.DataType{Kind: zarr.Bytes, Size: 1}
	}
	total := 0
	for i, s := range ss {
		if strings.HasSuffix(s, "\x00") {
			return fmt.Errorf("%s: element %d ends in NUL, which NumPy's fixed-length strings drop", src, i)
		}
		n := len(s)
		if fixed.Kind == zarr.Unicode {
			n = 4 * utf8.RuneCountInString(s)
		}
		fixed.Size, total = max(fixed.Size, n), total+len(s)
	}
	if fixed.Size > 1<<20 {
		return fmt.Errorf("%s: its longest element takes %s as a fixed-length string, more than the 1 MiB a .npy element may (npy)", src, formatSize(int64(fixed.Size)))
	}
	size := int64(fixed.Size) * int64(len(ss))
	if limit := max(64<<20, 8*int64(total)); size > limit {
		return fmt.Errorf("%s: as fixed-length strings of its longest element (%s) the array would take %s, more than %s for %s of strings",
			src, fixed, formatSize(size), formatSize(limit), formatSize(int64(total)))
	}
	host, err := fixed.AppendStrings(make([]byte, 0, size), ss...)
	if err != nil {
		return err
	}
	nd, err := npy.ParseDtype(fixed.NumPy())
	if err != nil {
		return err
	}
	shape64 := make([]int64, len(shape))
	for i, n := range shape {
		shape64[i] = int64(n)
	}
	if err := npy.Save(e.ctx, dst, npy.SaveArray{Dtype: nd, Shape: shape64, Data: host}, o.saveOptions()...); err != nil {
		return err
	}
	return savedNpy(e, o, copied{nd, shape, a.DataType(), host, src, dst, "host memory", time.Since(start)})
}

// verifyNpy checks that the data of the .npy file at path (its last size
// bytes) has CRC-32C sum.
func verifyNpy(path string, size int64, sum uint32) error {
	h, err := npy.ReadHeader(context.Background(), path, nil)
	if err != nil {
		return err
	}
	b, err := os.ReadFile(path)
	if err != nil {
		return err
	}
	if h.Size() != size || int64(len(b)) < size || crc32.Checksum(b[int64(len(b))-size:], castagnoli) != sum {
		return fmt.Errorf("verify: %s does not hold the array's %d bytes", path, size)
	}
	return nil
}

// benchZarr times whole-array reads of the Zarr array at --url: kvik's
// concurrent region read into host memory and, with a GPU, into device
// memory, against a loop that reads one chunk at a time.
func benchZarr(e *env, o *benchOptions) error {
	ctx := context.Background()
	a, err := zarr.OpenArray(ctx, o.url, o.zarr.options()...)
	if err != nil {
		return err
	}
	defer closeStore(a.Store())
	shape, chunks := a.Shape(), a.Metadata().ChunkShape
	origin := make([]int, len(shape))
	size := int64(a.DataType().Size)
	for _, n := range shape {
		size *= int64(n)
	}
	host := make([]byte, size)
	rows := []benchRow{{"kvik region -> host", func() error { return a.ReadRegion(ctx, origin, shape, host) }}}
	rows, release, err := addDeviceRow(rows, "kvik region -> device", size, func(p cuda.DevicePtr) error {
		return a.ReadRegionDevice(ctx, origin, shape, p)
	})
	if err != nil {
		return err
	}
	defer release()
	scratch := make([]byte, a.DataType().Size*numElems(chunks))
	rows = append(rows, benchRow{"one chunk at a time -> host", func() error {
		return eachChunk(shape, chunks, func(lo, hi []int) error {
			// One chunk's region: one fetch, one decode.
			return a.ReadRegion(ctx, lo, hi, scratch[:a.DataType().Size*boxElems(lo, hi)])
		})
	}})
	d, _ := kvik.GetDefaults()
	maxReq := 0
	if rs, ok := a.Store().(*zarr.RemoteStore); ok {
		maxReq = rs.MaxRequests()
	}
	whole := ""
	if o.zarr.wholeShards {
		whole = ", whole shards"
	}
	fmt.Fprintf(e.stdout, "%s: zarr v%d %s %v in chunks %v (%s), %d workers, %d requests in flight%s, %d repeats\n",
		o.url, a.Metadata().ZarrFormat, a.DataType(), shape, chunks, formatSize(size), d.NumThreads, maxReq, whole, o.repeats)
	return printRates(e, size, o.repeats, rows)
}

// benchRow is one path kvik bench --url times.
type benchRow struct {
	name string
	run  func() error
}

// addDeviceRow adds a row that reads size bytes into device memory with
// read, when there is a GPU; release frees the memory.
func addDeviceRow(rows []benchRow, name string, size int64, read func(cuda.DevicePtr) error) ([]benchRow, func(), error) {
	g, err := openGPU()
	if err != nil {
		return rows, func() {}, nil // no GPU: host rows only
	}
	dbuf, err := g.alloc(int(max(size, 1)))
	if err != nil {
		g.close()
		return nil, nil, err
	}
	rows = append(rows, benchRow{name, func() error { return read(dbuf.Ptr()) }})
	return rows, func() { dbuf.Close(); g.close() }, nil
}

// printRates runs each row repeats times, reading size bytes each time,
// and prints the best and mean rates.
func printRates(e *env, size int64, repeats int, rows []benchRow) error {
	tw := tabwriter.NewWriter(e.stdout, 0, 4, 2, ' ', 0)
	fmt.Fprintln(tw, "path\tbest GB/s\tmean GB/s")
	for _, r := range rows {
		var best, total float64
		for range repeats {
			t0 := time.Now()
			if err := r.run(); err != nil {
				return fmt.Errorf("%s: %w", r.name, err)
			}
			g := gbps(size, time.Since(t0).Seconds())
			best, total = max(best, g), total+g
		}
		fmt.Fprintf(tw, "%s\t%.2f\t%.2f\n", r.name, best, total/float64(repeats))
	}
	return tw.Flush()
}

// eachChunk calls f with the bounds of each chunk of an array of shape.
func eachChunk(shape, chunks []int, f func(lo, hi []int) error) error {
	lo := make([]int, len(shape))
	for {
		hi := make([]int, len(shape))
		for d := range shape {
			hi[d] = min(lo[d]+chunks[d], shape[d])
		}
		if boxElems(lo, hi) > 0 {
			if err := f(lo, hi); err != nil {
				return err
			}
		}
		d := len(shape) - 1
		for ; d >= 0; d-- {
			if lo[d] += chunks[d]; lo[d] < shape[d] {
				break
			}
			lo[d] = 0
		}
		if d < 0 {
			return nil
		}
	}
}

func numElems(shape []int) int {
	n := 1
	for _, x := range shape {
		n *= x
	}
	return n
}

func boxElems(lo, hi []int) int {
	n := 1
	for d := range lo {
		n *= hi[d] - lo[d]
	}
	return n
}

// getWhole reads key whole. A copied key may be a shard of any size, so a
// remote store's read is bounded by the machine's memory rather than by
// the document cap of its Get: a server's absurd claim still fails with
// kvik.ErrTooLarge before anything is allocated.
func getWhole(ctx context.Context, s zarr.Store, key string) ([]byte, error) {
	if g, ok := s.(interface {
		GetMax(ctx context.Context, key string, buf []byte, limit int64) ([]byte, error)
	}); ok {
		return g.GetMax(ctx, key, nil, hostmem.Limit())
	}
	return s.Get(ctx, key, nil)
}
