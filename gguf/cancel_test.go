package gguf

import (
	"context"
	"math/rand/v2"
	"testing"

	"github.com/kvikgo/kvik"
	"github.com/kvikgo/kvik/internal/testkit/s3test"
)

// cancelFormat is GGUF for the cancellation checks of s3test: a file of
// six I8 tensors of 4 MiB and a bit, with metadata.
func cancelFormat() s3test.Format {
	rng := rand.New(rand.NewPCG(26, 3))
	ts := make([]SaveTensor, 6)
	for i := range ts {
		n := int64(4<<20 + 99)
		ts[i] = SaveTensor{Name: "blk." + string(rune('0'+i)) + ".weight", Type: I8, Shape: []int64{n}, Data: randomBytes(rng, n)}
	}
	var meta Metadata
	meta.Set("general.architecture", "llama")
	done := func(m *Model, err error) error {
		if err == nil {
			m.Close()
		}
		return err
	}
	return s3test.Format{
		Save: func(ctx context.Context, name string, opts ...kvik.RemoteOption) error {
			return Save(ctx, name, ts, meta, opts...)
		},
		Load: func(ctx context.Context, name string, opts ...kvik.RemoteOption) error {
			return done(Load(ctx, name, nil, opts...))
		},
		LoadHost: func(ctx context.Context, name string, opts ...kvik.RemoteOption) error {
			return done(LoadHost(ctx, name, nil, opts...))
		},
		ReadHeader: func(ctx context.Context, name string, opts ...kvik.RemoteOption) error {
			_, err := ReadHeader(ctx, name, nil, opts...)
			return err
		},
		LoadReader:     func(ctx context.Context, r kvik.Reader) error { return done(LoadReader(ctx, r, nil)) },
		LoadHostReader: func(ctx context.Context, r kvik.Reader) error { return done(LoadHostReader(ctx, r, nil)) },
	}
}

// TestCancelS3 cancels loads from S3 and a save to S3 midway: see
// s3test.CheckCancelS3.
func TestCancelS3(t *testing.T) { s3test.CheckCancelS3(t, cancelFormat()) }

// TestCancelLocal cancels loads from a local file midway, and loads and
// a save before they start: see s3test.CheckCancelLocal.
func TestCancelLocal(t *testing.T) { s3test.CheckCancelLocal(t, cancelFormat()) }
