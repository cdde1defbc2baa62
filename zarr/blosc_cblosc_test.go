package zarr

import (
	"bytes"
	"fmt"
	"math/rand/v2"
	"os"
	"os/exec"
	"path/filepath"
	"testing"

	"github.com/kvikgo/kvik/internal/testkit/fielddata"
)

// cbloscScript compresses the file argv[1] with numcodecs' Blosc (the C
// library) for each "cname:clevel:shuffle:blocksize" argument after
// argv[3] (typesize argv[3]) into argv[2]/N.blosc, and decodes each
// argv[2]/N.kvik (kvik's encoding of the same case) back, failing where
// it differs from the input.
const cbloscScript = `
import sys, numpy as np, numcodecs
numcodecs.blosc.use_threads = True  # blosc_compress, which reads BLOSC_SPLITMODE
numcodecs.blosc.set_nthreads(1)  # blocks in order
src = open(sys.argv[1], 'rb').read()
out, ts = sys.argv[2], int(sys.argv[3])
for i, spec in enumerate(sys.argv[4:]):
    cname, clevel, shuffle, bs = spec.split(':')
    c = numcodecs.Blosc(cname=cname, clevel=int(clevel), shuffle=int(shuffle), blocksize=int(bs))
    arr = np.frombuffer(src, dtype='u%d' % ts) if ts in (1, 2, 4, 8) else np.frombuffer(src, dtype='u1')
    open('%s/%d.blosc' % (out, i), 'wb').write(c.encode(arr))
    back = bytes(c.decode(open('%s/%d.kvik' % (out, i), 'rb').read()))
    if back != src:
        sys.exit('case %s: numcodecs decodes kvik\'s chunk to other bytes' % spec)
print('ok')
`

// TestBloscLevelsLikeCBlosc encodes a smooth field plus noise (a random
// size) with kvik's Blosc at levels 0-9, LZ4 and zstd, each shuffle, and
// with c-blosc (numcodecs): each decodes the other's chunk to the input,
// a level means the same trade as in c-blosc (LZ4's acceleration 10 -
// level, zstd's level 2 level - 1: kvik's chunk about c-blosc's size),
// and level 0 stores the bytes as they are.
func TestBloscLevelsLikeCBlosc(t *testing.T) {
	py := zarrPython(t)
	rng := rand.New(rand.NewPCG(rand.Uint64(), 40))
	rows, cols := 64+rng.IntN(200), 256+rng.IntN(512)
	src := fielddata.Float32(rows, cols, rng.Uint64())
	dir := t.TempDir()
	in := filepath.Join(dir, "in")
	if err := os.WriteFile(in, src, 0o644); err != nil {
		t.Fatal(err)
	}
	type tcase struct {
		c    bloscCodec
		spec string
	}
	var cases []tcase
	for _, cname := range []string{"lz4", "zstd"} {
		for _, level := range []int{0, 1, 5, 9} {
			shuffle := rng.IntN(3)
			bs := []int{1 << 14, 1 << 16, 1 << 18}[rng.IntN(3)]
			cases = append(cases, tcase{
				bloscCodec{cname: cname, clevel: level, shuffle: shuffle, typesize: 4, blocksize: bs},
				fmt.Sprintf("%s:%d:%d:%d", cname, level, shuffle, bs),
			})
		}
	}
	args := []string{"-c", cbloscScript, in, dir, "4"}
	kvik := make([][]byte, len(cases))
	for i, c := range cases {
		var err error
		if kvik[i], err = c.c.encode(src, nil); err != nil {
			t.Fatalf("%s: %v", c.spec, err)
		}
		if err := os.WriteFile(filepath.Join(dir, fmt.Sprintf("%d.kvik", i)), kvik[i], 0o644); err != nil {
			t.Fatal(err)
		}
		args = append(args, c.spec)
	}
	cmd := exec.Command(py, args...)
	cmd.Env = append(os.Environ(), "BLOSC_SPLITMODE=NEVER") // as kvik writes
	if out, err := cmd.CombinedOutput(); err != nil {
		t.Fatalf("numcodecs: %v\n%s", err, out)
	}
	for i, c := range cases {
		theirs, err := os.ReadFile(filepath.Join(dir, fmt.Sprintf("%d.blosc", i)))
		if err != nil {
			t.Fatal(err)
		}
		got, err := c.c.decode(theirs, nil, len(src))
		if err != nil || !bytes.Equal(got, src) {
			t.Errorf("%s: kvik decodes c-blosc's chunk: %v, or to other bytes", c.spec, err)
		}
		stored := func(b []byte) bool { return b[2]&bloscMemcpy != 0 }
		if c.c.clevel == 0 {
			if !stored(kvik[i]) || len(kvik[i]) != len(src)+bloscHeader || !bytes.Equal(kvik[i][bloscHeader:], src) {
				t.Errorf("%s: level 0 did not store the bytes as they are", c.spec)
			}
			continue
		}
		if stored(kvik[i]) || stored(theirs) {
			continue // incompressible for one of them: nothing to compare
		}
		if c.c.cname == "lz4" {
			if !bytes.Equal(kvik[i], theirs) {
				t.Errorf("%s: kvik's chunk (%d bytes) differs from c-blosc's (%d)", c.spec, len(kvik[i]), len(theirs))
			}
			continue
		}
		// zstd's output differs between its versions: the sizes are
		// compared, where kvik runs libzstd too.
		if z, _ := zstdNow(); z != (nativeZstd{}) {
			continue
		}
		if r := float64(len(kvik[i])) / float64(len(theirs)); r < 0.98 || r > 1.02 {
			t.Errorf("%s: kvik's chunk is %d bytes, c-blosc's %d (%.3fx)", c.spec, len(kvik[i]), len(theirs), r)
		}
	}
}
