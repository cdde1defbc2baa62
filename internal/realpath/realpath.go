// Package realpath names a file by one path whatever its spelling, for
// the checks that two paths are one file or one inside the other, and
// for locks named by a path.
package realpath

import (
	"io/fs"
	"os"
	"path/filepath"
	"strings"
	"sync"
)

// Resolve returns p as an absolute path in which the part that exists
// has its symbolic links, "." and ".." resolved as the kernel resolves
// them (a ".." after a link climbs from the link's target), followed by
// the part that does not exist yet, cleaned. Two spellings of one file,
// whether it exists yet or not, resolve alike (bind mounts aside).
func Resolve(p string) string {
	if !filepath.IsAbs(p) {
		wd, err := os.Getwd()
		if err != nil {
			return filepath.Clean(p)
		}
		// Not filepath.Join, which would clean "link/.." lexically.
		p = wd + string(filepath.Separator) + p
	}
	head, tail := p, ""
	for {
		if r, err := filepath.EvalSymlinks(head); err == nil {
			return filepath.Join(r, tail)
		}
		i := strings.LastIndexByte(head, filepath.Separator)
		if i <= 0 {
			return filepath.Clean(p)
		}
		head, tail = head[:i], filepath.Join(head[i+1:], tail)
	}
}

// Within reports whether the file at inner is the one at outer or lies
// below it, both resolved.
func Within(outer, inner string) bool {
	o, i := Resolve(outer), Resolve(inner)
	return i == o || strings.HasPrefix(i, strings.TrimSuffix(o, string(filepath.Separator))+string(filepath.Separator))
}

// Cache resolves paths as Resolve does for paths that name files in
// directories it has resolved before, at the cost of a stat of the
// directory and an lstat of the file where Resolve takes an lstat per
// component (twice for a file that does not exist yet). A directory's
// resolution is kept with the directory's identity and used while the
// same spelling still leads to that directory: a link along it pointed
// elsewhere, or the directory removed and another made in its place,
// leads to another and is resolved again. Only a directory moved while a
// link still leads to it keeps the path it had. The zero Cache is ready
// to use; it holds at most maxCached directories.
type Cache struct {
	mu   sync.Mutex
	dirs map[string]cachedDir
}

type cachedDir struct {
	id   fs.FileInfo // the directory when it was resolved
	real string
}

// maxCached bounds a Cache: a Zarr array of more chunk directories than
// that evicts one at random for each new one.
var maxCached = 1 << 14

// Resolve returns Resolve(p).
func (c *Cache) Resolve(p string) string {
	dir, base := filepath.Split(p)
	if base == "" || base == "." || base == ".." {
		return Resolve(p)
	}
	if fi, err := os.Lstat(p); err == nil && fi.Mode()&fs.ModeSymlink != 0 {
		return Resolve(p) // the name stands for its target
	}
	if dir == "" {
		dir = "."
	}
	id, err := os.Stat(dir)
	if err != nil || !id.IsDir() {
		return Resolve(p)
	}
	c.mu.Lock()
	e, ok := c.dirs[dir]
	c.mu.Unlock()
	if !ok || !os.SameFile(e.id, id) {
		e = cachedDir{id: id, real: Resolve(dir)}
		c.mu.Lock()
		if c.dirs == nil {
			c.dirs = map[string]cachedDir{}
		}
		if _, ok := c.dirs[dir]; !ok && len(c.dirs) >= maxCached {
			for k := range c.dirs {
				delete(c.dirs, k)
				break
			}
		}
		c.dirs[dir] = e
		c.mu.Unlock()
	}
	return filepath.Join(e.real, base)
}
