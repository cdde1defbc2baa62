package npy

import (
	"archive/zip"
	"bytes"
	"context"
	"encoding/binary"
	"errors"
	"fmt"
	"hash/crc32"
	"io"
	"io/fs"
	"strings"
	"sync"
	"unicode/utf8"

	"golang.org/x/sync/errgroup"

	"github.com/kvikgo/kvik"
	"github.com/kvikgo/kvik/cuda"
	"github.com/kvikgo/kvik/internal/crcsum"
	"github.com/kvikgo/kvik/internal/devmem"
	"github.com/kvikgo/kvik/internal/formatkit/codecpick"
	"github.com/kvikgo/kvik/internal/formatkit/tensorload"
	"github.com/kvikgo/kvik/internal/formatkit/zipkit"
	"github.com/kvikgo/kvik/internal/hostmem"
	"github.com/kvikgo/kvik/internal/kernels"
	"github.com/kvikgo/kvik/internal/libdeflate"
)

// ErrInvalidArchive reports a .npz file that is not a well-formed ZIP
// archive of .npy files: a broken directory, a member whose sizes do not
// agree or whose CRC-32 does not match, a compression other than none and
// DEFLATE, two members of one name. A member that is a broken .npy file
// is ErrInvalidHeader or ErrUnsupportedDtype instead.
var ErrInvalidArchive = errors.New("npy: invalid .npz archive")

// maxInflate bounds how many bytes DEFLATE can make of one: a member
// whose sizes claim more is refused before anything is allocated.
const maxInflate = 1032

// npzLoads is how many members a load reads at once.
const npzLoads = 8

// Archive is a loaded .npz file (NumPy's savez and savez_compressed: a
// ZIP archive of .npy files): its arrays by name, the member's name less
// ".npy", in the archive's order. Close frees their device memory.
type Archive struct {
	Names  []string
	Arrays map[string]*Array
	// Other names the members that are not .npy files, which NumPy's
	// load returns as bytes: they are not read.
	Other []string
}

// Close frees the device memory of every array; it does nothing for host
// arrays.
func (a *Archive) Close() error {
	var err error
	for _, arr := range a.Arrays {
		if arr == nil {
			continue
		}
		if e := arr.Close(); err == nil {
			err = e
		}
	}
	return err
}

// LoadNpz reads the .npz file at name, a path or URL as for ReadHeader,
// each array into new memory on the CUDA device that o names (device 0
// when o is nil). An array stored uncompressed (np.savez) is read straight
// from the file as Load reads a .npy file (in parallel reads, ranged GETs
// for a URL), its member's CRC-32 then checked on the GPU by a kernel of
// kvik's; a compressed one (np.savez_compressed) is inflated in host
// memory, its CRC-32 checked, then copied. Several arrays are read at
// once. A CRC-32 that does not match is ErrInvalidArchive. Cancelling ctx
// stops the reads and frees what was loaded.
func LoadNpz(ctx context.Context, name string, o *Options, opts ...kvik.RemoteOption) (*Archive, error) {
	return tensorload.Open(ctx, name, opts, func(r kvik.Reader) (*Archive, error) { return LoadNpzReader(ctx, r, o) })
}

// LoadNpzHost is LoadNpz into host memory (each Array's Data); o is
// ignored. Every array's CRC-32 is checked.
func LoadNpzHost(ctx context.Context, name string, o *Options, opts ...kvik.RemoteOption) (*Archive, error) {
	return tensorload.Open(ctx, name, opts, func(r kvik.Reader) (*Archive, error) { return LoadNpzHostReader(ctx, r, o) })
}

// LoadNpzReader is LoadNpz from a file the caller opened (any kvik
// handle); r stays open.
func LoadNpzReader(ctx context.Context, r kvik.Reader, o *Options) (*Archive, error) {
	device, err := o.device()
	if err != nil {
		return nil, readErr(r, err)
	}
	return tensorload.Whole(r, func() (*Archive, error) { return loadNpz(ctx, r, device) })
}

// LoadNpzHostReader is LoadNpzHost from a file the caller opened; r stays
// open.
func LoadNpzHostReader(ctx context.Context, r kvik.Reader, o *Options) (*Archive, error) {
	return tensorload.Whole(r, func() (*Archive, error) { return loadNpz(ctx, r, -1) })
}

// npzMember is a .npy member of an archive.
type npzMember struct {
	name string
	f    *zip.File
}

// loadNpz loads r's arrays onto device (host memory when device < 0).
func loadNpz(ctx context.Context, r kvik.Reader, device int) (*Archive, error) {
	size, err := r.Size()
	if err == nil {
		var a *Archive
		if a, err = loadNpzAt(ctx, tensorload.ReaderAt(ctx, r), size, r, device); err == nil {
			return a, nil
		}
	}
	return nil, readErr(r, ctxErr(ctx, err))
}

// openNpz reads the directory of the archive of size bytes that ra
// reads and returns its .npy members, in order, the names of the others,
// and ra bounded by size; two members of one name are ErrInvalidArchive.
func openNpz(ra io.ReaderAt, size int64) (members []npzMember, other []string, _ io.ReaderAt, err error) {
	zr, ra, err := zipkit.Open(ra, size, ErrInvalidArchive)
	if err != nil {
		return nil, nil, nil, err
	}
	seen := map[string]bool{}
	for _, f := range zr.File {
		key, ok := strings.CutSuffix(f.Name, ".npy")
		switch {
		case !ok:
			other = append(other, f.Name)
		case seen[key]:
			return nil, nil, nil, fmt.Errorf("%w: two members named %q", ErrInvalidArchive, f.Name)
		default:
			seen[key] = true
			members = append(members, npzMember{key, f})
		}
	}
	return members, other, ra, nil
}

// loadNpzAt loads the arrays of the archive of size bytes that ra reads:
// into host memory when device < 0, else onto device, the stored ones
// read from r (the same file).
func loadNpzAt(ctx context.Context, ra io.ReaderAt, size int64, r kvik.Reader, device int) (*Archive, error) {
	members, other, ra, err := openNpz(ra, size)
	if err != nil {
		return nil, err
	}
	a := &Archive{Arrays: map[string]*Array{}, Other: other}
	for _, m := range members {
		a.Names = append(a.Names, m.name)
	}
	loaded := make([]*Array, len(members))
	g, gctx := errgroup.WithContext(ctx)
	g.SetLimit(npzLoads)
	for i, m := range members {
		g.Go(func() (err error) {
			loaded[i], err = loadMember(gctx, r, ra, size, m.f, device)
			if err != nil {
				err = fmt.Errorf("member %q: %w", m.f.Name, err)
			}
			return err
		})
	}
	err = g.Wait()
	for i, m := range members {
		a.Arrays[m.name] = loaded[i]
	}
	if err != nil {
		a.Close()
		return nil, err
	}
	return a, nil
}

// archiveErr wraps archive/zip's errors, and a member's DEFLATE stream's,
// in ErrInvalidArchive.
func archiveErr(err error) error { return zipkit.Err(err, ErrInvalidArchive) }

// checkMember returns the size of f's .npy file, checking f's sizes and
// compression.
func checkMember(f *zip.File) (int64, error) {
	n := int64(f.UncompressedSize64)
	c := int64(f.CompressedSize64)
	switch {
	case n < 0 || c < 0:
		return 0, fmt.Errorf("%w: sizes %d and %d", ErrInvalidArchive, f.UncompressedSize64, f.CompressedSize64)
	case f.Method == zip.Store && n != c:
		return 0, fmt.Errorf("%w: stored, of %d bytes compressed and %d not", ErrInvalidArchive, c, n)
	case f.Method == zip.Deflate && n/maxInflate > c:
		return 0, fmt.Errorf("%w: %d bytes said to inflate to %d", ErrInvalidArchive, c, n)
	case f.Method != zip.Store && f.Method != zip.Deflate:
		return 0, fmt.Errorf("%w: compression method %d", ErrInvalidArchive, f.Method)
	}
	return n, nil
}

// storedHeader reads the .npy header of f, a stored member of n bytes in
// an archive of size bytes, and returns it, its DataOffset the array's
// place in the archive, where the member starts, and the CRC-32 of the
// header's bytes (the start of the member's).
func storedHeader(ra io.ReaderAt, size int64, f *zip.File, n int64) (*Header, int64, uint32, error) {
	off, err := zipkit.DataAt(f, size, ErrInvalidArchive)
	if err != nil {
		return nil, 0, 0, err
	}
	p := &recordAt{r: io.NewSectionReader(ra, off, n)}
	h, err := DecodeHeader(p, n)
	if err != nil {
		return nil, 0, 0, err
	}
	sum := crc32.ChecksumIEEE(p.got[:h.DataOffset])
	h.DataOffset += off
	return h, off, sum, nil
}

// recordAt keeps the bytes read from r's start, as far as the reads run
// on from there (DecodeHeader reads a header from its start on).
type recordAt struct {
	r   io.ReaderAt
	got []byte
}

func (p *recordAt) ReadAt(b []byte, off int64) (int, error) {
	n, err := p.r.ReadAt(b, off)
	if off == int64(len(p.got)) {
		p.got = append(p.got, b[:n]...)
	}
	return n, err
}

// loadMember loads the .npy file that f holds, in an archive of size
// bytes.
func loadMember(ctx context.Context, r kvik.Reader, ra io.ReaderAt, size int64, f *zip.File, device int) (*Array, error) {
	n, err := checkMember(f)
	if err != nil {
		return nil, err
	}
	if f.Method == zip.Deflate {
		return inflateMember(ctx, ra, size, f, device)
	}
	h, off, hsum, err := storedHeader(ra, size, f, n)
	if err != nil {
		return nil, err
	}
	if device >= 0 {
		return loadStoredDevice(ctx, r, h, device, hsum, f.CRC32)
	}
	// The member whole, .npy header and array in one read: its CRC-32
	// covers both.
	if err := hostmem.Check(n, "array"); err != nil {
		return nil, err
	}
	buf := make([]byte, n)
	if _, err := ra.ReadAt(buf, off); err != nil {
		return nil, err
	}
	if err := checkCRC(crcsum.IEEE.Sum(0, buf), f.CRC32); err != nil {
		return nil, err
	}
	return &Array{Header: *h, Data: buf[h.DataOffset-off:], Device: -1}, nil
}

// checkCRC fails with ErrInvalidArchive where a member's CRC-32, sum,
// is not the one its directory entry gives.
func checkCRC(sum, want uint32) error {
	if sum != want {
		return fmt.Errorf("%w: CRC-32 %08x, the directory says %08x", ErrInvalidArchive, sum, want)
	}
	return nil
}

// loadStoredDevice loads the array of h, a stored member whose header's
// bytes sum to hsum, onto device and checks the member's CRC-32 against
// want there.
func loadStoredDevice(ctx context.Context, r kvik.Reader, h *Header, device int, hsum, want uint32) (*Array, error) {
	a, err := loadDevice(ctx, r, h, device)
	if err != nil {
		return nil, err
	}
	sum := hsum
	if a.Ptr != 0 {
		sum, err = deviceCRC(hsum, a.Ptr, h.Size())
	}
	if err == nil {
		err = checkCRC(sum, want)
	}
	if err != nil {
		a.Close()
		return nil, err
	}
	return a, nil
}

// nativeInflate reports whether members are inflated by libdeflate, as
// KVIK_DEFLATE picks it for zarr (zarr.DeflateEnv): where it loads
// ("auto", the default), always ("native": an error where it cannot),
// never ("go": klauspost/compress, which inflated float32 members at a
// third of its rate on the H200, npz_gpu.sh). Tests replace it.
var nativeInflate = sync.OnceValues(func() (bool, error) {
	return codecpick.NativeNow(codecpick.DeflateEnv, libdeflate.Load)
})

// inflateMember inflates f, a compressed .npy file in an archive of size
// bytes that ra reads, into host memory, checking its size and CRC-32,
// and, for device >= 0, copies its array to new memory there.
func inflateMember(ctx context.Context, ra io.ReaderAt, size int64, f *zip.File, device int) (*Array, error) {
	n := int64(f.UncompressedSize64)
	if err := hostmem.Check(n, "array"); err != nil {
		return nil, err
	}
	native, err := nativeInflate()
	if err != nil {
		return nil, err
	}
	inflate := inflateGo
	if native {
		inflate = inflateNative
	}
	buf, err := inflate(ctx, ra, size, f)
	if err != nil {
		return nil, err
	}
	h, err := DecodeHeader(bytes.NewReader(buf), n)
	if err != nil {
		return nil, err
	}
	data := buf[h.DataOffset:]
	if device < 0 {
		return &Array{Header: *h, Data: data, Device: -1}, nil
	}
	return copyToDevice(h, data, device)
}

// inflateNative reads f's compressed bytes whole and inflates them with
// libdeflate into a buffer of the size the directory gives.
func inflateNative(ctx context.Context, ra io.ReaderAt, size int64, f *zip.File) ([]byte, error) {
	off, err := zipkit.DataAt(f, size, ErrInvalidArchive)
	if err != nil {
		return nil, err
	}
	src := make([]byte, f.CompressedSize64)
	if _, err := ra.ReadAt(src, off); err != nil {
		return nil, archiveErr(err)
	}
	buf := make([]byte, f.UncompressedSize64)
	_, n, err := libdeflate.DeflateDecompress(buf, src)
	switch {
	case err != nil:
		return nil, fmt.Errorf("%w: DEFLATE data: %v", ErrInvalidArchive, err)
	case n != len(buf):
		return nil, fmt.Errorf("%w: %d bytes inflated, the directory says %d", ErrInvalidArchive, n, len(buf))
	}
	if err := checkCRC(crcsum.IEEE.Sum(0, buf), f.CRC32); err != nil {
		return nil, err
	}
	return buf, nil
}

// inflateGo inflates f with klauspost/compress as archive/zip streams it
// (which checks its CRC-32 at the end).
func inflateGo(ctx context.Context, _ io.ReaderAt, _ int64, f *zip.File) ([]byte, error) {
	n := int64(f.UncompressedSize64)
	rc, err := f.Open()
	if err != nil {
		return nil, archiveErr(err)
	}
	defer rc.Close()
	buf := make([]byte, n)
	if _, err := io.ReadFull(ctxRead{ctx, rc}, buf); err != nil {
		return nil, archiveErr(err)
	}
	// archive/zip checks the CRC-32 once the stream ends.
	if k, err := rc.Read(make([]byte, 1)); k != 0 || err != io.EOF {
		if err == nil || err == io.EOF {
			err = fmt.Errorf("%w: more than the %d bytes the directory says", ErrInvalidArchive, n)
		}
		return nil, archiveErr(err)
	}
	return buf, nil
}

// copyToDevice copies data, the array of h, to new memory on device.
func copyToDevice(h *Header, data []byte, device int) (*Array, error) {
	a, cctx, err := newDeviceArray(h, device)
	if err != nil || a.Ptr == 0 {
		return a, err
	}
	if err := cuda.WithContext(cctx, func() error { return cuda.MemcpyHtoD(a.Ptr, data) }); err != nil {
		a.Close()
		return nil, err
	}
	return a, nil
}

// ctxRead is r, stopped once ctx is done.
type ctxRead struct {
	ctx context.Context
	r   io.Reader
}

func (c ctxRead) Read(p []byte) (int, error) {
	if err := c.ctx.Err(); err != nil {
		return 0, err
	}
	return c.r.Read(p)
}

// NpzArray is an array SaveNpz writes: the member Name+".npy".
type NpzArray struct {
	Name string
	SaveArray
}

// SaveNpz writes arrays as a .npz file at path, as numpy.savez does: a ZIP
// archive of one uncompressed .npy member each, ZIP64 where a size or an
// offset needs it, which LoadNpz reads straight from the file. It writes
// through kvik.SaveFile, atomically, as Save does (path may be an s3://
// URL). A ZIP member's CRC-32 precedes its bytes: an array in device
// memory is summed there first (by a kernel of kvik's), then written as
// Save writes it, with no copy of it in host memory. Names must be
// non-empty, distinct, valid UTF-8 without NUL.
func SaveNpz(ctx context.Context, path string, arrays []NpzArray, opts ...kvik.RemoteOption) error {
	pieces, err := npzPieces(arrays)
	if err != nil {
		return &fs.PathError{Op: "write", Path: kvik.RedactURL(path), Err: err}
	}
	return kvik.SaveFile(ctx, path, pieces, opts...)
}

// zip64Mark is what a plain ZIP record holds in place of a size or an
// offset kept in its ZIP64 extra field; sizes and offsets from zip64At
// (zip64Mark; tests lower it) go there.
const zip64Mark = 1<<32 - 1

var zip64At uint64 = zip64Mark

// npzPieces lays out the archive of arrays: each member's local header,
// .npy header and bytes, then the central directory.
func npzPieces(arrays []NpzArray) ([]kvik.Piece, error) {
	var pieces []kvik.Piece
	var dir []byte
	var off uint64
	seen := map[string]bool{}
	for _, a := range arrays {
		if a.Name == "" || !utf8.ValidString(a.Name) || strings.ContainsRune(a.Name, 0) || seen[a.Name] {
			return nil, fmt.Errorf("%w: array name %q (empty, not UTF-8, or given twice)", ErrInvalidArgument, a.Name)
		}
		seen[a.Name] = true
		n, err := checkShape(a.Dtype, a.Shape)
		if err != nil {
			return nil, err
		}
		body, err := a.body(n)
		if err != nil {
			return nil, fmt.Errorf("%s: %w", a.Name, err)
		}
		hdr := encodeHeader(a.Dtype, a.Shape, a.Fortran)
		sum := crc32.ChecksumIEEE(hdr)
		if body.Ptr != 0 {
			sum, err = deviceCRC(sum, body.Ptr, body.Size)
		} else {
			sum = crcsum.IEEE.Sum(sum, body.Data)
		}
		if err != nil {
			return nil, fmt.Errorf("%s: %w", a.Name, err)
		}
		m := zipMember{name: a.Name + ".npy", crc: sum, size: uint64(len(hdr)) + uint64(n), off: off}
		local := m.local()
		pieces = append(pieces, kvik.Piece{Data: local}, kvik.Piece{Data: hdr}, body)
		dir = append(dir, m.central()...)
		off += uint64(len(local)) + m.size
	}
	return append(pieces, kvik.Piece{Data: append(dir, zipEnd(len(arrays), uint64(len(dir)), off)...)}), nil
}

// loadCRC32 loads the GPU's CRC-32 kernel; tests replace it to check
// the way without it.
var loadCRC32 = kernels.LoadCRC32

// crcPiece is the most device memory that deviceCRC copies to host
// memory at once where the kernel cannot run.
const crcPiece = 64 << 20

// deviceCRC continues the CRC-32 crc over the n > 0 bytes of device
// memory at ptr once the work queued on its context's stream 0 is done:
// on the GPU (kernels.CRC32, a few milliseconds a GB), or, where its
// kernel cannot load, through host memory crcPiece bytes at a time.
func deviceCRC(crc uint32, ptr cuda.DevicePtr, n int64) (uint32, error) {
	r, err := devmem.ResolveSynced(ptr, int(n), 0)
	if err != nil {
		return crc, err
	}
	err = cuda.WithContext(r.Ctx, func() error {
		if u, err := loadCRC32(r.Ctx); err == nil {
			crc, err = u.Update(0, crc, crcsum.IEEE, ptr, n)
			return err
		}
		buf := make([]byte, min(n, crcPiece))
		for off := int64(0); off < n; off += int64(len(buf)) {
			b := buf[:min(int64(len(buf)), n-off)]
			if err := cuda.MemcpyDtoH(b, ptr+cuda.DevicePtr(off)); err != nil {
				return err
			}
			crc = crcsum.IEEE.Sum(crc, b)
		}
		return nil
	})
	return crc, err
}

// zipMember is what a ZIP's records say of a stored member.
type zipMember struct {
	name      string
	crc       uint32
	size, off uint64
}

// zip64 reports whether the member's size or offset needs ZIP64's.
func (m zipMember) zip64() bool { return m.size >= zip64At || m.off >= zip64At }

// flags sets the UTF-8 bit for a name that is not ASCII.
func (m zipMember) flags() uint16 {
	for i := 0; i < len(m.name); i++ {
		if m.name[i] >= 0x80 {
			return 1 << 11
		}
	}
	return 0
}

// local returns the member's local file header (with its ZIP64 extra
// field of both sizes where needed).
func (m zipMember) local() []byte {
	b := binary.LittleEndian.AppendUint32(nil, 0x04034b50)
	size32, version, extra := uint32(m.size), uint16(20), []byte(nil)
	if m.zip64() {
		size32, version = zip64Mark, 45
		extra = binary.LittleEndian.AppendUint16(binary.LittleEndian.AppendUint16(nil, 1), 16)
		extra = binary.LittleEndian.AppendUint64(binary.LittleEndian.AppendUint64(extra, m.size), m.size)
	}
	b = appendUint16s(b, version, m.flags(), 0, 0, 0x21) // stored; 1980-01-01 00:00
	b = binary.LittleEndian.AppendUint32(b, m.crc)
	b = binary.LittleEndian.AppendUint32(binary.LittleEndian.AppendUint32(b, size32), size32)
	b = appendUint16s(b, uint16(len(m.name)), uint16(len(extra)))
	return append(append(b, m.name...), extra...)
}

// central returns the member's central directory record.
func (m zipMember) central() []byte {
	b := binary.LittleEndian.AppendUint32(nil, 0x02014b50)
	size32, off32, version := uint32(m.size), uint32(m.off), uint16(20)
	var extra []byte
	if m.zip64() {
		version = 45
		extra = binary.LittleEndian.AppendUint16(nil, 1)
		var fields []uint64
		if m.size >= zip64At {
			size32 = zip64Mark
			fields = append(fields, m.size, m.size)
		}
		if m.off >= zip64At {
			off32 = zip64Mark
			fields = append(fields, m.off)
		}
		extra = binary.LittleEndian.AppendUint16(extra, uint16(8*len(fields)))
		for _, f := range fields {
			extra = binary.LittleEndian.AppendUint64(extra, f)
		}
	}
	b = appendUint16s(b, 3<<8|version, version, m.flags(), 0, 0, 0x21)
	b = binary.LittleEndian.AppendUint32(b, m.crc)
	b = binary.LittleEndian.AppendUint32(binary.LittleEndian.AppendUint32(b, size32), size32)
	b = appendUint16s(b, uint16(len(m.name)), uint16(len(extra)), 0, 0, 0)
	b = binary.LittleEndian.AppendUint32(b, 0o100644<<16) // a regular file, rw-r--r--
	b = binary.LittleEndian.AppendUint32(b, off32)
	return append(append(b, m.name...), extra...)
}

// zipEnd returns the end of the central directory of n members, size
// bytes at off: with ZIP64's record and locator where a count, size or
// offset needs them.
func zipEnd(n int, size, off uint64) []byte {
	var b []byte
	n16, size32, off32 := uint16(n), uint32(size), uint32(off)
	if n >= 0xffff || size >= zip64At || off >= zip64At {
		n16, size32, off32 = 0xffff, zip64Mark, zip64Mark
		b = binary.LittleEndian.AppendUint32(b, 0x06064b50)
		b = binary.LittleEndian.AppendUint64(b, 44)
		b = appendUint16s(b, 3<<8|45, 45)
		b = binary.LittleEndian.AppendUint64(binary.LittleEndian.AppendUint64(b, 0), uint64(n)) // disk numbers 0; entries here
		b = binary.LittleEndian.AppendUint64(b, uint64(n))
		b = binary.LittleEndian.AppendUint64(binary.LittleEndian.AppendUint64(b, size), off)
		b = binary.LittleEndian.AppendUint32(b, 0x07064b50) // the locator
		b = binary.LittleEndian.AppendUint32(b, 0)
		b = binary.LittleEndian.AppendUint64(b, off+size)
		b = binary.LittleEndian.AppendUint32(b, 1)
	}
	b = binary.LittleEndian.AppendUint32(b, 0x06054b50)
	b = appendUint16s(b, 0, 0, n16, n16)
	b = binary.LittleEndian.AppendUint32(binary.LittleEndian.AppendUint32(b, size32), off32)
	return appendUint16s(b, 0)
}

func appendUint16s(b []byte, vs ...uint16) []byte {
	for _, v := range vs {
		b = binary.LittleEndian.AppendUint16(b, v)
	}
	return b
}

// NpzHeader is what ReadNpzHeader reads of a .npz file: the header of
// each array, by name, in the archive's order, and the members that are
// not .npy files.
type NpzHeader struct {
	Names   []string
	Headers map[string]*Header
	// Compressed names the arrays whose members are deflated: their
	// header's DataOffset is within the member's inflated bytes, not the
	// file's.
	Compressed map[string]bool
	Other      []string
}

// ReadNpzHeader reads the directory of the .npz file at name (a path or
// URL as for ReadHeader) and the .npy header of each member, without the
// arrays: a stored member's header is read where it lies, a deflated
// one's from the start of its stream. o is as for ReadHeader.
func ReadNpzHeader(ctx context.Context, name string, o *Options, opts ...kvik.RemoteOption) (*NpzHeader, error) {
	return tensorload.Open(ctx, name, opts, func(r kvik.Reader) (*NpzHeader, error) {
		size, err := r.Size()
		if err == nil {
			var h *NpzHeader
			if h, err = readNpzHeader(tensorload.ReaderAt(ctx, r), size); err == nil {
				return h, nil
			}
		}
		return nil, readErr(r, ctxErr(ctx, err))
	})
}

func readNpzHeader(ra io.ReaderAt, size int64) (*NpzHeader, error) {
	members, other, ra, err := openNpz(ra, size)
	if err != nil {
		return nil, err
	}
	h := &NpzHeader{Headers: map[string]*Header{}, Compressed: map[string]bool{}, Other: other}
	for _, m := range members {
		mh, err := memberHeader(ra, size, m.f)
		if err != nil {
			return nil, fmt.Errorf("member %q: %w", m.f.Name, err)
		}
		h.Names = append(h.Names, m.name)
		h.Headers[m.name] = mh
		h.Compressed[m.name] = m.f.Method == zip.Deflate
	}
	return h, nil
}

// memberHeader reads the .npy header of f, a member of an archive of size
// bytes, checking the member's sizes as a load does.
func memberHeader(ra io.ReaderAt, size int64, f *zip.File) (*Header, error) {
	n, err := checkMember(f)
	if err != nil {
		return nil, err
	}
	if f.Method == zip.Store {
		h, _, _, err := storedHeader(ra, size, f, n)
		return h, err
	}
	rc, err := f.Open()
	if err != nil {
		return nil, archiveErr(err)
	}
	defer rc.Close()
	head := make([]byte, min(n, headerProbe+MaxHeaderSize))
	if _, err := io.ReadFull(rc, head); err != nil {
		return nil, archiveErr(err)
	}
	return DecodeHeader(prefixAt{head, n}, n)
}

// prefixAt reads the first bytes of a file of size bytes, which are all
// DecodeHeader reads of it but for the size.
type prefixAt struct {
	b    []byte
	size int64
}

func (p prefixAt) ReadAt(b []byte, off int64) (int, error) {
	if off >= int64(len(p.b)) {
		return 0, fmt.Errorf("%w: a header past the member's first %d bytes", ErrInvalidHeader, len(p.b))
	}
	n := copy(b, p.b[off:])
	if n < len(b) {
		return n, io.ErrUnexpectedEOF
	}
	return n, nil
}
