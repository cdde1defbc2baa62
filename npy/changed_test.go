package npy

import (
	"context"
	"io"
	"math/rand/v2"
	"path/filepath"
	"sync"
	"testing"

	"github.com/kvikgo/kvik"
	"github.com/kvikgo/kvik/internal/testkit/changetest"
)

// touchingReader is a FileHandle that calls touch before its first PRead,
// between the array's header and its data.
type touchingReader struct {
	*kvik.FileHandle
	once  sync.Once
	touch func()
}

func (r *touchingReader) PRead(ctx context.Context, p []byte, off int64) *kvik.Future {
	r.once.Do(r.touch)
	return r.FileHandle.PRead(ctx, p, off)
}

// TestLoadFileChangedMidway: an array file written to in place between
// its header and its data read fails LoadHostReader with
// kvik.ErrFileChanged; the same load of the untouched file, or of one
// replaced by a rename, passes (changetest.Run, through a handle that
// calls midway before its first PRead).
func TestLoadFileChangedMidway(t *testing.T) {
	rng := rand.New(rand.NewPCG(7, 78))
	data := make([]byte, 8*(1+rng.IntN(50_000)))
	for i := range data {
		data[i] = byte(rng.Uint32())
	}
	p := filepath.Join(t.TempDir(), "a.npy")
	if err := Save(context.Background(), p, SaveArray{Dtype: Float64, Shape: []int64{int64(len(data) / 8)}, Data: data}); err != nil {
		t.Fatal(err)
	}
	changetest.Run(t, p, changetest.Loader{
		ByReader: func(ctx context.Context, r kvik.Reader, midway func()) (io.Closer, error) {
			return LoadHostReader(ctx, &touchingReader{FileHandle: r.(*kvik.FileHandle), touch: midway}, nil)
		},
	})
}
