package zarr

import (
	"context"
	"errors"
	"fmt"
	"io/fs"
	"math/rand/v2"
	"time"

	"github.com/kvikgo/kvik"
)

// maxWriteTries bounds the reads and conditional writes of one chunk
// that writeChunkIf makes while other writers' versions come between.
var maxWriteTries = 100

// writeChunkIf writes a region's part of the chunk key into a
// RemoteStore opened WithProcessLocks (an optimistic read-modify-write):
// it reads the chunk with its ETag, has merge put the part into it (the
// stored bytes, found or not) and stores the result on the condition
// that the chunk is still the version read (or still missing); where
// another writer's version came between, it backs off and does it all
// again. It returns the encoded chunk. merge may answer that a chunk not
// found stays empty (all fill value): nothing is written, the write
// taking its place in the order of writes at the read.
func (a *Array) writeChunkIf(ctx context.Context, s *RemoteStore, key string, merge func(old []byte, found bool) (enc []byte, empty bool, err error)) ([]byte, error) {
	limit := a.maxStoredChunk()
	for try := 1; ; try++ {
		old, tag, err := s.getWithETag(ctx, key, nil, limit)
		found := err == nil
		if err != nil && !errors.Is(err, fs.ErrNotExist) {
			return nil, err
		}
		if found && tag == "" {
			return nil, fmt.Errorf("%w: %s: the server names no version (ETag) of the chunk, which a write of part of it must ask for", errors.ErrUnsupported, key)
		}
		enc, empty, err := merge(old, found)
		if err != nil || empty && !found {
			return nil, err
		}
		err = s.saveIf(ctx, key, kvik.Piece{Data: enc}, tag)
		if !errors.Is(err, kvik.ErrObjectChanged) {
			return enc, err
		}
		if try == maxWriteTries {
			return nil, fmt.Errorf("chunk %s: another version came between read and write %d times: %w", key, try, err)
		}
		if err := backOff(ctx, try); err != nil {
			return nil, err
		}
	}
}

// backOff waits before try+1 of a conflicting write: a random time up
// to 1 ms doubled per try, at most 100 ms, so that writers that met
// part ways; or until ctx ends.
func backOff(ctx context.Context, try int) error {
	return sleep(ctx, time.Duration(rand.Int64N(int64(min(time.Millisecond<<min(try, 7), 100*time.Millisecond))))+1)
}

// sleep waits d, or until ctx ends (its error).
func sleep(ctx context.Context, d time.Duration) error {
	t := time.NewTimer(d)
	defer t.Stop()
	select {
	case <-ctx.Done():
		return ctx.Err()
	case <-t.C:
		return nil
	}
}

// getWithETag is GetMax that also returns the object's ETag.
func (s *RemoteStore) getWithETag(ctx context.Context, key string, buf []byte, limit int64) ([]byte, string, error) {
	key, err := s.key(key)
	if err != nil {
		return nil, "", err
	}
	var tag string
	err = s.request(ctx, func() (err error) {
		buf, tag, err = s.p.GetWithETag(ctx, key, buf, limit)
		return err
	})
	return buf, tag, err
}
