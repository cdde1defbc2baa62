package kvik

import (
	"context"
	"errors"
	"fmt"
	"hash/fnv"
	"io"
	"io/fs"
	"log/slog"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"syscall"
	"time"
	"unicode/utf8"

	"golang.org/x/sys/unix"

	"github.com/kvikgo/kvik/internal/posix"
)

// PendingFile is a file being written in place of another: a temporary
// file beside the target that Commit renames over it, so that readers of
// the target see the old contents or the new, never a torn file, and a
// failed write leaves the old file as it was. Its FileHandle methods
// write the temporary file.
//
// The replacement keeps the file's identity where a rename can: the
// replaced file's permission bits and, where the process may set them,
// its owner and group carry over; a symbolic link is written through
// (the file it points to is replaced, beside itself, and the link
// stays). A rename cannot keep hard links: the name written gets the new
// file, other hard links of the old one keep the old contents.
//
// Only a regular file is ever replaced: a directory, a device node, a
// FIFO or a socket at the target (or where its links lead) fails
// CreatePending, and Commit, with ErrNotRegular.
type PendingFile struct {
	*FileHandle
	target string   // as given
	final  string   // target with symbolic links followed: what Commit replaces
	tmp    string   // the temporary file
	lock   *os.File // the temporary file, locked; all there is without a FileHandle
	isNew  bool     // final did not exist when the file was created
	noSync bool     // commit without syncs (SaveFile's WithoutSync)
	done   bool
}

var pendingSeq atomic.Uint64

// ownPID is the process's id, in the name of each temporary file: a
// system call each time otherwise (a Go process does not fork).
var ownPID = os.Getpid()

// CreatePending opens a new temporary file beside path for writing. A
// perm of 0 keeps the identity of the file it replaces: its permission
// bits (setuid, setgid and sticky excepted) and, where the process may
// set them (Fchown; EPERM is ignored), its owner and group; a new file
// gets 0666 less the umask, as os.Create gives. Another perm is used as
// it is, less the umask. When path is a symbolic link (a chain of them),
// the file it points to is replaced and the link kept. path must name a
// file: an empty path, one ending in a slash or naming a directory fails
// with ErrInvalidArgument (and syscall.EISDIR for a directory). A path
// that is, or links to, anything but a regular file (a directory, a
// device node, a FIFO, a socket) fails with ErrNotRegular, naming what
// it is, before anything is created: a save replaces files, it never
// writes into a device or a pipe as cp(1) would.
//
// Temporary files that a dead process left beside the file are removed
// (see IsPendingName). Call Commit to replace path with the new file, or
// Abort to remove it; Abort after Commit does nothing, so it can be
// deferred.
func CreatePending(path string, perm fs.FileMode, opts ...Option) (*PendingFile, error) {
	return createPending(path, perm, true, opts)
}

// createPending is CreatePending; without handle the PendingFile has no
// FileHandle, and only writePlain, Commit and Abort may be used (see
// plainSave).
func createPending(path string, perm fs.FileMode, handle bool, opts []Option) (*PendingFile, error) {
	final, old, err := pendingTarget(path)
	if err != nil {
		return nil, err
	}
	removeStalePending(final)
	var tmp string
	var lock *os.File
	for range 3 {
		tmp = pendingName(final)
		if lock, err = createLocked(tmp, perm, old); !errors.Is(err, errTaken) {
			break
		}
	}
	if err != nil {
		return nil, &fs.PathError{Op: "create", Path: path, Err: pathErrInner(err)}
	}
	p := &PendingFile{target: path, final: final, tmp: tmp, lock: lock, isNew: old == nil}
	if handle {
		if p.FileHandle, err = OpenFile(tmp, os.O_RDWR, 0, opts...); err != nil {
			os.Remove(tmp)
			lock.Close()
			return nil, &fs.PathError{Op: "create", Path: path, Err: pathErrInner(err)}
		}
	}
	return p, nil
}

// maxLinks bounds a chain of symbolic links, as the kernel's ELOOP does.
const maxLinks = 40

// pendingTarget checks that path names a file and returns the file it
// stands for, its symbolic links followed, and that file's information
// (nil when it does not exist yet).
func pendingTarget(path string) (string, fs.FileInfo, error) {
	bad := func(err error) (string, fs.FileInfo, error) {
		return "", nil, &fs.PathError{Op: "create", Path: path, Err: err}
	}
	switch base := filepath.Base(path); {
	case path == "":
		return bad(fmt.Errorf("%w: empty path", ErrInvalidArgument))
	case strings.HasSuffix(path, "/") || base == "." || base == "..":
		return bad(fmt.Errorf("%w: %w: path names a directory", ErrInvalidArgument, syscall.EISDIR))
	}
	// The walk is checked against the kernel's view, which it cannot
	// always take: a link in /proc (/dev/stderr -> /proc/self/fd/2) names
	// a pipe, a socket or a deleted file by text that is no path, which
	// reads as a new file. A concurrent save of the file can part the
	// two views as well: they are taken again.
	for try := 0; ; try++ {
		p, fi, err := followLinks(path)
		if err != nil {
			return bad(err)
		}
		if fi != nil && !fi.Mode().IsRegular() {
			return bad(notRegular(fi.Mode(), path, p))
		}
		if p == path {
			return p, fi, nil // no link followed: the walk was the kernel's
		}
		st, err := os.Stat(path)
		switch {
		case errors.Is(err, fs.ErrNotExist):
			return p, fi, nil
		case err != nil:
			return bad(pathErrInner(err))
		case !st.Mode().IsRegular():
			return bad(notRegular(st.Mode(), path, ""))
		case fi != nil && os.SameFile(fi, st):
			return p, fi, nil
		case try == 2:
			return bad(fmt.Errorf("%w: its links lead to a file by no path that can be replaced", ErrInvalidArgument))
		}
	}
}

// followLinks follows path's symbolic links as the kernel would and
// returns the path reached and its information: nil when nothing is
// there (a new file, or a dangling link's target).
func followLinks(path string) (string, fs.FileInfo, error) {
	p := path
	for i := 0; ; i++ {
		fi, err := os.Lstat(p)
		if errors.Is(err, fs.ErrNotExist) {
			return p, nil, nil
		}
		if err != nil {
			return "", nil, pathErrInner(err)
		}
		if fi.Mode()&fs.ModeSymlink == 0 {
			return p, fi, nil
		}
		if i == maxLinks {
			return "", nil, syscall.ELOOP
		}
		l, err := os.Readlink(p)
		if err != nil {
			return "", nil, pathErrInner(err)
		}
		if !filepath.IsAbs(l) {
			// Not filepath.Join: cleaning "dir/../x" is wrong when dir
			// is itself a link; the kernel resolves the joined path.
			l = filepath.Dir(p) + string(filepath.Separator) + l
		}
		if strings.HasSuffix(l, "/") {
			return "", nil, fmt.Errorf("%w: %w: link points to a directory", ErrInvalidArgument, syscall.EISDIR)
		}
		p = l
	}
}

// notRegularError is ErrNotRegular with what the file is. A directory's
// is also ErrInvalidArgument and syscall.EISDIR, as for a path ending in
// a slash.
type notRegularError struct {
	what string
	dir  bool
}

func (e *notRegularError) Error() string { return ErrNotRegular.Error() + ": " + e.what }

func (e *notRegularError) Is(target error) bool {
	return target == ErrNotRegular || e.dir && (target == ErrInvalidArgument || target == syscall.EISDIR)
}

// notRegular is the error of a save of path whose file, of the type in
// mode, was reached through links at final ("" when not known).
func notRegular(mode fs.FileMode, path, final string) error {
	what := posix.FileKind(mode)
	if final != path && final != "" {
		what = "a link to " + what + ", " + final
	}
	return &notRegularError{what: what, dir: mode.IsDir()}
}

// createLocked creates the temporary file tmp, holding a lock on it
// (flock) for as long as the file returned is open, so that no other
// process takes it for stale; with perm 0 it takes old's owner, group
// and permission bits, or 0666 less the umask for a new file.
func createLocked(tmp string, perm fs.FileMode, old fs.FileInfo) (*os.File, error) {
	mode := perm.Perm()
	switch {
	case perm != 0:
	case old != nil:
		mode = 0o600 // until it is the old file's
	default:
		mode = 0o666
	}
	// Not os.OpenFile, which tries the file on the network poller: four
	// more system calls per file, a tenth of a save of a Zarr chunk.
	fd, err := posix.Open(tmp, unix.O_RDWR|unix.O_CREAT|unix.O_EXCL|unix.O_CLOEXEC, uint32(mode))
	if err != nil {
		return nil, &fs.PathError{Op: "open", Path: tmp, Err: err}
	}
	f := os.NewFile(uintptr(fd), tmp)
	fail := func(err error) (*os.File, error) {
		f.Close()
		os.Remove(tmp)
		return nil, err
	}
	// A process removing stale temporaries (removeIfStale) locks one
	// before it removes it, so the file is ours only if, once locked, it
	// is still at its name. On a file system without locks Flock fails,
	// and no process takes the file for stale.
	switch err := unix.Flock(int(f.Fd()), unix.LOCK_EX|unix.LOCK_NB); {
	case err == unix.EWOULDBLOCK:
		return fail(errTaken)
	case err == nil && !stillAt(f, tmp):
		f.Close()
		return nil, errTaken
	}
	if perm == 0 && old != nil {
		if st, ok := old.Sys().(*syscall.Stat_t); ok {
			if err := f.Chown(int(st.Uid), int(st.Gid)); err != nil {
				f.Chown(-1, int(st.Gid)) // a group of ours, where the owner cannot be kept
			}
		}
		if err := f.Chmod(old.Mode().Perm()); err != nil {
			return fail(err)
		}
	}
	return f, nil
}

// errTaken is createLocked's answer when a process removing stale
// temporaries took the new one before it was locked; CreatePending then
// tries another name.
var errTaken = errors.New("temporary file taken before it was locked")

// stillAt reports whether the file at path is f.
func stillAt(f *os.File, path string) bool {
	a, err := f.Stat()
	if err != nil {
		return false
	}
	b, err := os.Lstat(path)
	return err == nil && os.SameFile(a, b)
}

// pendingMark is in the name of every temporary file of CreatePending.
const pendingMark = ".kvik-tmp-"

// nameMax is the longest file name most file systems take (NAME_MAX).
const nameMax = 255

// pendingName names a temporary file next to path: hidden, marked with
// the process id and a counter so that concurrent writers never share
// one, and recognisable for clean-up (".name.kvik-tmp-PID-N"). A name too
// long for that is shortened and a hash of it added, so that the
// temporary name fits NAME_MAX whenever the name does.
func pendingName(path string) string {
	dir, base := filepath.Split(path)
	tail := pendingMark + strconv.Itoa(ownPID) + "-" + strconv.FormatUint(pendingSeq.Add(1), 10)
	if 1+len(base)+len(tail) > nameMax {
		sum := baseSum(base)
		keep := nameMax - 1 - len(sum) - len(tail)
		for keep > 0 && !utf8.RuneStart(base[keep]) {
			keep-- // whole characters, so that listings print it well
		}
		base = base[:keep] + sum
	}
	return dir + "." + base + tail
}

// baseSum is the hash that a shortened temporary name carries of the
// name it stands for.
func baseSum(base string) string {
	h := fnv.New32a()
	h.Write([]byte(base))
	return fmt.Sprintf("~%08x", h.Sum32())
}

// IsPendingOf reports whether name (a base name) is that of a temporary
// file of CreatePending for path, shortened or not: what an interrupted
// save of path may have left beside it.
func IsPendingOf(name, path string) bool {
	i := strings.Index(name, pendingMark)
	if i < 1 || name[0] != '.' {
		return false
	}
	head, base := name[1:i], filepath.Base(path)
	if head == base {
		return true
	}
	sum := baseSum(base)
	return strings.HasSuffix(head, sum) && strings.HasPrefix(base, strings.TrimSuffix(head, sum))
}

// IsPendingName reports whether the base name of a file is that of a
// CreatePending temporary file: one a crash may have left behind, which
// listings skip and clean-up may remove.
func IsPendingName(name string) bool {
	return strings.HasPrefix(filepath.Base(name), ".") && strings.Contains(filepath.Base(name), pendingMark)
}

// StalePendingAge is how old a temporary file of CreatePending must be
// before another process removes it as stale.
const StalePendingAge = time.Minute

// staleScans records when each directory was last searched for stale
// temporary files, so that a process searches one at most once per
// StalePendingAge (a store writing many files into one directory lists
// it rarely).
var staleScans struct {
	sync.Mutex
	last map[string]time.Time
}

// removeStalePending removes the temporary files beside final that dead
// processes left (see removeIfStale): those of final whatever their age,
// so that a retry after a crash finds its space, and those of other files
// once older than StalePendingAge.
func removeStalePending(final string) {
	dir, base := filepath.Dir(final), filepath.Base(final)
	now := time.Now()
	staleScans.Lock()
	if t, ok := staleScans.last[dir]; ok && now.Sub(t) < StalePendingAge {
		staleScans.Unlock()
		return
	}
	if staleScans.last == nil || len(staleScans.last) >= 4096 {
		staleScans.last = map[string]time.Time{}
	}
	staleScans.last[dir] = now
	staleScans.Unlock()

	eachPending(dir, func(name string) {
		age := StalePendingAge
		if IsPendingOf(name, base) {
			age = 0
		}
		removeIfStale(filepath.Join(dir, name), now, age)
	})
}

// eachPending calls fn with the name of each temporary file of
// CreatePending in dir.
func eachPending(dir string, fn func(name string)) {
	d, err := os.Open(dir)
	if err != nil {
		return
	}
	defer d.Close()
	for {
		names, err := d.Readdirnames(1024)
		for _, n := range names {
			if IsPendingName(n) {
				fn(n)
			}
		}
		if err != nil {
			return
		}
	}
}

// removeIfStale removes the temporary file at path and reports true if
// a dead process left it: a regular file at least minAge old, whose
// process id names no live process on this host (kill(pid, 0) gives
// ESRCH) and whose lock (flock) no process holds. A writer holds its
// lock from before its file can be taken (createLocked) until Commit or
// Abort, on any host of a file system with shared locks (NFS), so a file
// in use is never removed; on a file system without locks none is.
func removeIfStale(path string, now time.Time, minAge time.Duration) bool {
	n := filepath.Base(path)
	rest := n[strings.LastIndex(n, pendingMark)+len(pendingMark):]
	ps, _, _ := strings.Cut(rest, "-")
	pid, err := strconv.Atoi(ps)
	if err != nil || pid <= 0 || pid == ownPID || unix.Kill(pid, 0) != unix.ESRCH {
		return false
	}
	// Opened only if a regular file, and without blocking: opening a
	// FIFO or a device under a temporary's name could hang or act.
	li, err := os.Lstat(path)
	if err != nil || !li.Mode().IsRegular() {
		return false
	}
	f, err := os.OpenFile(path, os.O_RDONLY|unix.O_NOFOLLOW|unix.O_NONBLOCK, 0)
	if err != nil {
		return false
	}
	defer f.Close()
	fi, err := f.Stat()
	if err != nil || !os.SameFile(li, fi) || now.Sub(fi.ModTime()) < minAge {
		return false
	}
	if unix.Flock(int(f.Fd()), unix.LOCK_EX|unix.LOCK_NB) != nil {
		return false // held by a writer, or a file system without locks
	}
	return os.Remove(path) == nil
}

// pathErrInner returns the error a *fs.PathError wraps, so that it can be
// named again after the path the caller knows; other errors as they are.
func pathErrInner(err error) error {
	if pe, ok := err.(*fs.PathError); ok {
		return pe.Err
	}
	return err
}

// CommitWithoutSync is Commit without its syncs (see WithoutSync): the
// replacement is atomic, never torn to a reader, but not durable, so a
// crash of the machine soon after may leave the old file, none, or an
// empty or partly written one.
func (p *PendingFile) CommitWithoutSync() error {
	p.noSync = true
	return p.Commit()
}

// Target returns the path given to CreatePending. When it is a symbolic
// link, Commit replaces the file the link points to.
func (p *PendingFile) Target() string { return p.target }

// Commit syncs the temporary file, closes it, renames it over the target
// and syncs the directory, so that the new contents are durable under the
// target's name when Commit returns (on a file system held in memory,
// tmpfs or ramfs, where a sync stores nothing, it syncs nothing). On any
// error the temporary file is
// removed and the target is left as it was: among them ErrNotRegular,
// when the target has become something other than a regular file since
// CreatePending (see replaceRegular).
func (p *PendingFile) Commit() error {
	if p.done {
		return &fs.PathError{Op: "commit", Path: p.target, Err: ErrClosed}
	}
	p.done = true
	defer p.lock.Close()
	tmp := p.tmp
	memFS := inMemory(int(p.lock.Fd()))
	volatile := p.noSync || memFS
	var err error
	switch {
	case p.FileHandle != nil:
		if !volatile {
			err = p.FileHandle.Sync()
		}
		if cerr := p.FileHandle.Close(); err == nil {
			err = cerr
		}
	case !volatile:
		if err = fsync(int(p.lock.Fd())); err != nil {
			err = &fs.PathError{Op: "sync", Path: tmp, Err: err}
		}
	}
	if err == nil {
		err = replaceRegular(tmp, p.final, p.isNew)
	}
	if err != nil {
		os.Remove(tmp)
		if errors.Is(err, ErrNotRegular) {
			err = &fs.PathError{Op: "commit", Path: p.target, Err: err}
		}
		return err
	}
	if !volatile {
		err = syncDir(filepath.Dir(p.final))
	}
	if l := logAt(LevelDebug); l != nil && err == nil {
		l.LogAttrs(context.Background(), LevelDebug, "kvik: save", slog.String("path", p.target), slog.Bool("synced", !volatile), slog.Bool("memory_fs", memFS))
	}
	return err
}

// replaceRegular renames tmp over final unless final is now something
// other than a regular file. Where final is missing, the rename is one
// that fails if a file appeared meanwhile (RENAME_NOREPLACE), which is
// then looked at again; an existing file is looked at just before the
// rename, which leaves microseconds in which it could be swapped for
// another kind of file: rename(2) has no flag to close them.
func replaceRegular(tmp, final string, isNew bool) error {
	if isNew {
		// Most saves make a file: the rename that fails if one appeared
		// meanwhile goes first, without a look.
		switch err := unix.Renameat2(unix.AT_FDCWD, tmp, unix.AT_FDCWD, final, unix.RENAME_NOREPLACE); err {
		case nil:
			return nil
		case unix.EEXIST, unix.EINVAL, unix.ENOSYS, unix.EOPNOTSUPP: // looked at below
		default:
			return &os.LinkError{Op: "rename", Old: tmp, New: final, Err: err}
		}
	}
	for range 2 {
		fi, err := os.Lstat(final)
		switch {
		case err == nil && !fi.Mode().IsRegular():
			return notRegular(fi.Mode(), final, "")
		case err == nil:
			return os.Rename(tmp, final)
		case !errors.Is(err, fs.ErrNotExist):
			return err
		}
		switch err := unix.Renameat2(unix.AT_FDCWD, tmp, unix.AT_FDCWD, final, unix.RENAME_NOREPLACE); err {
		case nil:
			return nil
		case unix.EEXIST:
			continue
		case unix.EINVAL, unix.ENOSYS, unix.EOPNOTSUPP: // no RENAME_NOREPLACE (NFS, some FUSE)
			return os.Rename(tmp, final)
		default:
			return &os.LinkError{Op: "rename", Old: tmp, New: final, Err: err}
		}
	}
	return &os.LinkError{Op: "rename", Old: tmp, New: final, Err: unix.EEXIST}
}

// Reserve allocates n bytes on disk for the temporary file before it is
// written (fallocate), which also makes the file n bytes long, so the
// caller should write all of them: ext4 runs O_DIRECT writes inside a
// file's size side by side, where writes that extend it take the inode's
// lock one at a time, and a disk too full for the file fails here, with
// syscall.ENOSPC, rather than midway. Memory file systems (tmpfs), where
// fallocate would zero every page first, and file systems without
// fallocate are left as they are. SaveFile reserves the sizes of the files
// it writes through the engine (more than one task).
//
// On ENOSPC the temporary files of the same target that dead processes
// left (a save killed after its Reserve) are removed and the allocation
// tried once more; the error names those removed and those still there.
func (p *PendingFile) Reserve(n int64) error {
	if p.done {
		return &fs.PathError{Op: "reserve", Path: p.target, Err: ErrClosed}
	}
	if n <= 0 || p.inMemoryFS() {
		return nil
	}
	err := p.retryNoSpace(func() error { return posix.Fallocate(p.fd, 0, 0, n) })
	if errors.Is(err, unix.EOPNOTSUPP) || errors.Is(err, unix.ENOSYS) || errors.Is(err, unix.EINVAL) {
		return nil
	}
	if err != nil {
		return &fs.PathError{Op: "reserve", Path: p.target, Err: fmt.Errorf("%d bytes: %w", n, err)}
	}
	return nil
}

// WritePieces writes pieces, one after another from offset 0, as the
// temporary file's contents, as SaveFile does: their total size reserved
// first (Reserve), then written in page-aligned tasks in parallel,
// device pieces staged through pinned buffers. A caller that checks the
// file before Commit (reading it back through p) writes with it; on
// ENOSPC it does what Reserve does.
func (p *PendingFile) WritePieces(ctx context.Context, pieces []Piece) error {
	if p.done {
		return &fs.PathError{Op: "write", Path: p.target, Err: ErrClosed}
	}
	if err := checkPieces(pieces); err != nil {
		return &fs.PathError{Op: "write", Path: p.target, Err: err}
	}
	var total int64
	for _, pc := range pieces {
		total += pc.Len()
	}
	err := p.Reserve(total)
	if err == nil {
		err = p.retryNoSpace(func() error { return pathErrInner(writePieces(ctx, p.FileHandle, pieces)) })
	}
	if err != nil {
		return &fs.PathError{Op: "write", Path: p.target, Err: pathErrInner(err)}
	}
	return nil
}

// retryNoSpace runs op and, if it fails with ENOSPC, removes the
// temporary files of p's target that dead processes left, runs op once
// more if any went and, if it fails again, names them and those that
// remain in the error.
func (p *PendingFile) retryNoSpace(op func() error) error {
	err := op()
	if !errors.Is(err, syscall.ENOSPC) {
		return err
	}
	removed, kept := removeStaleOf(p.final, p.tmp)
	if len(removed) > 0 {
		if err = op(); !errors.Is(err, syscall.ENOSPC) {
			return err
		}
	}
	var notes []string
	if len(removed) > 0 {
		notes = append(notes, "removed the temporary files of dead processes: "+listSome(removed))
	}
	if len(kept) > 0 {
		notes = append(notes, "temporary files of this file that may be in use hold space: "+listSome(kept))
	}
	if notes == nil {
		return err
	}
	return fmt.Errorf("%w (%s)", err, strings.Join(notes, "; "))
}

// removeStaleOf removes the temporary files of final, but own, that dead
// processes left, whatever their age (see removeIfStale), and returns
// those it removed and those it kept, each as its path and size.
func removeStaleOf(final, own string) (removed, kept []string) {
	dir, base := filepath.Dir(final), filepath.Base(final)
	now := time.Now()
	eachPending(dir, func(name string) {
		path := filepath.Join(dir, name)
		fi, err := os.Lstat(path)
		if !IsPendingOf(name, base) || name == filepath.Base(own) || err != nil {
			return
		}
		desc := fmt.Sprintf("%s (%d bytes)", path, fi.Size())
		if removeIfStale(path, now, 0) {
			removed = append(removed, desc)
		} else {
			kept = append(kept, desc)
		}
	})
	return removed, kept
}

// listSome joins the first few of items, saying how many more there are.
func listSome(items []string) string {
	const most = 4
	if len(items) <= most {
		return strings.Join(items, ", ")
	}
	return fmt.Sprintf("%s and %d more", strings.Join(items[:most], ", "), len(items)-most)
}

// Abort closes and removes the temporary file, leaving the target as it
// was. It does nothing after Commit or a first Abort.
func (p *PendingFile) Abort() error {
	if p.done {
		return nil
	}
	p.done = true
	defer p.lock.Close()
	var err error
	if p.FileHandle != nil {
		err = p.FileHandle.Close()
	}
	if rerr := os.Remove(p.tmp); err == nil {
		err = rerr
	}
	return err
}

// Close is Abort: a PendingFile is kept only through Commit.
func (p *PendingFile) Close() error { return p.Abort() }

// syncDir makes a rename in dir durable.
func syncDir(dir string) error {
	fd, err := openDir(dir)
	if err != nil {
		return err
	}
	defer unix.Close(fd)
	return syncDirFD(fd, dir)
}

// openDir opens directory dir for syncDirFD.
func openDir(dir string) (int, error) {
	fd, err := posix.Open(dir, unix.O_RDONLY|unix.O_DIRECTORY|unix.O_CLOEXEC, 0)
	if err != nil {
		return -1, &fs.PathError{Op: "open", Path: dir, Err: err}
	}
	return fd, nil
}

// syncDirFD syncs fd, directory dir.
func syncDirFD(fd int, dir string) error {
	if err := fsync(fd); err != nil && !errors.Is(err, unix.EINVAL) { // EINVAL: a file system that cannot sync directories
		return &fs.PathError{Op: "sync", Path: dir, Err: err}
	}
	return nil
}

// MkdirAll is os.MkdirAll for a save's directory: it makes path and any
// parents it lacks, and syncs the directory each was made in, so that a
// file SaveFile then saves there survives a crash of the machine with
// the directories that lead to it (SaveFile syncs only the file's own
// directory, where os.MkdirAll syncs none: after a crash a directory made
// just before may be gone, and every file saved in it with it). With
// WithoutSync, or in a file system held in memory, it syncs nothing. A
// directory made by another process at the same time counts as made: its
// parent is synced all the same. Each directory made is logged at
// LevelDebug ("kvik: mkdir"). An existing path that is not a directory
// fails with an error matching syscall.ENOTDIR.
func MkdirAll(path string, perm fs.FileMode, opts ...RemoteOption) error {
	noSync := skipsSync(opts)
	var missing []string // from path up
	for p := filepath.Clean(path); ; {
		fi, err := os.Stat(p)
		if err == nil {
			if !fi.IsDir() {
				return &fs.PathError{Op: "mkdir", Path: p, Err: syscall.ENOTDIR}
			}
			break
		}
		if !errors.Is(err, fs.ErrNotExist) {
			return err
		}
		missing = append(missing, p)
		up := filepath.Dir(p)
		if up == p {
			break
		}
		p = up
	}
	for _, d := range slices.Backward(missing) {
		if err := os.Mkdir(d, perm); err != nil {
			if fi, serr := os.Stat(d); serr != nil || !fi.IsDir() {
				return err
			}
		}
		if err := syncNewDir(filepath.Dir(d), d, noSync); err != nil {
			return err
		}
	}
	return nil
}

// syncNewDir syncs parent, where dir was made, unless noSync or parent
// lies in a file system held in memory, and logs dir's making.
func syncNewDir(parent, dir string, noSync bool) error {
	fd, err := openDir(parent)
	if err != nil {
		return err
	}
	defer unix.Close(fd)
	memFS := inMemory(fd)
	synced := !noSync && !memFS
	if synced {
		if err := syncDirFD(fd, parent); err != nil {
			return err
		}
	}
	if l := logAt(LevelDebug); l != nil {
		l.LogAttrs(context.Background(), LevelDebug, "kvik: mkdir", slog.String("path", dir), slog.Bool("synced", synced), slog.Bool("memory_fs", memFS))
	}
	return nil
}

// SaveFile writes pieces, one after another, as the whole file or object
// name, never leaving a torn or partial one behind:
//
//   - a local path is written through CreatePending in page-aligned
//     tasks in parallel, across piece boundaries, device pieces (of one
//     or several GPUs) staged through pinned buffers (see
//     docs/loaders.md, "Saving from GPU memory"), or, host pieces of at
//     most one task (Defaults.TaskSize) in all, by the calling goroutine
//     with no FileHandle (a chunk store's files); then committed: on any
//     error the old file, if any, is left as it was and the temporary
//     file removed. The new file keeps the replaced file's mode and
//     owner, a symbolic link is written through, and other hard links of
//     the old file keep the old contents (see PendingFile). Only a
//     regular file is replaced: a directory, device node, FIFO or
//     socket at name, or where its links lead, fails with
//     ErrNotRegular and is left as it is;
//   - an s3:// URL or an S3 object's URL (see IsURL) is uploaded as
//     UploadS3 does, with opts: in one PUT or a multipart upload that is
//     aborted on any error, so the object appears whole or not at all.
//
// A local file is synced (fsync(2)) before its rename, and its directory
// after, so that a save that returned survives a crash of the machine;
// WithoutSync skips both. ctx cancels the writes. The file formats' Save functions write through
// SaveFile.
func SaveFile(ctx context.Context, name string, pieces []Piece, opts ...RemoteOption) error {
	if err := checkPieces(pieces); err != nil {
		return &fs.PathError{Op: "write", Path: RedactURL(name), Err: err}
	}
	if IsURL(name) {
		return savePiecesS3(ctx, name, pieces, opts)
	}
	return savePiecesLocal(ctx, name, pieces, skipsSync(opts))
}

const maxInt = int(^uint(0) >> 1)

// checkPieces checks the sizes of device pieces.
func checkPieces(pieces []Piece) error {
	for i, p := range pieces {
		if p.Ptr != 0 && (p.Size < 0 || p.Size > int64(maxInt)) {
			return fmt.Errorf("%w: piece %d: size %d", ErrInvalidArgument, i, p.Size)
		}
	}
	return nil
}

func savePiecesLocal(ctx context.Context, path string, pieces []Piece, noSync bool) error {
	plain := plainSave(pieces)
	f, err := createPending(path, 0, !plain, nil)
	if err != nil {
		return err
	}
	defer f.Abort()
	f.noSync = noSync
	if plain {
		err = f.writePlain(ctx, pieces)
	} else {
		err = f.WritePieces(ctx, pieces)
	}
	if err != nil {
		return err
	}
	return f.Commit()
}

// plainSave reports whether a save of pieces is written by the calling
// goroutine through the temporary file's descriptor (writePlain): host
// pieces of at most one task (Defaults.TaskSize) in all, which the engine
// would write as one task anyway. A FileHandle costs such a file more
// than its write (a second descriptor for O_DIRECT, cuFile's
// registration, a hand-off to the engine's threads), and a store of
// Zarr chunks saves thousands of them: 30% of the time of a save of
// 370 KiB on tmpfs.
func plainSave(pieces []Piece) bool {
	d, err := GetDefaults()
	if err != nil {
		return false // the engine's path reports it
	}
	n := 0
	for _, p := range pieces {
		if p.Ptr != 0 {
			return false
		}
		if n += len(p.Data); n > d.TaskSize {
			return false
		}
	}
	return true
}

// writePlain writes host pieces one after another from offset 0 through
// p's descriptor, in the calling goroutine; on ENOSPC it does what
// WritePieces does.
func (p *PendingFile) writePlain(ctx context.Context, pieces []Piece) error {
	err := p.retryNoSpace(func() error {
		var off int64
		for _, pc := range pieces {
			if err := ctx.Err(); err != nil {
				return err
			}
			if _, err := posix.WriteFull(int(p.lock.Fd()), pc.Data, off); err != nil {
				return err
			}
			off += int64(len(pc.Data))
		}
		return nil
	})
	if err != nil {
		return &fs.PathError{Op: "write", Path: p.target, Err: pathErrInner(err)}
	}
	return nil
}

// writePieces writes the pieces to f one after another from offset 0:
// through the staged engine of saveWriter, or, for device pieces on a
// cuFile handle, each piece's own PWriteDevice, which cuFile writes from
// device memory without staging.
func writePieces(ctx context.Context, f *FileHandle, pieces []Piece) error {
	if !tune.stagedSave || f.compat == CompatOff && slices.ContainsFunc(pieces, func(p Piece) bool { return p.Ptr != 0 }) {
		return writeEachPiece(ctx, f, pieces)
	}
	l, err := newLayout(pieces, saveDevice)
	if err != nil {
		return err
	}
	d, err := GetDefaults()
	if err != nil {
		return err
	}
	return (&saveWriter{f: f, d: d, l: l, ops: saveDevice}).write(ctx)
}

// writeEachPiece starts every piece's write, then waits for all of them.
func writeEachPiece(ctx context.Context, f *FileHandle, pieces []Piece) error {
	futs := make([]*Future, 0, len(pieces))
	want := make([]int64, 0, len(pieces))
	var off int64
	for _, p := range pieces {
		n := p.Len()
		switch {
		case n == 0:
		case p.Ptr != 0:
			futs = append(futs, f.PWriteDevice(ctx, p.Ptr, int(n), off, 0))
		default:
			futs = append(futs, f.PWrite(ctx, p.Data, off))
		}
		if n != 0 {
			want = append(want, n)
		}
		off += n
	}
	var first error
	for i, fu := range futs {
		n, err := fu.Get()
		if err == nil && int64(n) != want[i] {
			err = &fs.PathError{Op: "write", Path: f.Name(), Err: io.ErrShortWrite}
		}
		if first == nil {
			first = err
		}
	}
	return first
}

func savePiecesS3(ctx context.Context, url string, pieces []Piece, opts []RemoteOption) error {
	devs, err := resolvePieces(pieces)
	if err != nil {
		return &fs.PathError{Op: "write", Path: RedactURL(url), Err: err}
	}
	return uploadPieces(ctx, url, pieces, devs, opts)
}
