package main

import (
	"context"
	"fmt"
	"hash/crc32"
	"io"
	"net/url"
	"os"
	"path"
	"path/filepath"
	"strings"
	"time"

	"github.com/kvikgo/kvik"
	"github.com/kvikgo/kvik/cuda"
	"github.com/kvikgo/kvik/internal/remote"
	"github.com/kvikgo/kvik/npy"
	"github.com/kvikgo/kvik/safetensors"
)

// tensorCopy copies a .safetensors or .npy file, or a sharded checkpoint
// (its index and every shard it names, the index last so that it never
// names a missing shard), between a URL and a local path. Each file's
// header is checked before its bytes move. A download is loaded by the
// format's loader into GPU memory (or host memory) and written from
// there atomically, and is read back and compared with the bytes
// received by CRC-32C unless --verify=false; an upload goes up from a
// mapping of the file and is read back and compared.
func tensorCopy(e *env, o *cpOptions, src, dst string) error {
	ctx := e.ctx
	files, err := tensorFiles(src, dst)
	if err != nil {
		return err
	}
	mem := memoryChoice{}
	if isURL(src) {
		if mem, err = chooseMemory(o.memory); err != nil {
			return err
		}
		if mem.gpu != nil {
			defer mem.gpu.close()
		}
	}
	var total int64
	start := time.Now()
	for _, f := range files {
		t0 := time.Now()
		var size int64
		var sum uint32
		if !isURL(src) {
			u, err := uploadTensors(ctx, f, o.verify)
			if err != nil {
				return err
			}
			total += u.size
			fmt.Fprint(e.stdout, u.line(f.src, f.dst))
			continue
		}
		size, sum, err = downloadTensors(ctx, mem, f, o.verify, o.sync)
		if err != nil {
			return err
		}
		total += size
		elapsed := time.Since(t0).Seconds()
		fmt.Fprintf(e.stdout, "copied %s (%d bytes) %s -> %s in %.2f s, %.2f GB/s, %s, CRC-32C %08x\n",
			formatSize(size), size, display(redact(f.src)), display(redact(f.dst)), elapsed, gbps(size, elapsed), f.via(mem, o.verify), sum)
	}
	if len(files) > 1 {
		elapsed := time.Since(start).Seconds()
		fmt.Fprintf(e.stdout, "copied %s, %s (%s), in %.2f s, %.2f GB/s\n", count(len(files), "file"), formatSize(total), count(total, "byte"), elapsed, gbps(total, elapsed))
	}
	return nil
}

// tensorFile is one file of a tensor copy.
type tensorFile struct {
	format   string
	src, dst string
}

// via describes how the file travels, for the summary.
func (f tensorFile) via(mem memoryChoice, verify bool) string {
	s := "uploaded"
	switch {
	case !isURL(f.src):
	case f.format == formatIndex:
		s = "downloaded"
	case mem.device:
		s = "loaded through " + mem.gpu.name + " memory"
	default:
		s = "loaded through host memory"
	}
	if verify {
		return s + ", verified"
	}
	return s + ", not verified"
}

// tensorFiles lists the files to copy: src alone, or for an index its
// shards then itself, each with its destination. A destination that is
// a directory, or ends in a slash, receives the source's base name;
// shards go beside the index at both ends.
func tensorFiles(src, dst string) ([]tensorFile, error) {
	dst, err := destPath(src, dst)
	if err != nil {
		return nil, err
	}
	format := tensorFormat(src)
	if format != formatIndex {
		return []tensorFile{{format, src, dst}}, nil
	}
	ix, err := safetensors.ReadIndex(context.Background(), src)
	if err != nil {
		return nil, err
	}
	var files []tensorFile
	for _, f := range ix.Files() {
		from, err := safetensors.ShardName(src, f)
		if err != nil {
			return nil, err
		}
		to, err := safetensors.ShardName(dst, f)
		if err != nil {
			return nil, err
		}
		files = append(files, tensorFile{formatSafetensors, from, to})
	}
	return append(files, tensorFile{formatIndex, src, dst}), nil
}

// destPath is where kvik cp writes src when told dst: inside dst, under
// src's base name, when dst is a local directory or ends in "/" (an S3
// prefix or a directory to be made); dst itself otherwise. A local
// file's name goes into a URL escaped, so that it becomes the key as it
// is: a URL's path is decoded once, and '#' or '?' would end it. A URL's
// base name is its key's (or decoded path's) last segment, the name the
// object has: s3://b/p/x%2541.bin is the key p/x%41.bin, saved as
// x%41.bin.
func destPath(src, dst string) (string, error) {
	base := path.Base(src)
	switch {
	case isURL(src):
		var err error
		if base, err = urlBase(src); err != nil {
			return "", err
		}
	case isURL(dst):
		base = url.PathEscape(base)
	}
	if strings.HasSuffix(dst, "/") {
		return dst + base, nil
	}
	if st, err := os.Stat(dst); err == nil && st.IsDir() && !isURL(dst) {
		return filepath.Join(dst, base), nil
	}
	return dst, nil
}

// urlBase returns the last segment of the object name a URL gives (see
// remote.ObjectPath: an s3:// URL's key, decoded once, '?' and '#'
// included; an http(s) URL's decoded path). A name that is no file name
// ("", "." or "..", which would leave the directory, or one with a NUL)
// fails, asking for one.
func urlBase(src string) (string, error) {
	p, err := remote.ObjectPath(src)
	if err != nil {
		return "", err
	}
	name := p[strings.LastIndexByte(p, '/')+1:]
	if name == "" || name == "." || name == ".." || strings.ContainsRune(name, 0) {
		return "", fmt.Errorf("%s: %q is no file name; name the destination file", kvik.RedactURL(src), name)
	}
	return name, nil
}

// downloadTensors copies the tensor file at the URL f.src to the local
// f.dst: checked and loaded by its format's loader into device memory
// (mem.device) or host memory, then written from there, byte for byte
// the object, to a temporary file that is read back and compared with
// the bytes received before it replaces f.dst, so that a failed check
// leaves f.dst as it was.
func downloadTensors(ctx context.Context, mem memoryChoice, f tensorFile, verify, sync bool) (int64, uint32, error) {
	r, size, err := openSized(f.src)
	if err != nil {
		return 0, 0, err
	}
	defer r.Close()
	pieces, release, err := loadPieces(ctx, r, size, f.format, mem.device)
	if err != nil {
		return 0, 0, err
	}
	defer release()
	if err := kvik.MkdirAll(filepath.Dir(f.dst), 0o755, syncOptions(sync)...); err != nil {
		return 0, 0, err
	}
	out, err := createPending(f.dst, 0)
	if err != nil {
		return 0, 0, err
	}
	defer out.Abort()
	if err := out.WritePieces(ctx, pieces); err != nil {
		return 0, 0, err
	}
	sum, err := readerCRC(ctx, out)
	if err != nil {
		return 0, 0, err
	}
	if verify {
		if got, err := receivedCRC(pieces, mem.gpu); err != nil || got != sum {
			return 0, 0, fmt.Errorf("verify: %s has CRC-32C %08x, the bytes received %08x (%v)", f.dst, sum, got, err)
		}
	}
	return size, sum, commit(out, sync)
}

// receivedCRC is piecesCRC, which a test replaces to fail the check.
var receivedCRC = piecesCRC

// piecesCRC returns the CRC-32C of the pieces one after another, copying
// those in device memory to the host in chunks.
func piecesCRC(pieces []kvik.Piece, g *gpuDevice) (uint32, error) {
	var sum uint32
	var buf []byte
	for _, p := range pieces {
		if p.Ptr == 0 {
			sum = crc32.Update(sum, castagnoli, p.Data)
			continue
		}
		if buf == nil {
			buf = make([]byte, 64*miB)
		}
		for off := int64(0); off < p.Size; off += int64(len(buf)) {
			b := buf[:min(int64(len(buf)), p.Size-off)]
			if err := g.dtoh(b, p.Ptr+cuda.DevicePtr(off)); err != nil {
				return 0, err
			}
			sum = crc32.Update(sum, castagnoli, b)
		}
	}
	return sum, nil
}

// loadPieces loads the file r holds with its format's loader, into
// device memory or host memory, and returns it as the pieces of the same
// file: its header's bytes, then the data from where the loader put it.
// release frees the memory.
func loadPieces(ctx context.Context, r kvik.Reader, size int64, format string, device bool) ([]kvik.Piece, func(), error) {
	var dataOff int64
	var data []kvik.Piece
	var release func()
	switch format {
	case formatIndex:
		return headerPiece(r, size, nil, func() {})
	case formatNpy:
		h, err := npy.ReadHeaderReader(ctx, r, nil)
		if err != nil {
			return nil, nil, err
		}
		load := npy.LoadHostReader
		if device {
			load = npy.LoadReader
		}
		a, err := load(ctx, r, nil)
		if err != nil {
			return nil, nil, err
		}
		dataOff, release = h.DataOffset, func() { a.Close() }
		data = []kvik.Piece{{Data: a.Data, Ptr: a.Ptr, Size: a.Size()}}
	default:
		h, err := safetensors.ReadHeaderReader(ctx, r, nil)
		if err != nil {
			return nil, nil, err
		}
		load := safetensors.LoadHostReader
		if device {
			load = safetensors.LoadReader
		}
		m, err := load(ctx, r, nil)
		if err != nil {
			return nil, nil, err
		}
		dataOff, release = h.DataOffset, func() { m.Close() }
		for _, t := range m.Tensors { // in file order, tiling the data area
			data = append(data, kvik.Piece{Data: t.Data, Ptr: t.Ptr, Size: t.Size()})
		}
	}
	return headerPiece(r, dataOff, data, release)
}

// headerPiece reads the first n bytes of r as a piece before data.
func headerPiece(r kvik.Reader, n int64, data []kvik.Piece, release func()) ([]kvik.Piece, func(), error) {
	hdr := make([]byte, n)
	if _, err := io.ReadFull(io.NewSectionReader(r, 0, n), hdr); err != nil {
		release()
		return nil, nil, err
	}
	return append([]kvik.Piece{{Data: hdr}}, data...), release, nil
}

// uploadTensors checks the local tensor file's header, then uploads it
// as uploadFile does.
func uploadTensors(ctx context.Context, f tensorFile, verify bool) (uploadStats, error) {
	var err error
	switch f.format {
	case formatNpy:
		_, err = npy.ReadHeader(ctx, f.src, nil)
	case formatSafetensors:
		_, err = safetensorsHeader(f.src)
	}
	if err != nil {
		return uploadStats{}, err
	}
	return uploadFile(ctx, f.src, f.dst, verify)
}
