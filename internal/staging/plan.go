package staging

// SmallBufSize is the size of the buffers of a Planner's Small pool: two
// chunks of the smallest pipeline chunk (Builtin's MinChunk, 512 KiB).
const SmallBufSize = 1 << 20

// BufSize is the size of the bounce buffers under a bounce buffer size
// and a task size setting: the smaller, in whole pages. One size per
// setting, so that pooled buffers are reused across tasks.
func BufSize(bounceBufferSize, taskSize int) int {
	return AlignUp(min(bounceBufferSize, taskSize), PageSize)
}

// Chunking is how Planner.Plan cuts a task into chunks.
type Chunking int

const (
	// ChunkByWorkers: Tuning.ChunkSize, one chunk per task with many
	// workers (other workers' tasks keep the link busy), pipelined with
	// few.
	ChunkByWorkers Chunking = iota
	// ChunkPipeline: pipelined whatever the worker count, for an
	// operation of at most one task per worker.
	ChunkPipeline
	// ChunkBatch: a batch of tasks, moved in chunks of half a bounce
	// buffer, the read of each overlapping the copy of the last.
	ChunkBatch
)

// Planner plans the staging of the tasks of one operation.
type Planner struct {
	Tuning Tuning
	// Bounce holds buffers of BufSize bytes; Small, of SmallBufSize,
	// serves tasks that need no more, so that small operations pin
	// little memory.
	Bounce, Small *Pool
	BufSize       int // BufSize of the settings
	Workers       int // the workers that run tasks at once
}

// Plan plans a task of n bytes, a write when write is set. A task that
// needs at most SmallBufSize bytes of buffer (one chunk, or two to
// overlap) takes a small buffer; others take one of BufSize, split in
// two when two chunks fit.
func (pl Planner) Plan(write bool, n int, how Chunking) Plan {
	// Writes move each task as one chunk: the device-to-host copy is tens
	// of times faster than the file write, so splitting only shrinks the
	// writes (and O_DIRECT writes at small sizes are slow).
	workers := pl.Workers
	if write {
		workers = SoloWorkers
	}
	var chunk int
	switch how {
	case ChunkPipeline:
		chunk = pl.Tuning.PipelineChunk(n, pl.BufSize, PageSize)
	case ChunkBatch:
		chunk = max(pl.BufSize/2/PageSize*PageSize, PageSize)
	default:
		chunk = pl.Tuning.ChunkSize(n, pl.BufSize, PageSize, workers)
	}
	need := chunk
	if n > chunk {
		need = 2 * chunk
	}
	pool, size := pl.Pinned(need)
	return Plan{Chunk: chunk, Pool: pool, BufSize: size}
}

// Pinned picks the pool and buffer size for a task that needs need bytes
// of buffer: Small's when they fit in it, else Bounce's BufSize.
func (pl Planner) Pinned(need int) (*Pool, int) {
	if need > SmallBufSize || SmallBufSize >= pl.BufSize {
		return pl.Bounce, pl.BufSize
	}
	return pl.Small, SmallBufSize
}
