package zarr

import (
	"context"
	"path/filepath"
	"reflect"
	"strings"
	"sync"

	"github.com/kvikgo/kvik/internal/realpath"
)

// chunkLocks serialises the writes of each stored value (a chunk, or a
// shard of a sharded array) within the process. A write that covers a
// chunk in part reads, updates and rewrites it: two at once would each
// store the chunk with only its own update. Values are named as they are
// stored (a file's real path, an object's URL), so that writes through
// two Arrays or two stores opened on one directory or prefix wait for
// each other too. Other processes are covered only with WithProcessLocks
// (lockFile).
var chunkLocks = keyedMutex{m: map[any]*keyLock{}}

// keyedMutex is a set of locks by name, each kept while held or awaited.
type keyedMutex struct {
	mu sync.Mutex
	m  map[any]*keyLock
}

type keyLock struct {
	token chan struct{} // holds one value while the lock is held
	refs  int           // holders and waiters
}

// lock takes name's lock, or gives up with ctx's error while waiting.
func (k *keyedMutex) lock(ctx context.Context, name any) (unlock func(), err error) {
	k.mu.Lock()
	l := k.m[name]
	if l == nil {
		l = &keyLock{token: make(chan struct{}, 1)}
		k.m[name] = l
	}
	l.refs++
	k.mu.Unlock()
	select {
	case l.token <- struct{}{}:
		return func() { <-l.token; k.release(name, l) }, nil
	case <-ctx.Done():
		k.release(name, l)
		return nil, ctx.Err()
	}
}

func (k *keyedMutex) release(name any, l *keyLock) {
	k.mu.Lock()
	defer k.mu.Unlock()
	if l.refs--; l.refs == 0 {
		delete(k.m, name)
	}
}

// lockPaths resolves the paths that name locks: a chunk's path resolved
// component by component (realpath.Resolve) took a fifth of the time of
// a write of 64 KiB chunks to tmpfs; its directory's resolution, kept,
// costs a stat.
var lockPaths realpath.Cache

// storeKey names a key of a store that is not a DirStore or RemoteStore.
type storeKey struct {
	store any
	key   string
}

// lockChunk takes the write lock of the value stored under key: the
// process's, then, for a DirStore opened WithProcessLocks, the lock
// other processes take too (lockFile).
func (a *Array) lockChunk(ctx context.Context, key string) (unlock func(), err error) {
	name := a.lockName(key)
	inProcess, err := chunkLocks.lock(ctx, name)
	if err != nil {
		return nil, err
	}
	s, ok := a.store.(*DirStore)
	if !ok || !s.processLocks {
		return inProcess, nil
	}
	doc, err := s.path(a.path + "zarr.json") // in the array's directory
	if err != nil {
		inProcess()
		return nil, err
	}
	release, err := lockFile(ctx, lockPaths.Resolve(filepath.Dir(doc)), strings.TrimPrefix(key, a.path))
	if err != nil {
		inProcess()
		return nil, err
	}
	return func() { release(); inProcess() }, nil
}

// lockName names the value stored under key: a DirStore's file by its
// path with symbolic links resolved, a RemoteStore's object by its URL,
// another store's key by the store value (by the Array when that value
// cannot be compared).
func (a *Array) lockName(key string) any {
	switch s := a.store.(type) {
	case *DirStore:
		if p, err := s.path(key); err == nil {
			return lockPaths.Resolve(p)
		}
	case *RemoteStore:
		if k, err := s.key(key); err == nil {
			return s.URL(k)
		}
	}
	if v := reflect.ValueOf(a.store); v.IsValid() && v.Comparable() {
		return storeKey{a.store, key}
	}
	return storeKey{a, key}
}
