package safetensors

import (
	"context"
	"encoding/json"
	"errors"
	"math/rand/v2"
	"net/http"
	"os"
	"path/filepath"
	"testing"

	"github.com/kvikgo/kvik"
	"github.com/kvikgo/kvik/internal/testkit/s3test"
)

// cancelFormat is safetensors for the cancellation checks of s3test: a
// file of six tensors of 4 MiB and a bit.
func cancelFormat() s3test.Format {
	rng := rand.New(rand.NewPCG(26, 1))
	ts := make([]SaveTensor, 6)
	for i := range ts {
		b := make([]byte, 4<<20+99)
		for j := range b {
			b[j] = byte(rng.Uint32())
		}
		ts[i] = SaveTensor{Name: "t" + string(rune('a'+i)), Dtype: U8, Shape: []int64{int64(len(b))}, Data: b}
	}
	done := func(m *Model, err error) error {
		if err == nil {
			m.Close()
		}
		return err
	}
	return s3test.Format{
		Save: func(ctx context.Context, name string, opts ...kvik.RemoteOption) error {
			return Save(ctx, name, ts, map[string]string{"k": "v"}, opts...)
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

// TestCancelIndex cancels LoadIndexHost from S3 while a shard's data
// GET is in flight.
func TestCancelIndex(t *testing.T) {
	v := s3test.Start(t)
	rng := rand.New(rand.NewPCG(26, 2))
	weights := map[string]string{}
	for _, shard := range []string{"a", "b"} {
		var ts []SaveTensor
		for i := range 2 {
			b := make([]byte, 3<<20+5)
			for j := range b {
				b[j] = byte(rng.Uint32())
			}
			name := shard + string(rune('0'+i))
			ts = append(ts, SaveTensor{Name: name, Dtype: U8, Shape: []int64{int64(len(b))}, Data: b})
			weights[name] = shard + ".safetensors"
		}
		path := filepath.Join(t.TempDir(), shard)
		if err := Save(context.Background(), path, ts, nil); err != nil {
			t.Fatal(err)
		}
		b, err := os.ReadFile(path)
		if err != nil {
			t.Fatal(err)
		}
		v.Put(t, "ix/"+shard+".safetensors", b)
	}
	ix, _ := json.Marshal(Index{WeightMap: weights})
	url := v.Put(t, "ix/model.safetensors.index.json", ix)
	p := v.HoldProxy(t, func(r *http.Request) bool {
		return r.Method == http.MethodGet && s3test.RangeStart(r) >= 1<<20
	})
	err := p.CancelWhenHeld(t, func(ctx context.Context) error {
		m, err := LoadIndexHost(ctx, url, nil, p.Opts()...)
		if err == nil {
			m.Close()
		}
		return err
	})
	if !errors.Is(err, context.Canceled) {
		t.Fatalf("cancelled LoadIndexHost: %v, want context.Canceled", err)
	}
}
