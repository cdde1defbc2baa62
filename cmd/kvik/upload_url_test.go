package main

import (
	"fmt"
	"math/rand/v2"
	"path/filepath"
	"strings"
	"testing"

	"github.com/kvikgo/kvik/internal/testkit/s3test"
)

// TestCpUploadHTTPURL uploads to an S3 object's http:// URL (path-style,
// credentials from the environment), one PUT and multipart: the upload
// is signed, and so must be the read-back that verifies it. (The
// read-back went unsigned: 403, exit 1, with the object there.)
func TestCpUploadHTTPURL(t *testing.T) {
	v := s3test.Start(t)
	env := append(s3Env(v), "KVIKIO_TASK_SIZE=5242880")
	rng := rand.New(rand.NewPCG(39, 6))
	for _, size := range []int{1 + rng.IntN(5000), 2*(5<<20) + 1 + rng.IntN(1<<20)} {
		src := randomFile(t, size)
		key := fmt.Sprintf("h/%d.bin", size)
		r := runKvik(t, env, "cp", src, v.URL+"/"+s3test.Bucket+"/"+key).expect(t, 0)
		if !strings.Contains(r.stdout, "read back and verified") {
			t.Errorf("the upload was not verified: %q", r.stdout)
		}
		sameFile(t, src, filepath.Join(v.Dir, s3test.Bucket, "h", fmt.Sprintf("%d.bin", size)))
	}
}
