package kvik

import (
	"bytes"
	"context"
	"fmt"
	"hash/crc32"
	"io"
	"io/fs"
	"log/slog"
	"os"
	"strings"

	"golang.org/x/sys/unix"

	"github.com/kvikgo/kvik/cuda"
	"github.com/kvikgo/kvik/internal/crcsum"
	"github.com/kvikgo/kvik/internal/devmem"
	"github.com/kvikgo/kvik/internal/remote"
	"github.com/kvikgo/kvik/internal/sched"
)

// UploadS3 writes p as the S3 object at url (s3://bucket/key or an S3
// object's http(s) URL), signed with the credentials of the environment
// or options. Objects larger than one part (TaskSize, at least 5 MiB) are
// sent as a multipart upload whose parts go up in parallel on the worker
// pool; if any part fails the upload is aborted, so no partial object is
// left. KvikIO has no remote writes.
func UploadS3(ctx context.Context, url string, p []byte, opts ...RemoteOption) error {
	return uploadPieces(ctx, url, []Piece{{Data: p}}, nil, opts)
}

// UploadS3Device writes size bytes of device memory at buf+devOffset as
// the S3 object at url, like UploadS3: each part is staged through a
// pinned bounce buffer on a stream, its next chunk copied from the
// device while the transport sends the last.
func UploadS3Device(ctx context.Context, url string, buf cuda.DevicePtr, size int, devOffset int64, opts ...RemoteOption) error {
	if size < 0 {
		return &fs.PathError{Op: "write", Path: RedactURL(url), Err: fmt.Errorf("%w: negative size %d", ErrInvalidArgument, size)}
	}
	r, err := resolveSynced(buf, size, devOffset)
	if err != nil {
		return &fs.PathError{Op: "write", Path: RedactURL(url), Err: err}
	}
	return uploadPieces(ctx, url, []Piece{{Ptr: r.Ptr, Size: int64(size)}}, []devmem.Range{r}, opts)
}

// UploadFileS3 writes the file at path as the S3 object at url, like
// UploadS3, its parts read from the file (through the page cache) into
// the requests as they are sent, so that no copy of the file is held in
// memory and a file larger than memory goes up too. The object has the
// size the file had when opened; a file that shrinks during the upload
// fails it with an error wrapping io.ErrUnexpectedEOF, never with a
// fault as a mapping of it would, and one written to meanwhile (its size
// or modification time changed when the last part has gone up) with
// ErrFileChanged: the upload is aborted. (A one-request upload carries
// the bytes' checksum instead, which the server checks.)
func UploadFileS3(ctx context.Context, url, path string, opts ...RemoteOption) error {
	f, err := os.Open(path)
	if err != nil {
		return err
	}
	defer f.Close()
	st, err := f.Stat()
	if err != nil {
		return err
	}
	if !st.Mode().IsRegular() {
		return &fs.PathError{Op: "read", Path: path, Err: fmt.Errorf("%w: not a regular file", ErrInvalidArgument)}
	}
	src := bodySource{size: st.Size(), reread: true, open: func(off int64, n int) io.ReadCloser {
		return &fileBody{r: io.NewSectionReader(f, off, int64(n)), left: int64(n), path: path}
	}, unchanged: watch(path, func(st *unix.Stat_t) error { return unix.Fstat(int(f.Fd()), st) })}
	return uploadURL(ctx, url, opts, func(Defaults) bodySource { return src })
}

// fileBody reads one part of a file for a request body, failing with
// io.ErrUnexpectedEOF where the file ends early.
type fileBody struct {
	r    io.Reader
	left int64
	path string
}

func (b *fileBody) Read(p []byte) (int, error) {
	n, err := b.r.Read(p)
	b.left -= int64(n)
	if err == io.EOF && b.left > 0 {
		err = &fs.PathError{Op: "read", Path: b.path, Err: fmt.Errorf("the file shrank during the upload: %w", io.ErrUnexpectedEOF)}
	}
	return n, err
}

func (b *fileBody) Close() error { return nil }

// bodySource is what an upload sends: size bytes, any range of which
// open streams for a request body (a fresh reader per attempt).
type bodySource struct {
	size int64
	open func(off int64, n int) io.ReadCloser
	// reread: the bytes are in host memory or a file, where reading them
	// once more for a checksum costs little (putChecksum).
	reread bool
	// unchanged, if set, checks before a multipart upload completes that
	// the source still holds the bytes its parts were read from.
	unchanged func() error
}

// piecesSource is the concatenated pieces; devs holds the resolved
// range of each device piece, by index (nil when there is none).
func piecesSource(d Defaults, pieces []Piece, devs []devmem.Range) bodySource {
	var size int64
	for _, p := range pieces {
		size += p.Len()
	}
	return bodySource{size: size, reread: devs == nil, open: func(off int64, n int) io.ReadCloser {
		return piecesReader(d, pieces, devs, off, int64(n))
	}}
}

// uploadPieces uploads the concatenated pieces as the object at url;
// devs holds the resolved range of each device piece, by index (nil
// when there is none).
func uploadPieces(ctx context.Context, url string, pieces []Piece, devs []devmem.Range, opts []RemoteOption) error {
	return uploadURL(ctx, url, opts, func(d Defaults) bodySource { return piecesSource(d, pieces, devs) })
}

// uploadURL uploads what src returns under the current settings as the
// object at url.
func uploadURL(ctx context.Context, url string, opts []RemoteOption, src func(Defaults) bodySource) error {
	err := func() error {
		o, err := newRemoteOptions(opts)
		if err != nil {
			return err
		}
		d, err := GetDefaults()
		if err != nil {
			return err
		}
		ep, err := remote.New(RemoteS3, url, o.s3.FromEnv(os.Getenv))
		if err != nil {
			if !strings.HasPrefix(url, "s3://") {
				// Someone who tried an http(s) server may not know that only
				// S3 takes uploads.
				err = fmt.Errorf("uploads go to S3 only (s3://bucket/key, or an S3 object's http(s) URL with S3 credentials): %w", err)
			}
			return err
		}
		c, err := o.newClient(d, d.NumThreads, true)
		if err != nil {
			return err
		}
		defer c.Close()
		return uploadObject(ctx, ep, c, d, src(d), o.uploadCRC, remote.Condition{})
	}()
	if err != nil {
		return &fs.PathError{Op: "write", Path: RedactURL(url), Err: err}
	}
	return nil
}

// uploadToEndpoint uploads the concatenated pieces as the object of ep
// with c (a RemotePrefix's object and client).
func uploadToEndpoint(ctx context.Context, ep *remote.Endpoint, c *remote.Client, pieces []Piece, cond remote.Condition) error {
	devs, err := resolvePieces(pieces)
	if err != nil {
		return err
	}
	d, err := GetDefaults()
	if err != nil {
		return err
	}
	return uploadObject(ctx, ep, c, d, piecesSource(d, pieces, devs), nil, cond)
}

// uploadObject uploads body as the object of ep with c: one PUT, or a
// multipart upload aborted on any error, on the condition cond (see
// RemotePrefix.SaveIf). With crc not nil, *crc gets the CRC-32C of the
// bytes sent (WithUploadCRC32C).
func uploadObject(ctx context.Context, ep *remote.Endpoint, c *remote.Client, d Defaults, body bodySource, crc *uint32, cond remote.Condition) error {
	size := body.size
	part := remote.PartSize(size, d.TaskSize)
	if size <= part && !body.reread && checksummed(ep) {
		// One request from device memory: its bytes (a part at most)
		// come to host memory first, so that the request carries their
		// checksum as one from host memory does.
		h, err := inHost(body)
		if err != nil {
			return err
		}
		body = h
	}
	nparts := max(int((size+part-1)/part), 1)
	var sums []remote.SentSum // per part, when crc is wanted
	if crc != nil {
		sums = make([]remote.SentSum, nparts)
	}
	src := func(off int64, n int) remote.Body {
		return func() (io.Reader, error) {
			r := body.open(off, n)
			if sums == nil {
				return r, nil
			}
			return sums[off/part].Attempt(r), nil
		}
	}
	// sent combines the parts' checksums into *crc once all went up.
	sent := func() error {
		if crc == nil {
			return nil
		}
		var sum uint32
		for i := range sums {
			n := min(part, size-int64(i)*part)
			c, err := sums[i].Result(max(n, 0))
			if err != nil {
				return fmt.Errorf("part %d: %w", i+1, err)
			}
			sum = crcsum.Castagnoli.Combine(sum, c, n)
		}
		*crc = sum
		return nil
	}
	if size <= part {
		err := c.PutObject(ctx, ep, size, src(0, int(size)), putChecksum(ep, body), cond)
		if err == nil {
			err = sent()
		}
		if l := logAt(LevelDebug); l != nil && err == nil {
			l.LogAttrs(ctx, LevelDebug, "kvik: upload", slog.String("url", ep.String()), slog.Int64("size", size))
		}
		return err
	}
	id, err := c.CreateMultipart(ctx, ep)
	if err != nil {
		return err
	}
	tasks := sched.Split(0, int(size), int(part))
	if l := logAt(LevelInfo); l != nil {
		l.LogAttrs(ctx, LevelInfo, "kvik: multipart upload started", slog.String("url", ep.String()),
			slog.String("upload_id", id), slog.Int64("size", size), slog.Int("parts", len(tasks)), slog.Int64("part_size", part))
	}
	etags := make([]string, len(tasks))
	fn := func(ctx context.Context, t sched.Task) (int, error) {
		etag, err := c.UploadPart(ctx, ep, id, int(t.Off/part)+1, int64(t.Len), src(t.Off, t.Len))
		if err != nil {
			return 0, fmt.Errorf("part %d: %w", t.Off/part+1, err)
		}
		etags[t.Off/part] = etag
		return t.Len, nil
	}
	done := make(chan error, 1)
	sched.Run(ctx, poolFor(d, ""), tasks, fn, func(_ int, err error) { done <- err })
	if err = <-done; err == nil {
		err = sent()
	}
	if err == nil && body.unchanged != nil {
		err = body.unchanged()
	}
	if err == nil {
		err = c.CompleteMultipart(ctx, ep, id, etags, cond)
	}
	if err == nil {
		if l := logAt(LevelInfo); l != nil {
			l.LogAttrs(ctx, LevelInfo, "kvik: multipart upload completed", slog.String("url", ep.String()),
				slog.String("upload_id", id), slog.Int64("size", size), slog.Int("parts", len(tasks)))
		}
		return nil
	}
	// Abort even when ctx is cancelled, so that no parts linger.
	actx, cancel := context.WithTimeout(context.WithoutCancel(ctx), d.HTTPTimeout)
	defer cancel()
	aerr := c.AbortMultipartFully(actx, ep, id, 3)
	if l := logAt(LevelWarn); l != nil {
		attrs := []slog.Attr{slog.String("url", ep.String()), slog.String("upload_id", id), slog.String("error", err.Error())}
		if aerr != nil {
			attrs = append(attrs, slog.String("abort_error", aerr.Error()))
		}
		l.LogAttrs(ctx, LevelWarn, "kvik: multipart upload aborted", attrs...)
	}
	if aerr != nil {
		return fmt.Errorf("%w (and aborting the upload failed: %v)", err, aerr)
	}
	return err
}

// checksummed reports whether one-request uploads to ep send their
// body's CRC-32C (putChecksum): S3 checks it.
func checksummed(ep *remote.Endpoint) bool {
	return ep.Type == RemoteS3 || ep.Type == RemoteS3Public
}

// inHost reads all of body into host memory, for a one-request upload
// of device memory (at most a part, so bounded by TaskSize).
func inHost(body bodySource) (bodySource, error) {
	buf := make([]byte, body.size)
	r := body.open(0, len(buf))
	_, err := io.ReadFull(r, buf)
	if cerr := r.Close(); err == nil {
		err = cerr
	}
	if err != nil {
		return bodySource{}, err
	}
	return bodySource{size: body.size, reread: true, open: func(off int64, n int) io.ReadCloser {
		return io.NopCloser(bytes.NewReader(buf[off : off+int64(n)]))
	}}, nil
}

// putChecksum returns the CRC-32C of a one-request upload's body for the
// server to check (remote.Client.PutObject), or nil: for bodies in host
// memory or a file sent to S3 (a file that changes in between fails the
// upload rather than store a mixture; device memory comes to host memory
// first, inHost). A part of a multipart upload needs none: Complete
// names each part by the ETag of the attempt that succeeded, so a stale
// attempt cannot take its place.
func putChecksum(ep *remote.Endpoint, body bodySource) *uint32 {
	if !body.reread || !checksummed(ep) {
		return nil
	}
	h := crc32.New(remote.Castagnoli)
	r := body.open(0, int(body.size))
	defer r.Close()
	if _, err := io.Copy(h, r); err != nil {
		return nil // the upload's own read reports it
	}
	sum := h.Sum32()
	return &sum
}

// WithUploadCRC32C makes UploadS3, UploadS3Device, UploadFileS3 and
// SaveFile to S3 (and the formats' Save to s3://) store in *sum, once the upload has succeeded, the CRC-32C (Castagnoli,
// as hash/crc32) of the bytes sent: computed over each part's body as
// the transport reads it, so with no second pass over the data, and
// combined in part order. A caller that reads the object back can
// compare its checksum with this one (kvik cp does).
func WithUploadCRC32C(sum *uint32) RemoteOption { return func(o *remoteOptions) { o.uploadCRC = sum } }

// crc32.Castagnoli, reversed
