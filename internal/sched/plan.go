// Package sched splits file operations into tasks and runs them on bounded,
// resizable worker pools. It is the one chunking and scheduling core under
// both host and device I/O.
package sched

// Task is one piece of an operation: Len bytes at file offset Off, which are
// bytes [BufOff, BufOff+Len) of the operation's buffer.
type Task struct {
	Off    int64
	BufOff int
	Len    int
}

// Split cuts the range [off, off+size) into tasks of at most taskSize bytes.
// A size of 0 gives one empty task, so that an operation always runs at
// least once (and reports errors such as a closed file). taskSize <= 0 is
// treated as unbounded.
func Split(off int64, size, taskSize int) []Task {
	if taskSize <= 0 || size <= taskSize {
		return []Task{{Off: off, Len: size}}
	}
	n := size / taskSize
	if size%taskSize != 0 {
		n++ // without size+taskSize-1, which can overflow
	}
	tasks := make([]Task, 0, n)
	for b := 0; b < size; b += min(taskSize, size-b) {
		l := min(taskSize, size-b)
		tasks = append(tasks, Task{Off: off + int64(b), BufOff: b, Len: l})
	}
	return tasks
}

// SplitAligned is Split with the boundaries between tasks moved down to
// multiples of align in the file, so that every task after the first
// starts on an aligned offset. An operation at an unaligned offset then
// has one partial page, at its head, instead of one on each side of every
// boundary: with O_DIRECT those are buffered reads or writes of single
// pages, each a round trip to the drive, and two tasks touch the same
// page. It makes as many tasks as Split; the first is shorter and the
// last up to align-1 bytes longer than taskSize. With align <= 1 or
// taskSize < align it is Split.
func SplitAligned(off int64, size, taskSize, align int) []Task {
	tasks := Split(off, size, taskSize)
	if align <= 1 || taskSize < align {
		return tasks
	}
	a := int64(align)
	for i := 1; i < len(tasks); i++ {
		// d < align <= taskSize: task i-1 keeps more than taskSize-align bytes.
		d := int(tasks[i].Off % a)
		tasks[i].Off -= int64(d)
		tasks[i].BufOff -= d
		tasks[i].Len += d
		tasks[i-1].Len -= d
	}
	return tasks
}

// Spread is Split for an operation that fills fewer than workers tasks of
// taskSize: it cuts it into tasks of about size/workers bytes instead, at
// least minTask and rounded up to a multiple of align, so that more
// workers take part (a small read on 16 workers in 4 tasks leaves 12
// idle). Larger operations are split as by Split. align and minTask must
// be positive.
func Spread(off int64, size, taskSize, workers, minTask, align int) []Task {
	if taskSize <= 0 || workers <= 1 || size/workers >= taskSize {
		return Split(off, size, taskSize)
	}
	per := size / workers
	if size%workers != 0 {
		per++
	}
	if r := per % align; r != 0 {
		per += align - r // per < taskSize, so this cannot overflow
	}
	return Split(off, size, min(max(per, minTask), taskSize))
}

// Batch merges each run of k consecutive tasks into one task covering
// them, where each task starts where the one before ends (in the file and
// in the buffer); a task that does not starts a new batch. The last tail
// tasks stay as they are, so that the workers of a pool taking tasks in
// order finish close together: a batch left for last would run alone. k
// <= 1 returns tasks as they are.
func Batch(tasks []Task, k, tail int) []Task {
	if k <= 1 || len(tasks) < 2 {
		return tasks
	}
	head := max(len(tasks)-max(tail, 0), 0)
	out := make([]Task, 0, (head+k-1)/k+len(tasks)-head)
	n := 0 // tasks in the last batch
	for i, t := range tasks {
		if last := len(out) - 1; i < head && n > 0 && n < k && out[last].Off+int64(out[last].Len) == t.Off && out[last].BufOff+out[last].Len == t.BufOff {
			out[last].Len += t.Len
			n++
			continue
		}
		out = append(out, t)
		n = 1
	}
	return out
}

// Segment is one part of a task: buffered, or direct (O_DIRECT) when Direct.
type Segment struct {
	Off    int64
	BufOff int // offset within the task's buffer
	Len    int
	Direct bool
}

// Segments plans opportunistic direct I/O for the range [off, off+n): a
// buffered head up to the next multiple of align, a direct middle whose
// offset and length are multiples of align, and a buffered tail shorter
// than align. Without direct, or when no aligned middle exists, it returns
// one buffered segment. Empty segments are omitted; n == 0 gives none.
func Segments(off int64, n int, align int, direct bool) []Segment {
	if n <= 0 {
		return nil
	}
	a := int64(align)
	if !direct || a <= 0 {
		return []Segment{{Off: off, Len: n}}
	}
	end := off + int64(n)
	// off <= midStart <= midEnd <= end: nothing here can overflow, even
	// for off close to math.MaxInt64.
	midEnd := end / a * a
	if midEnd <= off {
		return []Segment{{Off: off, Len: n}}
	}
	midStart := midEnd - (midEnd-off)/a*a
	if midEnd <= midStart {
		return []Segment{{Off: off, Len: n}}
	}
	segs := make([]Segment, 0, 3)
	if midStart > off {
		segs = append(segs, Segment{Off: off, Len: int(midStart - off)})
	}
	segs = append(segs, Segment{Off: midStart, BufOff: int(midStart - off), Len: int(midEnd - midStart), Direct: true})
	if end > midEnd {
		segs = append(segs, Segment{Off: midEnd, BufOff: int(midEnd - off), Len: int(end - midEnd)})
	}
	return segs
}
