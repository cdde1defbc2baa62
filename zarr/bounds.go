package zarr

import (
	"context"
	"math"
	"math/bits"
)

// limitGetter is a store that bounds a whole-object read by the size the
// caller expects (RemoteStore): a longer object fails with an error
// matching kvik.ErrTooLarge instead of taking the memory a server claims.
type limitGetter interface {
	GetMax(ctx context.Context, key string, buf []byte, limit int64) ([]byte, error)
}

// storedSlack is what maxStored allows beyond twice a chunk's decoded
// size: any codec's fixed overhead (headers, checksums, a shard index).
const storedSlack = 1 << 20

// maxStored bounds the stored bytes of a chunk that decodes to shape
// elements of es bytes: twice its decoded size plus storedSlack, room
// for any codec's expansion of incompressible data (well under 1% for
// gzip, zstd, blosc, lz4).
func maxStored(shape []int, es int) int64 {
	n := uint64(max(es, 1))
	for _, d := range shape {
		hi, lo := bits.Mul64(n, uint64(max(d, 0)))
		if hi != 0 || lo > math.MaxInt64/4 {
			return math.MaxInt64
		}
		n = lo
	}
	return 2*int64(n) + storedSlack
}

// maxStoredChunk bounds the stored bytes of one of a's chunks: by its
// decoded size (maxStored), or by maxVarChunk for variable-length
// elements.
func (a *Array) maxStoredChunk() int64 {
	if a.meta.DataType.Variable() {
		return maxStored([]int{maxVarChunk}, 1)
	}
	return maxStored(a.meta.ChunkShape, a.meta.DataType.Size)
}

// getChunk reads key's whole object, bounded by limit when the store can
// bound it.
func getChunk(ctx context.Context, s Store, key string, buf []byte, limit int64) ([]byte, error) {
	if g, ok := s.(limitGetter); ok {
		return g.GetMax(ctx, key, buf, max(int64(cap(buf)), limit))
	}
	return s.Get(ctx, key, buf)
}

// GetMax is Get for an object of at most limit bytes: a longer one fails
// with an error matching kvik.ErrTooLarge (whatever its Content-Length
// claims, before that memory is taken).
func (s *RemoteStore) GetMax(ctx context.Context, key string, buf []byte, limit int64) ([]byte, error) {
	buf, _, err := s.getWithETag(ctx, key, buf, limit)
	return buf, err
}
