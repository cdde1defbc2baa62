package kvik

import (
	"context"
	"fmt"
	"io"
	"io/fs"
	"log/slog"
	"os"
	"strings"
	"sync"

	"github.com/kvikgo/kvik/cuda"
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
// the S3 object at url, like UploadS3: each part is copied to a pinned
// bounce buffer chunk by chunk as the request body is sent.
func UploadS3Device(ctx context.Context, url string, buf cuda.DevicePtr, size int, devOffset int64, opts ...RemoteOption) error {
	if size < 0 {
		return &fs.PathError{Op: "write", Path: RedactURL(url), Err: fmt.Errorf("%w: negative size %d", ErrInvalidArgument, size)}
	}
	r, err := resolveSynced(buf, size, devOffset)
	if err != nil {
		return &fs.PathError{Op: "write", Path: RedactURL(url), Err: err}
	}
	return uploadPieces(ctx, url, []Piece{{Ptr: r.ptr, Size: int64(size)}}, []deviceRange{r}, opts)
}

// uploadPieces uploads the concatenated pieces as the object at url;
// devs holds the resolved range of each device piece, by index (nil
// when there is none).
func uploadPieces(ctx context.Context, url string, pieces []Piece, devs []deviceRange, opts []RemoteOption) error {
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
		return uploadObject(ctx, ep, c, d, pieces, devs)
	}()
	if err != nil {
		return &fs.PathError{Op: "write", Path: RedactURL(url), Err: err}
	}
	return nil
}

// uploadToEndpoint uploads the concatenated pieces as the object of ep
// with c (a RemotePrefix's object and client).
func uploadToEndpoint(ctx context.Context, ep *remote.Endpoint, c *remote.Client, pieces []Piece) error {
	devs, err := resolvePieces(pieces)
	if err != nil {
		return err
	}
	d, err := GetDefaults()
	if err != nil {
		return err
	}
	return uploadObject(ctx, ep, c, d, pieces, devs)
}

// resolvePieces resolves the device pieces of pieces, by index (nil
// when there is none).
func resolvePieces(pieces []Piece) ([]deviceRange, error) {
	var devs []deviceRange
	for i, p := range pieces {
		if p.Ptr == 0 || p.Size == 0 {
			continue
		}
		if devs == nil {
			devs = make([]deviceRange, len(pieces))
		}
		r, err := resolveSynced(p.Ptr, int(p.Size), 0)
		if err != nil {
			return nil, err
		}
		devs[i] = r
	}
	return devs, nil
}

// uploadObject uploads the concatenated pieces as the object of ep with
// c: one PUT, or a multipart upload aborted on any error.
func uploadObject(ctx context.Context, ep *remote.Endpoint, c *remote.Client, d Defaults, pieces []Piece, devs []deviceRange) error {
	var size int64
	for _, p := range pieces {
		size += p.Len()
	}
	src := func(off int64, n int) remote.Body {
		return func() (io.Reader, error) { return piecesReader(d, pieces, devs, off, int64(n)), nil }
	}
	part := remote.PartSize(size, d.TaskSize)
	if size <= part {
		err := c.PutObject(ctx, ep, size, src(0, int(size)))
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
		err = c.CompleteMultipart(ctx, ep, id, etags)
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

// deviceReader streams device memory through a pinned bounce buffer: each
// Read that finds the buffer drained copies the next chunk from the
// device. The transport may Close it from another goroutine while a Read
// runs, so mu keeps the buffer from going back to the pool mid-copy.
type deviceReader struct {
	mu      sync.Mutex
	r       deviceRange
	dev     cuda.DevicePtr
	size    int
	pool    *bouncePool
	bufSize int
	pos     int // bytes copied from the device
	bb      *bounceBuffer
	chunk   []byte // the part of bb not yet read
}

func (d *deviceReader) Read(p []byte) (int, error) {
	d.mu.Lock()
	defer d.mu.Unlock()
	if d.pos == -1 {
		return 0, ErrClosed
	}
	if len(d.chunk) == 0 {
		if d.pos == d.size {
			d.free()
			return 0, io.EOF
		}
		if err := d.fill(); err != nil {
			d.free()
			return 0, err
		}
	}
	n := copy(p, d.chunk)
	d.chunk = d.chunk[n:]
	return n, nil
}

func (d *deviceReader) fill() error {
	var n int
	err := cuda.WithContext(d.r.ctx, func() error {
		if d.bb == nil {
			bb, err := d.pool.get(d.bufSize) // pinning needs the context
			if err != nil {
				return err
			}
			d.bb = bb
		}
		n = min(len(d.bb.mem), d.size-d.pos)
		return cuda.MemcpyDtoH(d.bb.mem[:n], d.dev+cuda.DevicePtr(d.pos))
	})
	if err != nil {
		return err
	}
	d.chunk = d.bb.mem[:n]
	d.pos += n
	return nil
}

// Close returns the bounce buffer; the transport calls it when it is done
// with the body.
func (d *deviceReader) Close() error {
	d.mu.Lock()
	defer d.mu.Unlock()
	d.free()
	d.pos = -1
	return nil
}

func (d *deviceReader) free() {
	if d.bb != nil {
		bb := d.bb
		cuda.WithContext(d.r.ctx, func() error { d.pool.put(bb); return nil })
		d.bb, d.chunk = nil, nil
	}
}
