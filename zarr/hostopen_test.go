package zarr

import (
	"context"
	"log/slog"
	"strings"
	"sync"
	"testing"

	"github.com/kvikgo/kvik"
	"github.com/kvikgo/kvik/internal/testkit/fielddata"
)

// openLog records the files kvik opens under dir and the compat mode
// each open asked for.
type openLog struct {
	dir string
	mu  sync.Mutex
	req map[string]string // path: requested mode
}

func (l *openLog) Enabled(context.Context, slog.Level) bool { return true }
func (l *openLog) WithAttrs([]slog.Attr) slog.Handler       { return l }
func (l *openLog) WithGroup(string) slog.Handler            { return l }
func (l *openLog) Handle(_ context.Context, r slog.Record) error {
	if r.Message != "kvik: open" {
		return nil
	}
	var path, req string
	r.Attrs(func(a slog.Attr) bool {
		switch a.Key {
		case "path":
			path = a.Value.String()
		case "requested":
			req = a.Value.String()
		}
		return true
	})
	if strings.HasPrefix(path, l.dir) {
		l.mu.Lock()
		l.req[path] = req
		l.mu.Unlock()
	}
	return nil
}

// TestHostReadsSkipCuFile reads a compressed and an uncompressed array
// of a DirStore into host memory, whole and in part, and checks that
// every chunk file was opened asking for POSIX I/O (CompatOn): host
// reads never use cuFile, so registering each chunk with it where GDS is
// there was a cost per chunk for nothing.
func TestHostReadsSkipCuFile(t *testing.T) {
	dir := t.TempDir()
	s, err := NewDirStore(dir)
	if err != nil {
		t.Fatal(err)
	}
	shape := []int{40, 36}
	src := fielddata.Float32(shape[0], shape[1], 4)
	log := &openLog{dir: dir, req: map[string]string{}}
	defer kvik.SetLogger(slog.New(log))()
	for _, codecs := range [][]Codec{nil, writeCodecs["zstd"]} {
		name := "raw"
		if codecs != nil {
			name = "zstd"
		}
		a, err := Create(bg, s, name, Metadata{Shape: shape, ChunkShape: []int{16, 12}, DataType: DataType{Float, 4}, Codecs: codecs})
		if err != nil {
			t.Fatal(err)
		}
		if err := a.WriteRegion(bg, []int{0, 0}, shape, src); err != nil {
			t.Fatal(err)
		}
		got := make([]byte, len(src))
		if err := a.ReadRegion(bg, []int{0, 0}, shape, got); err != nil {
			t.Fatal(err)
		}
		part := make([]byte, 10*7*4)
		if err := a.ReadRegion(bg, []int{13, 5}, []int{23, 12}, part); err != nil {
			t.Fatal(err)
		}
		if string(got) != string(src) || string(part[:7*4]) != string(src[(13*36+5)*4:(13*36+12)*4]) {
			t.Fatalf("%s: read back other bytes", name)
		}
	}
	log.mu.Lock()
	defer log.mu.Unlock()
	chunks := 0
	for p, req := range log.req {
		if !strings.Contains(p, "/c/") {
			continue // metadata
		}
		chunks++
		if req != kvik.CompatOn.String() {
			t.Errorf("%s opened for a host read asking for compat %q, want %q", p, req, kvik.CompatOn)
		}
	}
	if chunks == 0 {
		t.Fatal("no chunk file opens were logged")
	}
}
