// Package zipkit is what the formats kept in ZIP archives (NumPy's .npz,
// PyTorch's torch.save files) share: reads bounded by the archive's
// size, a stored member's place checked against it, and archive/zip's
// and DEFLATE's errors put under the format's own. An archive's records
// are untrusted: archive/zip reads where they say, which may be
// anywhere.
package zipkit

import (
	"archive/zip"
	"errors"
	"fmt"
	"io"

	"github.com/klauspost/compress/flate"

	"github.com/kvikgo/kvik"
)

// Open reads the directory of the archive of size bytes that ra reads
// and returns it, and ra bounded by size for its members' reads; what
// is wrong with the archive is an error wrapping bad (the format's
// sentinel: npy.ErrInvalidArchive...).
func Open(ra io.ReaderAt, size int64, bad error) (*zip.Reader, io.ReaderAt, error) {
	ra = Bounded{ra, size, bad}
	zr, err := zip.NewReader(ra, size)
	if err != nil {
		return nil, nil, Err(err, bad)
	}
	zr.RegisterDecompressor(zip.Deflate, flate.NewReader)
	return zr, ra, nil
}

// Bounded is an archive's io.ReaderAt, refusing reads outside it (an
// error wrapping Bad) and ending at its Size.
type Bounded struct {
	R    io.ReaderAt
	Size int64
	Bad  error
}

func (b Bounded) ReadAt(p []byte, off int64) (int, error) {
	if off < 0 || off > b.Size {
		return 0, fmt.Errorf("%w: a read at %d of a %d-byte file", b.Bad, off, b.Size)
	}
	if int64(len(p)) > b.Size-off {
		n, err := b.R.ReadAt(p[:b.Size-off], off)
		if err == nil {
			err = io.EOF
		}
		return n, err
	}
	return b.R.ReadAt(p, off)
}

// DataAt returns where the stored bytes of f (CompressedSize64 of them)
// start in an archive of size bytes; a place outside it is an error
// wrapping bad.
func DataAt(f *zip.File, size int64, bad error) (int64, error) {
	off, err := f.DataOffset()
	if err != nil {
		return 0, Err(err, bad)
	}
	// archive/zip moves every offset by where it finds the directory
	// against where the end record says it is: one may land anywhere.
	if c := int64(f.CompressedSize64); off < 0 || off > size || c < 0 || c > size-off {
		return 0, fmt.Errorf("%w: %d bytes at offset %d of a %d-byte file", bad, f.CompressedSize64, off, size)
	}
	return off, nil
}

// Err wraps archive/zip's errors, a member's DEFLATE stream's and a cut
// archive's in bad; others (a failed read) pass as they are, a body a
// server cut short (kvik.ErrShortBody, which wraps the
// io.ErrUnexpectedEOF of a cut archive) among them.
func Err(err, bad error) error {
	if errors.Is(err, kvik.ErrShortBody) {
		return err
	}
	var corrupt flate.CorruptInputError
	var internal flate.InternalError
	if errors.Is(err, zip.ErrFormat) || errors.Is(err, zip.ErrAlgorithm) || errors.Is(err, zip.ErrChecksum) ||
		errors.Is(err, zip.ErrInsecurePath) || errors.Is(err, io.ErrUnexpectedEOF) || errors.Is(err, io.EOF) ||
		errors.As(err, &corrupt) || errors.As(err, &internal) {
		return fmt.Errorf("%w: %v", bad, err)
	}
	return err
}
