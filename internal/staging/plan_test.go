package staging

import (
	"math/rand/v2"
	"testing"
)

// TestPlan checks the plans of random tasks under random settings: a
// chunk of whole pages that fits the buffer taken, the small pool exactly
// when the task's one or two chunks fit a small buffer and that is the
// smaller, writes and many workers as one chunk, few workers pipelined,
// batches in half buffers.
func TestPlan(t *testing.T) {
	bounce, small := &Pool{}, &Pool{}
	rng := rand.New(rand.NewPCG(1, 2))
	for range 5000 {
		pl := Planner{
			Tuning:  Builtin(),
			Bounce:  bounce,
			Small:   small,
			BufSize: BufSize(1+rng.IntN(32<<20), 1+rng.IntN(32<<20)),
			Workers: 1 + rng.IntN(32),
		}
		if pl.BufSize%PageSize != 0 || pl.BufSize <= 0 {
			t.Fatalf("BufSize %d: not whole pages", pl.BufSize)
		}
		n := 1 + rng.IntN(64<<20)
		write := rng.IntN(2) == 0
		how := Chunking(rng.IntN(3))
		p := pl.Plan(write, n, how)
		whole := min(AlignUp(n, PageSize), pl.BufSize) // the task as one chunk
		var want int
		switch {
		case how == ChunkPipeline:
			want = pl.Tuning.PipelineChunk(n, pl.BufSize, PageSize)
		case how == ChunkBatch:
			want = max(pl.BufSize/2/PageSize*PageSize, PageSize)
		case write || pl.Workers >= SoloWorkers:
			want = whole
		default:
			want = pl.Tuning.PipelineChunk(n, pl.BufSize, PageSize)
		}
		if p.Chunk != want || p.Chunk%PageSize != 0 || p.Chunk > p.BufSize {
			t.Fatalf("%+v: Plan(%v, %d, %d) = chunk %d of a %d-byte buffer, want chunk %d", pl, write, n, how, p.Chunk, p.BufSize, want)
		}
		need := p.Chunk
		if n > p.Chunk {
			need *= 2
		}
		if isSmall := need <= SmallBufSize && SmallBufSize < pl.BufSize; isSmall != (p.Pool == small) ||
			isSmall && p.BufSize != SmallBufSize || !isSmall && (p.Pool != bounce || p.BufSize != pl.BufSize) {
			t.Fatalf("%+v: Plan(%v, %d, %d) needs %d bytes and took %d from the small pool %v", pl, write, n, how, need, p.BufSize, p.Pool == small)
		}
	}
}
