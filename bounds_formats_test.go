package kvik_test

import (
	"bytes"
	"context"
	"encoding/binary"
	"errors"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/kvikgo/kvik"
	"github.com/kvikgo/kvik/gguf"
	"github.com/kvikgo/kvik/npy"
	"github.com/kvikgo/kvik/safetensors"
)

// virtualObject is an object of size bytes that starts with head and
// continues with bytes computed from their offset: a server can claim a
// terabyte without holding it.
type virtualObject struct {
	head      []byte
	size, pos int64
}

func (v *virtualObject) Read(p []byte) (int, error) {
	if v.pos >= v.size {
		return 0, io.EOF
	}
	n := int(min(int64(len(p)), v.size-v.pos))
	for i := range n {
		at := v.pos + int64(i)
		if at < int64(len(v.head)) {
			p[i] = v.head[at]
		} else {
			p[i] = byte(at*7 + 1)
		}
	}
	v.pos += int64(n)
	return n, nil
}

func (v *virtualObject) Seek(off int64, whence int) (int64, error) {
	switch whence {
	case io.SeekStart:
		v.pos = off
	case io.SeekCurrent:
		v.pos += off
	case io.SeekEnd:
		v.pos = v.size + off
	}
	return v.pos, nil
}

// claimServer serves, at /obj, an object of size bytes starting with
// head, with Range and HEAD support.
func claimServer(t *testing.T, head []byte, size int64) string {
	ts := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		http.ServeContent(w, r, "obj", time.Time{}, &virtualObject{head: head, size: size})
	}))
	t.Cleanup(ts.Close)
	return ts.URL + "/obj"
}

// npyHeader returns a version 1.0 .npy header for dtype descr and shape.
func npyHeader(descr, shape string) []byte {
	dict := fmt.Sprintf("{'descr': '%s', 'fortran_order': False, 'shape': %s, }", descr, shape)
	n := (10 + len(dict) + 1 + 63) / 64 * 64
	dict += strings.Repeat(" ", n-10-len(dict)-1) + "\n"
	h := append([]byte("\x93NUMPY\x01\x00"), 0, 0)
	binary.LittleEndian.PutUint16(h[8:], uint16(len(dict)))
	return append(h, dict...)
}

// TestRemoteClaimedTerabyte: a server claiming a 1 TiB object whose
// header agrees (an npy array, a safetensors tensor, a GGUF tensor of
// 1 TiB) makes a host load fail with ErrTooLarge before it allocates;
// before, the process died in the allocation. The same objects at a size
// the machine holds are read: the check refuses only what cannot fit.
func TestRemoteClaimedTerabyte(t *testing.T) {
	const tib = int64(1) << 40
	ctx := context.Background()
	open := func(url string) kvik.Reader {
		h, err := kvik.OpenHTTP(ctx, url)
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { h.Close() })
		return h
	}

	hdr := npyHeader("<f8", fmt.Sprintf("(%d,)", tib/8))
	if _, err := npy.LoadHostReader(ctx, open(claimServer(t, hdr, int64(len(hdr))+tib)), nil); !errors.Is(err, kvik.ErrTooLarge) {
		t.Errorf("npy load of a claimed 1 TiB array: %v, want ErrTooLarge", err)
	}
	small := npyHeader("<f8", "(1001,)")
	a, err := npy.LoadHostReader(ctx, open(claimServer(t, small, int64(len(small))+8008)), nil)
	if err != nil || len(a.Data) != 8008 || a.Data[5] != byte((int64(len(small))+5)*7+1) {
		t.Errorf("npy load of a small array: %v", err)
	}

	js := fmt.Sprintf(`{"w":{"dtype":"F32","shape":[%d],"data_offsets":[0,%d]}}`, tib/4, tib)
	st := binary.LittleEndian.AppendUint64(nil, uint64(len(js)))
	st = append(st, js...)
	if _, err := safetensors.LoadHostReader(ctx, open(claimServer(t, st, int64(len(st))+tib)), nil); !errors.Is(err, kvik.ErrTooLarge) {
		t.Errorf("safetensors load of a claimed 1 TiB tensor: %v, want ErrTooLarge", err)
	}

	// A GGUF file of one 1000-element F32 tensor, its dimension then
	// patched to 2^38 elements (1 TiB).
	path := filepath.Join(t.TempDir(), "m.gguf")
	if err := gguf.Save(ctx, path, []gguf.SaveTensor{{Name: "w", Type: gguf.F32, Shape: []int64{1000}, Data: make([]byte, 4000)}}, nil); err != nil {
		t.Fatal(err)
	}
	file, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	dim := binary.LittleEndian.AppendUint64(nil, 1000)
	at := bytes.Index(file, dim)
	if at < 0 {
		t.Fatal("no dimension in the saved GGUF header")
	}
	head := file[:len(file)-4000]
	binary.LittleEndian.PutUint64(head[at:], uint64(tib/4))
	if _, err := gguf.LoadHostReader(ctx, open(claimServer(t, head, int64(len(head))+tib)), nil); !errors.Is(err, kvik.ErrTooLarge) {
		t.Errorf("gguf load of a claimed 1 TiB tensor: %v, want ErrTooLarge", err)
	}
}
