package npy

import (
	"context"
	"math/rand/v2"
	"testing"

	"github.com/kvikgo/kvik"
	"github.com/kvikgo/kvik/internal/testkit/s3test"
)

// cancelFormat is npy for the cancellation checks of s3test: a 3-d
// float32 array of 24 MiB and a bit.
func cancelFormat() s3test.Format {
	rng := rand.New(rand.NewPCG(26, 4))
	a := SaveArray{Dtype: Float32, Shape: []int64{3, 1 << 10, 2<<10 + 1}}
	a.Data = make([]byte, 4*3<<10*(2<<10+1))
	for i := range a.Data {
		a.Data[i] = byte(rng.Uint32())
	}
	done := func(a *Array, err error) error {
		if err == nil {
			a.Close()
		}
		return err
	}
	return s3test.Format{
		Save: func(ctx context.Context, name string, opts ...kvik.RemoteOption) error {
			return Save(ctx, name, a, opts...)
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
