package staging

import (
	"bytes"
	"errors"
	"io"
	"math/rand/v2"
	"syscall"
	"testing"
)

// fakeMover is a file and a device in memory. Device copies are queued and
// only happen at Sync or at WaitMark (those before the mark), as on a
// real stream, so a pipeline that reuses a buffer before its copy
// completes moves wrong bytes and fails the test.
type fakeMover struct {
	file, dev []byte
	queue     []func()
	flushed   int         // copies of queue already done
	marks     map[int]int // point -> copies queued (counted from the start) when marked
	behind    int         // copies queued behind one still queued
	overlaps  int         // storage transfers made while a copy was queued
	failRead  int64
	failAfter int // write fails once this many bytes are written (-1: never)
	written   int
	readOffs  []int64 // offsets of the storage reads, in order
}

func (m *fakeMover) ReadFile(p []byte, off int64) (int, error) {
	m.readOffs = append(m.readOffs, off)
	if len(m.queue) > 0 {
		m.overlaps++
	}
	if m.failRead > 0 && off >= m.failRead {
		return 0, syscall.EIO
	}
	if off >= int64(len(m.file)) {
		return 0, io.EOF
	}
	n := copy(p, m.file[off:])
	if n < len(p) {
		return n, io.EOF
	}
	return n, nil
}

func (m *fakeMover) WriteFile(p []byte, off int64) (int, error) {
	if len(m.queue) > 0 {
		m.overlaps++
	}
	n := len(p)
	var err error
	if m.failAfter >= 0 && m.written+n > m.failAfter {
		n, err = m.failAfter-m.written, syscall.ENOSPC
	}
	if need := int(off) + n; need > len(m.file) {
		m.file = append(m.file, make([]byte, need-len(m.file))...)
	}
	copy(m.file[off:], p[:n])
	m.written += n
	return n, err
}

func (m *fakeMover) ToDevice(p []byte, devOff int64) error {
	if len(m.queue) > 0 {
		m.behind++
	}
	m.queue = append(m.queue, func() { copy(m.dev[devOff:], p) })
	return nil
}

func (m *fakeMover) FromDevice(p []byte, devOff int64) error {
	m.queue = append(m.queue, func() { copy(p, m.dev[devOff:]) })
	return nil
}

func (m *fakeMover) Sync() error {
	m.flush(m.flushed + len(m.queue))
	return nil
}

func (m *fakeMover) Mark(i int) error {
	if m.marks == nil {
		m.marks = map[int]int{}
	}
	m.marks[i] = m.flushed + len(m.queue)
	return nil
}

func (m *fakeMover) WaitMark(i int) error {
	if upto, ok := m.marks[i]; ok && upto > m.flushed {
		m.flush(upto)
	}
	return nil
}

// flush does the queued copies up to the upto-th since the start.
func (m *fakeMover) flush(upto int) {
	for m.flushed < upto {
		m.queue[0]()
		m.queue = m.queue[1:]
		m.flushed++
	}
}

func boolInt(b bool) int {
	if b {
		return 1
	}
	return 0
}

func randomBytes(rng *rand.Rand, n int) []byte {
	b := make([]byte, n)
	for i := range b {
		b[i] = byte(rng.IntN(255) + 1)
	}
	return b
}

func buffers(n, size int) [][]byte {
	b := make([][]byte, n)
	for i := range b {
		b[i] = make([]byte, size)
	}
	return b
}

func TestReadPipeline(t *testing.T) {
	rng := rand.New(rand.NewPCG(1, 1))
	for range 300 {
		size := rng.IntN(5000)
		align := []int{0, 1, 16, 64}[rng.IntN(4)]
		chunk := rng.IntN(700) + 1
		if align > 1 && rng.IntN(4) > 0 {
			chunk = (rng.IntN(10) + 1) * align // as the callers make it
		}
		nbuf := rng.IntN(3) + 1
		fileLen := size + rng.IntN(50) - 25 // sometimes ends inside the range
		off := int64(rng.IntN(200))
		m := &fakeMover{file: randomBytes(rng, max(fileLen, 0)+int(off)), dev: make([]byte, size+40), failAfter: -1}
		devOff := int64(rng.IntN(40))
		tu := Builtin()
		if rng.IntN(3) == 0 {
			tu.Ramp = (rng.IntN(3) + 1) * max(align, 1)
		}
		n, err := tu.Read(m, buffers(nbuf, chunk), chunk, align, off, devOff, size)
		want := min(size, max(len(m.file)-int(off), 0))
		if n != want || (n < size) != (err == io.EOF) || (n == size && err != nil) {
			t.Fatalf("size %d chunk %d bufs %d: n=%d err=%v, want n=%d", size, chunk, nbuf, n, err, want)
		}
		if !bytes.Equal(m.dev[devOff:devOff+int64(n)], m.file[off:off+int64(n)]) {
			t.Fatalf("size %d chunk %d bufs %d: device bytes differ", size, chunk, nbuf)
		}
		if chunks := (want + chunk - 1) / chunk; tu.Ramp == 0 && nbuf >= 2 && chunks >= 2 && m.overlaps < chunks-1 {
			t.Fatalf("only %d of %d reads overlapped a copy", m.overlaps, chunks-1)
		}
		// The stream never drains between chunks: each copy after the
		// first is queued behind the one before (which its buffer's
		// WaitMark did not wait for).
		if chunks := len(m.readOffs); nbuf >= 2 && n > 0 && m.behind < chunks-1-boolInt(n < size) {
			t.Fatalf("size %d chunk %d bufs %d: %d of %d copies queued behind another", size, chunk, nbuf, m.behind, chunks-1)
		}
		if align > 1 && chunk > align && chunk%align == 0 {
			for i, o := range m.readOffs[1:] {
				if o%int64(align) != 0 {
					t.Fatalf("size %d chunk %d align %d off %d: read %d at unaligned offset %d", size, chunk, align, off, i+1, o)
				}
			}
		}
	}
}

func TestWritePipeline(t *testing.T) {
	rng := rand.New(rand.NewPCG(2, 2))
	for range 300 {
		size := rng.IntN(5000)
		chunk := rng.IntN(700) + 1
		nbuf := rng.IntN(3) + 1
		devOff := int64(rng.IntN(40))
		off := int64(rng.IntN(30))
		m := &fakeMover{dev: randomBytes(rng, size+40), failAfter: -1}
		n, err := Write(m, buffers(nbuf, chunk), chunk, off, devOff, size)
		if n != size || err != nil {
			t.Fatalf("size %d chunk %d bufs %d: n=%d err=%v", size, chunk, nbuf, n, err)
		}
		if size > 0 && !bytes.Equal(m.file[off:], m.dev[devOff:devOff+int64(size)]) {
			t.Fatalf("size %d chunk %d bufs %d: file bytes differ", size, chunk, nbuf)
		}
		if chunks := (size + chunk - 1) / chunk; nbuf >= 2 && chunks >= 2 && m.overlaps < chunks-1 {
			t.Fatalf("only %d of %d writes overlapped a copy", m.overlaps, chunks-1)
		}
	}
}

func TestPipelineErrors(t *testing.T) {
	rng := rand.New(rand.NewPCG(3, 3))
	m := &fakeMover{file: randomBytes(rng, 10000), dev: make([]byte, 10000), failRead: 3000, failAfter: -1}
	n, err := Builtin().Read(m, buffers(2, 1000), 1000, 0, 0, 0, 10000)
	if n != 3000 || !errors.Is(err, syscall.EIO) || !bytes.Equal(m.dev[:3000], m.file[:3000]) {
		t.Fatalf("read error: n=%d err=%v", n, err)
	}
	w := &fakeMover{dev: randomBytes(rng, 10000), failAfter: 4321}
	n, err = Write(w, buffers(2, 1000), 1000, 0, 0, 10000)
	if n != 4321 || !errors.Is(err, syscall.ENOSPC) || !bytes.Equal(w.file[:n], w.dev[:n]) {
		t.Fatalf("write error: n=%d err=%v", n, err)
	}
	if _, err := Builtin().Read(m, nil, 10, 0, 0, 0, 10); err == nil {
		t.Fatal("no buffers accepted")
	}
	if _, err := Write(m, buffers(1, 5), 10, 0, 0, 10); err == nil {
		t.Fatal("buffer smaller than chunk accepted")
	}
}

func TestChunkSize(t *testing.T) {
	for _, c := range []struct{ n, buf, workers, want int }{
		{4 << 20, 16 << 20, 1, 2 << 20},
		{4 << 20, 16 << 20, 16, 4 << 20},
		{64 << 20, 16 << 20, 1, 16 << 20},
		{100, 16 << 20, 1, 512 << 10},
		{100, 16 << 20, 8, 4096},
		{32 << 20, 4096, 1, 4096},
		{32 << 20, 1, 16, 1},
		{10 << 20, 16 << 20, 4, 5 << 20},
		{10<<20 + 1, 16 << 20, 2, 5246976},
	} {
		if got := Builtin().ChunkSize(c.n, c.buf, 4096, c.workers); got != c.want {
			t.Errorf("ChunkSize(%d, %d, workers %d) = %d, want %d", c.n, c.buf, c.workers, got, c.want)
		}
	}
}

func TestPipelineChunk(t *testing.T) {
	for _, c := range []struct{ n, buf, want int }{
		{4 << 20, 4 << 20, 2 << 20},     // half of the task
		{1 << 20, 4 << 20, 512 << 10},   // not below MinChunk
		{1<<20 + 1, 2 << 20, 528384},    // half rounds up to a page
		{600 << 10, 2 << 20, 512 << 10}, // half is below MinChunk
		{8 << 20, 1 << 20, 1 << 20},     // at most the buffer
		{3 << 20, 4 << 20, 1572864},
	} {
		if got := Builtin().PipelineChunk(c.n, c.buf, 4096); got != c.want {
			t.Errorf("PipelineChunk(%d, %d) = %d, want %d", c.n, c.buf, got, c.want)
		}
		if got, solo := Builtin().PipelineChunk(c.n, c.buf, 4096), Builtin().ChunkSize(c.n, c.buf, 4096, 1); got != solo {
			t.Errorf("PipelineChunk(%d, %d) = %d, ChunkSize with one worker %d", c.n, c.buf, got, solo)
		}
	}
}
