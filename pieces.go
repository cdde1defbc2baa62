package kvik

import "github.com/kvikgo/kvik/cuda"

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
