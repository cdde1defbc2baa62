package kvik_test

import (
	"bytes"
	"context"
	"errors"
	"math/rand/v2"
	"strings"
	"testing"

	"github.com/kvikgo/kvik"
	"github.com/kvikgo/kvik/internal/testkit/s3test"
)

// TestRemotePrefixSaveIf writes on conditions to versitygw: SaveIf with
// no ETag creates a missing object and refuses an existing one; with the
// ETag GetWithETag gave it replaces that version only, refusing a stale
// ETag and a deleted object; each refusal matches ErrObjectChanged and
// leaves the object as it was. The same for an object large enough for
// a multipart upload (its condition on CompleteMultipartUpload), whose
// refused upload is aborted.
func TestRemotePrefixSaveIf(t *testing.T) {
	noLeaks(t)
	ctx := context.Background()
	v := s3test.Start(t)
	p, err := kvik.NewRemotePrefix(v.URLOf("cond"), v.Opts()...)
	if err != nil {
		t.Fatal(err)
	}
	defer p.Close()
	rng := rand.New(rand.NewPCG(61, 2))
	for _, size := range []int{1 + rng.IntN(100_000), 11<<20 + rng.IntN(1000)} {
		key := "obj-" + string(rune('a'+size%26))
		one, two, three := randomBytes(rng, size), randomBytes(rng, size), randomBytes(rng, size)
		save := func(data []byte, etag string) error {
			return p.SaveIf(ctx, key, []kvik.Piece{{Data: data}}, etag)
		}
		holds := func(want []byte, what string) {
			t.Helper()
			if b, ok := v.Object("cond/" + key); !ok || !bytes.Equal(b, want) {
				t.Fatalf("%d bytes, %s: the object is not the one expected (present %v)", size, what, ok)
			}
		}
		if err := save(one, ""); err != nil {
			t.Fatalf("%d bytes, create: %v", size, err)
		}
		holds(one, "created")
		if err := save(two, ""); !errors.Is(err, kvik.ErrObjectChanged) {
			t.Fatalf("%d bytes, create over an object: %v, want ErrObjectChanged", size, err)
		}
		holds(one, "create refused")
		got, tag, err := p.GetWithETag(ctx, key, nil, int64(size))
		if err != nil || tag == "" || !bytes.Equal(got, one) {
			t.Fatalf("%d bytes, GetWithETag: tag %q, %v", size, tag, err)
		}
		if err := save(two, tag); err != nil {
			t.Fatalf("%d bytes, replace the version read: %v", size, err)
		}
		holds(two, "replaced")
		if err := save(three, tag); !errors.Is(err, kvik.ErrObjectChanged) {
			t.Fatalf("%d bytes, replace a stale version: %v, want ErrObjectChanged", size, err)
		}
		holds(two, "stale replace refused")
		if err := p.Delete(ctx, key); err != nil {
			t.Fatal(err)
		}
		if err := save(three, tag); !errors.Is(err, kvik.ErrObjectChanged) {
			t.Fatalf("%d bytes, replace a deleted object: %v, want ErrObjectChanged", size, err)
		}
		if _, ok := v.Object("cond/" + key); ok {
			t.Fatalf("%d bytes: a refused replace of a deleted object created it", size)
		}
	}
	if u := v.Uploads(t); strings.Contains(u, "<Upload>") {
		t.Fatalf("multipart uploads left: %s", u)
	}
}
