package kvik_test

import (
	"bytes"
	"fmt"
	"log/slog"
	"os"
	"path/filepath"

	"github.com/kvikgo/kvik"
)

// ExampleSetLogger sends kvik's records to the application's slog
// handler, here a text handler writing to a buffer, which keeps a few
// attributes so that the output does not depend on the machine.
func ExampleSetLogger() {
	var buf bytes.Buffer
	keep := map[string]bool{slog.LevelKey: true, slog.MessageKey: true, "compat_mode": true, "reason": true}
	h := slog.NewTextHandler(&buf, &slog.HandlerOptions{
		Level: kvik.LevelInfo,
		ReplaceAttr: func(_ []string, a slog.Attr) slog.Attr {
			if !keep[a.Key] {
				return slog.Attr{} // dropped: time, path, direct_io
			}
			return a
		},
	})
	restore := kvik.SetLogger(slog.New(h))
	defer restore()

	dir, err := os.MkdirTemp("", "kvik-log-")
	if err != nil {
		panic(err)
	}
	defer os.RemoveAll(dir)
	path := filepath.Join(dir, "data.bin")
	if err := os.WriteFile(path, []byte("hello"), 0o644); err != nil {
		panic(err)
	}
	f, err := kvik.Open(path, "r", 0, kvik.WithCompatMode(kvik.CompatOn))
	if err != nil {
		panic(err)
	}
	f.Close()
	fmt.Print(buf.String())
	// Output:
	// level=INFO msg="kvik: open" compat_mode=on reason="compat mode on: POSIX I/O requested"
}
