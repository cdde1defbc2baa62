package main

import (
	"bytes"
	"context"
	"errors"
	"flag"
	"fmt"
	"hash/crc32"
	"io"
	"io/fs"
	"os"
	"path/filepath"
	"sync/atomic"
	"time"

	"github.com/kvikgo/kvik"
	"github.com/kvikgo/kvik/internal/posix"
)

const cpDesc = `
Copy SRC to DST through GPU memory (file -> device -> file) with kvik's
device I/O, or through host memory (--memory host), in chunks, reading the
next chunk while the previous one is written. DST is replaced atomically:
the data goes to a temporary file beside it that is renamed over DST
only once complete and verified, so an interrupted or failed copy leaves
DST as it was. DST gets SRC's permissions; a directory DST, or one that
ends in "/" (an S3 prefix too), receives SRC's base name. After the copy both files are read back and compared, and the
CRC-32C of the data is printed. Only regular files are replaced: a DST
that is, or links to, a device node, a FIFO or a socket is refused (use
cp or dd to write into one).

Either side may be a URL (s3://, http(s)://; credentials and endpoint
from the AWS_* variables): a download goes through parallel ranged GETs,
an upload to S3 through a parallel multipart upload read from the file
as it is sent and checksummed on the way, and the copy is read back and
compared by CRC-32C (not with --verify=false); an upload reports its
own time apart from the read-back's. Tensor files move by format: a
.safetensors or .npy file is checked and loaded from its URL into GPU
memory (host memory with --memory host or without a GPU) by kvik's
loader and written from there; a .safetensors.index.json brings every
shard it names, beside it, and comes last.

With a Zarr source or destination (a path or URL with a .zarr
component), an array copied to a .npy file goes through GPU memory
(ReadRegionDevice, then a device save); a store copied to another store
(local directory or s3://) goes key by key, chunks first and metadata
last, each value read back and compared.

A PyTorch checkpoint (.pt, .pth, pytorch_model*.bin) copied to a
.safetensors file is converted: every tensor under its name, loaded into
host memory (GPU memory with --memory device) without running its
pickle, saved as safetensors (metadata {"format": "pt"}),
then loaded back and compared tensor by tensor by CRC-32C (not with
--verify=false) before it replaces DST. A sharded one's index
(pytorch_model.bin.index.json) copied to a .safetensors.index.json is
converted shard by shard (model-00001-of-00002.safetensors...), the new
index last.`

// cpOptions holds kvik cp's flags.
type cpOptions struct {
	memory  string
	chunk   sizeFlag
	threads int
	compat  string
	verify  bool
	sync    bool
	zarr    zarrReadFlags
}

// cpFlagSet returns kvik cp's flag set bound to a new cpOptions.
func cpFlagSet(e *env) (*flag.FlagSet, *cpOptions) {
	o := &cpOptions{}
	fs := newFlagSet(e, "cp", "[flags] SRC DST", cpDesc)
	fs.StringVar(&o.memory, "memory", "auto", "copy through `memory`: auto (device if there is a GPU), host or device memory")
	fs.Var(&o.chunk, "chunk", "`size` of each read and write; two chunks are in use (default 256MiB)")
	fs.IntVar(&o.threads, "threads", 0, "kvik worker `threads` (default KVIKIO_NTHREADS)")
	fs.StringVar(&o.compat, "compat", "", "device path `mode`: on (POSIX+bounce), off (cuFile) or auto (default KVIKIO_COMPAT_MODE)")
	fs.BoolVar(&o.verify, "verify", true, "read both files back and compare them")
	fs.BoolVar(&o.sync, "sync", true, "sync each local file written (fsync), so that it survives a crash of the machine; false still replaces it atomically (kvik.WithoutSync: for data that can be copied again, and Zarr stores of many chunks on a disk)")
	o.zarr.register(fs)
	return fs, o
}

// cpFlags is cpFlagSet for help.
func cpFlags(e *env) *flag.FlagSet {
	fs, _ := cpFlagSet(e)
	return fs
}

// defaultChunk is the default size of each piece kvik cp moves.
const defaultChunk = 256 * miB

// copyJob is one kvik cp.
type copyJob struct {
	e        *env
	o        *cpOptions
	src, dst string
	in, out  *kvik.FileHandle
	pending  *kvik.PendingFile // out, until committed over dst
	// unchanged fails with kvik.ErrFileChanged when SRC was written to
	// since it was opened: the copy may hold bytes from before and after
	// the write (--verify=false would keep it).
	unchanged func() error
	size      int64
	chunk     int64
	mem       memoryChoice
	via       string // the path the data took, for the summary
}

// runCp implements kvik cp.
func runCp(e *env, args []string) error {
	fs, o := cpFlagSet(e)
	pos, err := parseFlags(fs, args)
	if err != nil {
		return err
	}
	if err := o.validate(pos); err != nil {
		return err
	}
	restore, err := kvik.UpdateDefaults(func(d *kvik.Defaults) {
		if o.threads > 0 {
			d.NumThreads = o.threads
		}
	})
	if err != nil {
		return err
	}
	defer restore()
	if isZarr(pos[0]) || isZarr(pos[1]) {
		return zarrCopy(e, o, pos[0], pos[1])
	}
	if isTorchToSafetensors(pos[0], pos[1]) {
		return torchToSafetensors(e, o, pos[0], pos[1])
	}
	if isURL(pos[0]) || isURL(pos[1]) {
		if isURL(pos[0]) && isURL(pos[1]) {
			return usagef("copying from one URL to another is not supported; copy through a local file")
		}
		// A GGUF file is copied as bytes: its tensors need not tile the
		// data area, so a load would not give the file back.
		if f := tensorFormat(pos[0]); f != "" && f != formatGGUF {
			return tensorCopy(e, o, pos[0], pos[1])
		}
		return remoteCopy(e, o, pos[0], pos[1])
	}
	j := &copyJob{e: e, o: o, src: pos[0], dst: pos[1]}
	return j.run()
}

// validate checks the arguments.
func (o *cpOptions) validate(pos []string) error {
	switch {
	case len(pos) != 2:
		return usagef("want two arguments, SRC and DST; got %d", len(pos))
	case o.threads < 0:
		return usagef("--threads %d: want a positive count", o.threads)
	case o.chunk.set && o.chunk.n <= 0:
		return usagef("--chunk must be positive")
	case (o.zarr.requests != 0 || o.zarr.wholeShards) && !isZarr(pos[0]) && !isZarr(pos[1]):
		return usagef("--requests and --whole-shards apply to a Zarr SRC or DST")
	}
	if err := o.zarr.validate(); err != nil {
		return err
	}
	return validateMemoryCompat(o.memory, o.compat)
}

// run opens the files, copies, syncs, verifies and prints a summary.
func (j *copyJob) run() error {
	var err error
	if j.mem, err = chooseMemory(j.o.memory); err != nil {
		return err
	}
	if j.mem.gpu != nil {
		defer j.mem.gpu.close()
	}
	if err := j.open(); err != nil {
		return err
	}
	defer j.in.Close()
	defer j.pending.Abort()
	start := time.Now()
	if err := j.copy(); err != nil {
		return err
	}
	if j.o.sync {
		if err := j.out.Sync(); err != nil {
			return err
		}
	}
	if err := j.unchanged(); err != nil {
		return err
	}
	elapsed := time.Since(start)
	sum, err := j.verify()
	if err != nil {
		return err
	}
	if err := commit(j.pending, j.o.sync); err != nil {
		return err
	}
	fmt.Fprintf(j.e.stdout, "copied %s (%s) %s -> %s in %.2f s, %.2f GB/s, through %s%s\n",
		formatSize(j.size), count(j.size, "byte"), j.src, j.dst, elapsed.Seconds(), gbps(j.size, elapsed.Seconds()), j.via, sum)
	return nil
}

// open opens SRC and DST with kvik and checks that they differ.
func (j *copyJob) open() error {
	var opts []kvik.Option
	if j.o.compat != "" {
		m, _ := kvik.ParseCompatMode(j.o.compat)
		opts = append(opts, kvik.WithCompatMode(m))
	}
	// SRC's kind first: opening a FIFO for reading blocks until a writer
	// comes, and a device may never end.
	if err := regularSource(j.src); err != nil {
		return err
	}
	var err error
	if j.in, err = kvik.Open(j.src, "r", 0, opts...); err != nil {
		return err
	}
	j.unchanged = kvik.WatchFile(j.in)
	fi, err := os.Stat(j.src)
	if err != nil {
		return err
	}
	if err := notRegularSource(j.src, fi.Mode()); err != nil { // replaced since the check above
		return err
	}
	j.size = fi.Size()
	if j.dst, err = destPath(j.src, j.dst); err != nil {
		return err
	}
	perm := fi.Mode().Perm()
	if di, err := os.Stat(j.dst); err == nil && os.SameFile(fi, di) {
		return fmt.Errorf("%s and %s are the same file", j.src, j.dst)
	} else if err == nil {
		perm = 0 // an existing DST keeps its mode and owner, as with cp(1)
	}
	// The destination's directory is made if missing, as for URL sources
	// (kvik cp FILE newdir/).
	if err := kvik.MkdirAll(filepath.Dir(j.dst), 0o755, j.o.saveOptions()...); err != nil {
		return err
	}
	if j.pending, err = createPending(j.dst, perm, opts...); err != nil {
		return err
	}
	j.out = j.pending.FileHandle
	return j.pending.Reserve(j.size)
}

// createPending starts the atomic replacement of path and removes its
// temporary file if kvik is interrupted before Commit.
func createPending(path string, perm fs.FileMode, opts ...kvik.Option) (*kvik.PendingFile, error) {
	p, err := kvik.CreatePending(path, perm, opts...)
	if err != nil {
		return nil, err
	}
	tmp := p.Name()
	atExit(func() { os.Remove(tmp) }) // nothing left to remove after Commit
	return p, nil
}

// saveOptions returns the options of kvik.SaveFile that --sync asks for.
func (o *cpOptions) saveOptions() []kvik.RemoteOption { return syncOptions(o.sync) }

// syncOptions returns the options of kvik.SaveFile and kvik.MkdirAll
// for a save with its syncs where sync is set.
func syncOptions(sync bool) []kvik.RemoteOption {
	if sync {
		return nil
	}
	return []kvik.RemoteOption{kvik.WithoutSync()}
}

// commit commits p, with its syncs where sync is set (--sync).
func commit(p *kvik.PendingFile, sync bool) error {
	if sync {
		return p.Commit()
	}
	return p.CommitWithoutSync()
}

// copy moves the data through device or host memory.
func (j *copyJob) copy() error {
	if j.size == 0 {
		j.via = "nothing (empty file)"
		return nil
	}
	j.chunk = defaultChunk
	if j.o.chunk.set {
		ps := int64(os.Getpagesize())
		j.chunk = (j.o.chunk.n + ps - 1) / ps * ps
	}
	j.chunk = min(j.chunk, j.size)
	prog := newProgress(j.e, "cp", j.size, true)
	defer prog.finish()
	if j.mem.device {
		return j.copyDevice(prog)
	}
	return j.copyHost(prog)
}

// copyDevice copies through two device buffers of one chunk each.
func (j *copyJob) copyDevice(prog *progress) error {
	buf, err := j.mem.gpu.alloc(int(2 * j.chunk))
	if err != nil {
		return err
	}
	defer buf.Close()
	j.via = fmt.Sprintf("%s memory (%s)", j.mem.gpu.name, compatPath(j.in.CompatMode()))
	p := buf.Ptr()
	read := func(slot int, off int64, n int) error {
		return transferred(n, wrapOp(j.in.ReadDevice(p, n, off, int64(slot)*j.chunk)))
	}
	write := func(slot int, off int64, n int) error {
		return transferred(n, wrapOp(j.out.WriteDevice(p, n, off, int64(slot)*j.chunk)))
	}
	return pipeline(j.e.ctx, j.size, j.chunk, read, write, prog)
}

// copyHost copies through two page-aligned host buffers of one chunk each.
func (j *copyJob) copyHost(prog *progress) error {
	mem, free, err := allocHost(2 * j.chunk)
	if err != nil {
		return err
	}
	defer free()
	j.via = "host memory (kvik host)"
	if j.mem.note != "" {
		j.via = fmt.Sprintf("host memory (kvik host; %s)", j.mem.note)
	}
	slot := func(s, n int) []byte { return mem[int64(s)*j.chunk:][:n] }
	read := func(s int, off int64, n int) error {
		return transferred(n, wrapOp(j.in.ReadAt(slot(s, n), off)))
	}
	write := func(s int, off int64, n int) error {
		return transferred(n, wrapOp(j.out.WriteAt(slot(s, n), off)))
	}
	return pipeline(j.e.ctx, j.size, j.chunk, read, write, prog)
}

// opResult carries the result of a transfer to transferred.
type opResult struct {
	n   int
	err error
}

func wrapOp(n int, err error) opResult { return opResult{n, err} }

// transferred fails unless the transfer moved want bytes; a source that
// shrank while being copied ends in io.ErrUnexpectedEOF.
func transferred(want int, r opResult) error {
	if r.err == io.EOF || r.err == nil && r.n != want {
		return fmt.Errorf("moved %d of %d bytes: %w", r.n, want, io.ErrUnexpectedEOF)
	}
	return r.err
}

// pipeline copies [0, size) in chunks through two buffer slots: a reader
// goroutine fills one slot while the caller's goroutine writes the other.
// Once ctx is done no chunk starts: the copy fails with ctx's error.
func pipeline(ctx context.Context, size, chunk int64, read, write func(slot int, off int64, n int) error, prog *progress) error {
	type piece struct {
		slot int
		off  int64
		n    int
	}
	free, full := make(chan int, 2), make(chan piece, 2)
	free <- 0
	free <- 1
	var stop atomic.Bool
	var readErr error
	go func() {
		defer close(full)
		for off := int64(0); off < size && !stop.Load(); off += chunk {
			s := <-free
			n := int(min(chunk, size-off))
			if readErr = ctx.Err(); readErr != nil {
				return
			}
			if readErr = read(s, off, n); readErr != nil {
				return
			}
			full <- piece{s, off, n}
		}
	}()
	var writeErr error
	for p := range full {
		if writeErr == nil {
			writeErr = write(p.slot, p.off, p.n)
			stop.Store(writeErr != nil)
			prog.add(int64(p.n), "")
		}
		free <- p.slot
	}
	return errors.Join(readErr, writeErr)
}

// verify reads SRC and the copy (still under its temporary name) back
// with plain os.File reads, independent of kvik, compares them and
// returns the summary's checksum text.
func (j *copyJob) verify() (string, error) {
	if !j.o.verify {
		return "; not verified", nil
	}
	a, err := os.Open(j.src)
	if err != nil {
		return "", err
	}
	defer a.Close()
	b, err := os.Open(j.out.Name())
	if err != nil {
		return "", err
	}
	defer b.Close()
	fi, err := b.Stat()
	if err != nil {
		return "", err
	}
	if fi.Size() != j.size {
		return "", fmt.Errorf("verify: %s has %d bytes, want %d", j.dst, fi.Size(), j.size)
	}
	sum, err := compareFiles(j.e.ctx, a, b, j.size, newProgress(j.e, "verify", j.size, true))
	if err != nil {
		return "", err
	}
	return fmt.Sprintf("; verified, CRC-32C %08x", sum), nil
}

// compareFiles compares the first size bytes of a and b and returns their
// CRC-32C (Castagnoli); it stops with ctx's error once ctx is done.
func compareFiles(ctx context.Context, a, b *os.File, size int64, prog *progress) (uint32, error) {
	defer prog.finish()
	const block = 16 * miB
	ba, bb := make([]byte, block), make([]byte, block)
	var crc uint32
	for off := int64(0); off < size; off += block {
		if err := ctx.Err(); err != nil {
			return 0, err
		}
		n := int(min(block, size-off))
		if _, err := a.ReadAt(ba[:n], off); err != nil {
			return 0, fmt.Errorf("verify: read %s: %w", a.Name(), err)
		}
		if _, err := b.ReadAt(bb[:n], off); err != nil {
			return 0, fmt.Errorf("verify: read %s: %w", b.Name(), err)
		}
		if !bytes.Equal(ba[:n], bb[:n]) {
			return 0, fmt.Errorf("verify: %s differs from %s at %s", b.Name(), a.Name(), firstDiff(ba[:n], bb[:n], off))
		}
		crc = crc32.Update(crc, castagnoli, ba[:n])
		prog.add(int64(n), "")
	}
	return crc, nil
}

// firstDiff describes where two equal-length buffers first differ.
func firstDiff(a, b []byte, base int64) string {
	for i := range a {
		if a[i] != b[i] {
			return fmt.Sprintf("byte %d (%#02x, want %#02x)", base+int64(i), b[i], a[i])
		}
	}
	return "?"
}

// regularSource returns an error unless src is, or links to, a regular
// file.
func regularSource(src string) error {
	fi, err := os.Stat(src)
	if err != nil {
		return err
	}
	return notRegularSource(src, fi.Mode())
}

// notRegularSource refuses a source of a mode that is not a regular
// file's, naming what it is.
func notRegularSource(src string, mode fs.FileMode) error {
	if mode.IsRegular() {
		return nil
	}
	return fmt.Errorf("%s: not a regular file: %s", src, posix.FileKind(mode))
}
