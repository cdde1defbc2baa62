package kvik

import (
	"bytes"
	"io"

	"github.com/kvikgo/kvik/cuda"
	"github.com/kvikgo/kvik/internal/devmem"
)

// Piece is one run of bytes of a file that SaveFile writes: Data in host
// memory or, when Ptr is not 0, Size bytes of device memory at Ptr.
type Piece struct {
	Data []byte
	Ptr  cuda.DevicePtr
	Size int64
}

// Len returns the piece's length in bytes.
func (p Piece) Len() int64 {
	if p.Ptr != 0 {
		return p.Size
	}
	return int64(len(p.Data))
}

// piecesReader streams [off, off+n) of the concatenated pieces: host
// pieces from their slices, device pieces through pinned bounce buffers
// (staging.Planner.DeviceBody), which Close returns.
func piecesReader(d Defaults, pieces []Piece, devs []devmem.Range, off, n int64) io.ReadCloser {
	var rs []io.Reader
	var cs []io.Closer
	var pos int64
	for i, p := range pieces {
		l := p.Len()
		lo, hi := max(off, pos), min(off+n, pos+l)
		if lo < hi {
			a, b := lo-pos, hi-pos
			if p.Ptr == 0 {
				rs = append(rs, bytes.NewReader(p.Data[a:b]))
			} else {
				db := planner(d).DeviceBody(devs[i], a, int(b-a))
				rs, cs = append(rs, db), append(cs, db)
			}
		}
		pos += l
	}
	return &multiBody{Reader: io.MultiReader(rs...), closers: cs}
}

// multiBody is a request body made of several readers, closing those
// that hold resources when the transport closes it.
type multiBody struct {
	io.Reader
	closers []io.Closer
}

func (m *multiBody) Close() error {
	for _, c := range m.closers {
		c.Close()
	}
	return nil
}

// resolvePieces resolves the device pieces of pieces, by index (nil
// when there is none).
func resolvePieces(pieces []Piece) ([]devmem.Range, error) {
	var devs []devmem.Range
	for i, p := range pieces {
		if p.Ptr == 0 || p.Size == 0 {
			continue
		}
		if devs == nil {
			devs = make([]devmem.Range, len(pieces))
		}
		r, err := resolveSynced(p.Ptr, int(p.Size), 0)
		if err != nil {
			return nil, err
		}
		devs[i] = r
	}
	return devs, nil
}
