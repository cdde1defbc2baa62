package gguf

import (
	"context"
	"io"
	"math/rand/v2"
	"sync"
	"testing"

	"github.com/kvikgo/kvik"
	"github.com/kvikgo/kvik/internal/testkit/changetest"
)

// TestLoadFileChangedMidway: a file written to in place while it is
// loaded (from Filter, between the header and the data) fails the load
// with kvik.ErrFileChanged instead of returning tensors that may mix its
// old and new bytes (changetest.Run).
func TestLoadFileChangedMidway(t *testing.T) {
	rng := rand.New(rand.NewPCG(7, 77))
	p, _, _ := writeRandom(t, rng, 2+rng.IntN(20), 32)
	filter := func(midway func()) *Options {
		var once sync.Once
		return &Options{Filter: func(*TensorInfo) bool { once.Do(midway); return true }}
	}
	changetest.Run(t, p, changetest.Loader{
		ByName: func(ctx context.Context, name string, midway func()) (io.Closer, error) {
			return LoadHost(ctx, name, filter(midway))
		},
		ByReader: func(ctx context.Context, r kvik.Reader, midway func()) (io.Closer, error) {
			return LoadHostReader(ctx, r, filter(midway))
		},
	})
}
