package kvik_test

import (
	"context"
	"math/rand/v2"
	"os"
	"path/filepath"
	"strconv"
	"testing"

	"github.com/kvikgo/kvik"
)

// checkpointPieces lays out a transformer-like checkpoint of about total
// bytes in host memory: a header, then per layer two small norms and
// seven projections of unaligned sizes.
func checkpointPieces(total int64) []kvik.Piece {
	rng := rand.New(rand.NewPCG(1, 1))
	fill := func(n int) []byte {
		b := make([]byte, n)
		for i := 0; i < n; i += 4096 {
			b[i] = byte(rng.Uint32())
		}
		return b
	}
	ps := []kvik.Piece{{Data: fill(21_000)}}
	var at int64
	for at < total {
		for _, n := range []int{8 << 10, 8 << 10, 4<<20 + 2, 1<<20 + 6, 1<<20 + 6, 4<<20 + 2, 11<<20 + 10, 11<<20 + 10, 11<<20 + 10} {
			ps = append(ps, kvik.Piece{Data: fill(n)})
			at += int64(n)
		}
	}
	return ps
}

// BenchmarkSaveFile saves a checkpoint-like layout of host pieces
// (KVIK_BENCH_SAVE_SIZE bytes, 256 MiB by default; to KVIK_TEST_DIR when
// set) with the staged engine, with a write per piece, and as one piece of
// the same size: the host write the staged engine must keep up with.
func BenchmarkSaveFile(b *testing.B) {
	total := int64(256 << 20)
	if v, err := strconv.ParseInt(os.Getenv("KVIK_BENCH_SAVE_SIZE"), 10, 64); err == nil && v > 0 {
		total = v
	}
	ps := checkpointPieces(total)
	var all []byte
	for _, p := range ps {
		all = append(all, p.Data...)
	}
	path := filepath.Join(testDir(b), "save.bin")
	for _, c := range []struct {
		name   string
		staged bool
		pieces []kvik.Piece
	}{
		{"staged", true, ps},
		{"per-piece", false, ps},
		{"one-piece", true, []kvik.Piece{{Data: all}}},
	} {
		b.Run(c.name, func(b *testing.B) {
			defer kvik.SetStagedSave(c.staged)()
			b.SetBytes(int64(len(all)))
			for b.Loop() {
				if err := kvik.SaveFile(context.Background(), path, c.pieces); err != nil {
					b.Fatal(err)
				}
			}
		})
	}
}
