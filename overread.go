package kvik

import (
	"errors"
	"io"
	"sync"
	"syscall"

	"github.com/kvikgo/kvik/internal/posix"
	"github.com/kvikgo/kvik/internal/sched"
	"github.com/kvikgo/kvik/internal/staging"
)

// Over-read (KVIKIO_AUTO_DIRECT_IO_READ_OVERREAD): a read that goes to
// the drive with O_DIRECT reads its unaligned head and tail, which would
// otherwise be buffered reads of less than a page, with O_DIRECT too. Each
// such fragment is widened to the page boundaries around it, read into a
// page-aligned staging buffer, and its bytes copied out. On a cold file a
// buffered fragment costs a page-cache miss and the kernel's readahead
// around it, read again by the direct middle (or the next task); an
// over-read costs one or two pages from the drive and a copy of less than
// a page.

// overreads reports whether a read task planned as segs over-reads its
// fragments under settings d: over-read is on, the file has an O_DIRECT
// descriptor, and the task goes to the drive (the direct policy, or a
// plan with a direct part: a cached task stays buffered).
func (f *FileHandle) overreads(d Defaults, segs []sched.Segment) bool {
	if !d.AutoDirectIOReadOverread || f.fdDirect < 0 {
		return false
	}
	if d.ReadPolicy() == ReadPolicyDirect {
		return true
	}
	for _, s := range segs {
		if s.Direct {
			return true
		}
	}
	return false
}

// isFragment reports whether buffered segment s is a head, a tail or a
// read without a whole page: unaligned, within two pages once widened.
// Longer buffered segments are cached runs of the residency plan.
func isFragment(s sched.Segment) bool {
	lo := s.Off &^ (ps64 - 1)
	hi := alignUp64(s.Off+int64(s.Len), ps64)
	unaligned := s.Off != lo || s.Off+int64(s.Len) != hi
	return unaligned && hi-lo <= overreadSpan
}

// overreadSpan is the widest range an over-read reads: two pages.
var overreadSpan = 2 * ps64

// stagePool holds page-aligned staging buffers of overreadSpan bytes.
var stagePool = sync.Pool{New: func() any {
	raw := make([]byte, overreadSpan+ps64)
	skip := staging.AlignUp(staging.AddrOf(raw), pageSize) - staging.AddrOf(raw)
	b := raw[skip : skip+int(overreadSpan) : skip+int(overreadSpan)]
	return &b
}}

// overread reads b at off, a fragment (isFragment), with O_DIRECT: it
// reads the pages around it into a staging buffer and copies b's bytes
// out. A file that ends inside b gives the bytes before its end and
// io.EOF, as posix.ReadFull does; reading the file's short last page is
// not an error. If the file system refuses the direct read (EINVAL), b is
// read buffered.
func (f *FileHandle) overread(b []byte, off int64) (int, error) {
	lo := off &^ (ps64 - 1)
	hi := alignUp64(off+int64(len(b)), ps64)
	sp := stagePool.Get().(*[]byte)
	defer stagePool.Put(sp)
	stage := (*sp)[:hi-lo]
	n, err := f.directAligned(opRead, stage, lo)
	if errors.Is(err, syscall.EINVAL) {
		f.logDirectFallback(opRead, len(b), off, err)
		return posix.ReadFull(f.fd, b, off)
	}
	head := int(off - lo)
	got := copy(b, stage[min(head, n):n])
	switch {
	case got == len(b):
		return got, nil
	case err == nil:
		err = io.EOF // directAligned stops short only with an error
	}
	return got, err
}
