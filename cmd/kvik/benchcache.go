package main

import (
	"fmt"
	"io"
	"os"
	"strings"

	"github.com/kvikgo/kvik"
)

// cacheFlag is kvik bench's --cache: the page-cache state every read starts
// from.
type cacheFlag struct {
	mode   string // "", "cold", "warm" or "half"
	stripe int64  // half: the size of the alternating stripes
}

// defaultCacheStripe is the stripe of --cache half.
const defaultCacheStripe = 64 * miB

func (c *cacheFlag) String() string {
	if c == nil || c.mode != "half" {
		return c.modeOrEmpty()
	}
	return "half:" + formatSize(c.stripe)
}

func (c *cacheFlag) modeOrEmpty() string {
	if c == nil {
		return ""
	}
	return c.mode
}

func (c *cacheFlag) Set(s string) error {
	mode, size, hasSize := strings.Cut(s, ":")
	switch {
	case mode == "half" && hasSize:
		n, err := parseSize(size)
		if err != nil || n <= 0 {
			return fmt.Errorf("bad stripe size %q", size)
		}
		c.mode, c.stripe = mode, n
	case mode == "half":
		c.mode, c.stripe = mode, defaultCacheStripe
	case (mode == "cold" || mode == "warm") && !hasSize:
		c.mode = mode
	default:
		return fmt.Errorf("want cold, warm or half[:SIZE]")
	}
	return nil
}

// describe says what the page cache holds before each read.
func (c cacheFlag) describe() string {
	switch c.mode {
	case "cold":
		return "dropped before every read"
	case "warm":
		return "whole file loaded before every read"
	}
	return fmt.Sprintf("half: alternate %s stripes loaded and dropped before every read", formatSize(c.stripe))
}

// setCache brings the file's page cache to the --cache state.
func (b *bench) setCache() error {
	switch b.o.cache.mode {
	case "cold":
		return b.dropCache()
	case "warm":
		return loadCache(b.path, 0, b.size)
	}
	s := b.o.cache.stripe
	for off, i := int64(0), 0; off < b.size; off, i = off+s, i+1 {
		n := min(s, b.size-off)
		var err error
		if i%2 == 0 {
			err = loadCache(b.path, off, n)
		} else {
			err = kvik.DropFilePageCache(b.path, off, n)
		}
		if err != nil {
			return err
		}
	}
	return nil
}

// loadCache reads [off, off+n) of path with buffered I/O unless all of it
// is in the page cache already.
func loadCache(path string, off, n int64) error {
	if res, total, err := kvik.PageCacheInfo(path, off, n); err == nil && res == total {
		return nil
	}
	f, err := os.Open(path)
	if err != nil {
		return err
	}
	defer f.Close()
	buf := make([]byte, 16*miB)
	for pos := off; pos < off+n; pos += int64(len(buf)) {
		m := min(int64(len(buf)), off+n-pos)
		if _, err := f.ReadAt(buf[:m], pos); err != nil && err != io.EOF {
			return err
		}
	}
	return nil
}
