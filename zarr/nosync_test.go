package zarr

import (
	"context"
	"math/rand/v2"
	"os"
	"path/filepath"
	"sync/atomic"
	"testing"

	"github.com/kvikgo/kvik"
)

// TestDirStoreWithoutSync checks that a DirStore opened WithoutSync
// passes kvik.WithoutSync to every save of a value (an array's metadata
// and chunks, Set), that one opened without it passes nothing, and that
// such a store keeps the Store contract and arrays written through it
// read back as written, with no temporary file left.
func TestDirStoreWithoutSync(t *testing.T) {
	var saves, unsynced atomic.Int64 // the writes' workers save at once
	defer func(f func(context.Context, string, []kvik.Piece, ...kvik.RemoteOption) error) { saveFile = f }(saveFile)
	saveFile = func(ctx context.Context, name string, pieces []kvik.Piece, opts ...kvik.RemoteOption) error {
		saves.Add(1)
		if len(opts) == 1 {
			unsynced.Add(1)
		}
		return kvik.SaveFile(ctx, name, pieces, opts...)
	}
	m := Metadata{ZarrFormat: 3, Shape: []int{57, 83}, ChunkShape: []int{16, 9}, DataType: DataType{Float, 4}, FillValue: 1.5,
		Codecs: []Codec{{Name: "bytes", Configuration: map[string]any{"endian": "little"}}, {Name: "zstd", Configuration: map[string]any{"level": 1}}}}
	for _, noSync := range []bool{false, true} {
		var opts []StoreOption
		if noSync {
			opts = append(opts, WithoutSync())
		}
		s, err := NewDirStore(t.TempDir(), opts...)
		if err != nil {
			t.Fatal(err)
		}
		saves.Store(0)
		unsynced.Store(0)
		testStore(t, s)
		roundTripIn(t, rand.New(rand.NewPCG(5, 9)), s, m)
		n, u := saves.Load(), unsynced.Load()
		if want := map[bool]int64{false: 0, true: n}[noSync]; n < 4 || u != want {
			t.Errorf("WithoutSync %v: %d saves, %d of them unsynced (want %d)", noSync, n, u, want)
		}
		err = filepath.WalkDir(s.Root(), func(p string, d os.DirEntry, err error) error {
			if err == nil && kvik.IsPendingName(d.Name()) {
				t.Errorf("temporary file left: %s", p)
			}
			return err
		})
		if err != nil {
			t.Fatal(err)
		}
	}
}
