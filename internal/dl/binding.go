package dl

import "sync"

// Binding is a library that a package binds as a whole: every one of
// Funcs must resolve, and where VersionNumber is set the version it
// returns (major*10000 + minor*100 + release) must be at least Min.
// Load does that once; a library that fails is as good as missing.
type Binding struct {
	Lib           *Library
	Funcs         []*Func
	VersionNumber *Func // the library's version function, or nil
	Min           uint32

	once    sync.Once
	err     error
	version uint32
}

// Load opens the library, resolves every function and checks the
// version, once. The error matches ErrNotFound: a LoadError or
// SymbolError for what is missing, a VersionError for a library too old.
func (b *Binding) Load() error {
	b.once.Do(func() {
		for _, f := range b.Funcs {
			if _, b.err = f.Addr(); b.err != nil {
				return
			}
		}
		if b.VersionNumber == nil {
			return
		}
		r, err := b.VersionNumber.Call()
		if b.err = err; err == nil {
			b.version = uint32(r)
			b.err = CheckVersion(b.Lib.What, b.Lib.Path(), b.version, b.Min)
		}
	})
	return b.err
}

// Path returns the path the library was loaded from, or "" when Load
// fails.
func (b *Binding) Path() string {
	if b.Load() != nil {
		return ""
	}
	return b.Lib.Path()
}

// Version returns the library's version ("1.5.4"), or "" when Load fails
// or the library has no version function.
func (b *Binding) Version() string {
	if b.Load() != nil || b.VersionNumber == nil {
		return ""
	}
	return VersionString(b.version)
}
