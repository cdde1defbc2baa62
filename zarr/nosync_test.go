package zarr

import (
	"log/slog"
	"math/rand/v2"
	"os"
	"path/filepath"
	"testing"

	"github.com/kvikgo/kvik"
	"github.com/kvikgo/kvik/internal/testkit/logtest"
)

// TestDirStoreWithoutSync checks, through kvik's record of each save and
// of each directory made, that a DirStore opened WithoutSync saves every
// value (an array's metadata and chunks, Set) and makes every directory
// unsynced and one opened without it synced (on a disk's file system: in
// tmpfs nothing is synced either way), and
// that such a store keeps the Store contract and arrays written through
// it read back as written, with no temporary file left.
func TestDirStoreWithoutSync(t *testing.T) {
	logs := &logtest.Capture{Level: kvik.LevelDebug}
	defer kvik.SetLogger(slog.New(logs))()
	m := Metadata{ZarrFormat: 3, Shape: []int{57, 83}, ChunkShape: []int{16, 9}, DataType: DataType{Kind: Float, Size: 4}, FillValue: 1.5,
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
		logs.Reset()
		testStore(t, s)
		roundTripIn(t, rand.New(rand.NewPCG(5, 9)), s, m)
		recs := logs.Find("kvik: save")
		if len(recs) < 4 {
			t.Fatalf("WithoutSync %v: %d saves recorded", noSync, len(recs))
		}
		for _, r := range recs {
			synced, mem := r.Attrs["synced"] == "true", r.Attrs["memory_fs"] == "true"
			if synced != (!noSync && !mem) {
				t.Fatalf("WithoutSync %v: save record %v", noSync, r.Attrs)
			}
		}
		made := map[string]bool{}
		for _, r := range logs.Find("kvik: mkdir") {
			made[r.Attrs["path"]] = true
			synced, mem := r.Attrs["synced"] == "true", r.Attrs["memory_fs"] == "true"
			if synced != (!noSync && !mem) {
				t.Fatalf("WithoutSync %v: mkdir record %v", noSync, r.Attrs)
			}
		}
		err = filepath.WalkDir(s.Root(), func(p string, d os.DirEntry, err error) error {
			if err == nil && kvik.IsPendingName(d.Name()) {
				t.Errorf("temporary file left: %s", p)
			}
			if err == nil && d.IsDir() && p != s.Root() && !made[p] {
				t.Errorf("WithoutSync %v: directory %s made without kvik.MkdirAll", noSync, p)
			}
			return err
		})
		if err != nil {
			t.Fatal(err)
		}
	}
}
