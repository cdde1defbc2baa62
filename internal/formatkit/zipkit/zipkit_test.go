package zipkit

import (
	"archive/zip"
	"bytes"
	"errors"
	"fmt"
	"io"
	"testing"

	"github.com/kvikgo/kvik"
)

var errBad = errors.New("bad archive")

// TestBounded: reads before the start or past the end are the format's
// error; one that runs over the end gives what there is and io.EOF.
func TestBounded(t *testing.T) {
	data := []byte("0123456789")
	b := Bounded{bytes.NewReader(append(data, "beyond"...)), int64(len(data)), errBad}
	p := make([]byte, 4)
	if n, err := b.ReadAt(p, 2); n != 4 || err != nil || string(p) != "2345" {
		t.Errorf("inside: %d %v %q", n, err, p)
	}
	if n, err := b.ReadAt(p, 8); n != 2 || err != io.EOF || string(p[:2]) != "89" {
		t.Errorf("over the end: %d %v %q", n, err, p[:n])
	}
	for _, off := range []int64{-1, 11, 1 << 62} {
		if _, err := b.ReadAt(p, off); !errors.Is(err, errBad) {
			t.Errorf("at %d: %v", off, err)
		}
	}
}

// TestOpen opens an archive and finds its stored member's bytes; bytes
// that are not one, or a member placed past the end, are the format's
// error.
func TestOpen(t *testing.T) {
	var buf bytes.Buffer
	w := zip.NewWriter(&buf)
	f, _ := w.CreateHeader(&zip.FileHeader{Name: "m", Method: zip.Store})
	f.Write([]byte("member bytes"))
	w.Close()
	a := buf.Bytes()
	zr, _, err := Open(bytes.NewReader(a), int64(len(a)), errBad)
	if err != nil || len(zr.File) != 1 {
		t.Fatal(err)
	}
	off, err := DataAt(zr.File[0], int64(len(a)), errBad)
	if err != nil || string(a[off:off+12]) != "member bytes" {
		t.Fatalf("%d, %v", off, err)
	}
	if _, err := DataAt(zr.File[0], off+5, errBad); !errors.Is(err, errBad) {
		t.Errorf("a member past the end: %v", err)
	}
	if _, _, err := Open(bytes.NewReader([]byte("not a zip")), 9, errBad); !errors.Is(err, errBad) {
		t.Errorf("not a zip: %v", err)
	}
	if err := Err(io.ErrClosedPipe, errBad); errors.Is(err, errBad) {
		t.Errorf("a read failure became the format's error: %v", err)
	}
	// A body a server cut short wraps the io.ErrUnexpectedEOF of a cut
	// archive, but is the transport's failure.
	short := fmt.Errorf("%w: 5 of 9 bytes: %w", kvik.ErrShortBody, io.ErrUnexpectedEOF)
	if err := Err(short, errBad); errors.Is(err, errBad) || !errors.Is(err, kvik.ErrShortBody) {
		t.Errorf("a short body: %v", err)
	}
	if err := Err(io.ErrUnexpectedEOF, errBad); !errors.Is(err, errBad) {
		t.Errorf("a cut archive: %v", err)
	}
}
