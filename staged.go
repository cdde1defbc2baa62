package kvik

import (
	"errors"

	"github.com/kvikgo/kvik/internal/devmem"
	"github.com/kvikgo/kvik/internal/sched"
	"github.com/kvikgo/kvik/internal/staging"
)

// stagedRead moves one task of a read into the device through pinned
// bounce buffers, filling them with read and overlapping each fill with
// the copy of the previous chunk, with the plan and pools of FileHandle's
// POSIX path. Only the CUDA calls run with the context current (on a
// locked OS thread); read runs on the task's goroutine as it is, so a
// blocking download or a page fault does not hold a locked thread.
func stagedRead(d Defaults, r devmem.Range, t sched.Task, read func(p []byte, off int64) (int, error)) (int, error) {
	return tune.staging.Task(false, r, t, planner(d).Plan(false, t.Len, staging.ChunkByWorkers), 0, true, func(c *staging.Copier) staging.Mover {
		return &readMover{Copier: c, read: read}
	})
}

// readMover feeds the staging pipeline from a read function; it only
// reads, and its copier enters the CUDA context for each copy.
type readMover struct {
	*staging.Copier
	read func(p []byte, off int64) (int, error)
}

func (m *readMover) ReadFile(p []byte, off int64) (int, error) { return m.read(p, off) }

func (m *readMover) WriteFile(p []byte, off int64) (int, error) {
	return 0, errors.New("kvik: staged reads do not write")
}
