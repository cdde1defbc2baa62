package kernels

import (
	"fmt"
	"os"
	"strings"
	"testing"

	"github.com/kvikgo/kvik/cuda"
	"github.com/kvikgo/kvik/internal/libzstd"
	"github.com/kvikgo/kvik/internal/testkit/fielddata"
	"github.com/kvikgo/kvik/internal/testkit/gputest"
)

// BenchmarkZstdPTX decodes zarrbench's field, 1024 frames of 1 MiB,
// with each build of zstd.cu that KVIK_ZSTD_PTX names (name=path.ptx,
// ...: variants of the kernel built with clang as go generate builds
// it), in launches of 1024, 256 and 64 frames, and checks a sample of
// the frames; for work on the kernel.
func BenchmarkZstdPTX(b *testing.B) {
	spec := os.Getenv("KVIK_ZSTD_PTX")
	if spec == "" {
		b.Skip("KVIK_ZSTD_PTX not set")
	}
	ctx := gputest.Primary(b, 0)
	const frame, count = 1 << 20, 1024
	field := fielddata.Float32(16384, 16384, 1)
	frames := make([][]byte, count)
	stored := 0
	for i := range frames {
		frames[i], _ = libzstd.Compress(nil, field[i*frame:(i+1)*frame], 3, false)
		stored += len(frames[i])
	}
	err := cuda.WithContext(ctx, func() error {
		src, err := cuda.MemAlloc(stored + 64*count)
		if err != nil {
			return err
		}
		defer src.Close()
		dst, err := cuda.MemAlloc(count * frame)
		if err != nil {
			return err
		}
		defer dst.Close()
		zf := make([]ZstdFrame, count)
		at := 0
		for i, f := range frames {
			if err := cuda.MemcpyHtoD(src.Ptr()+cuda.DevicePtr(at), f); err != nil {
				return err
			}
			zf[i] = ZstdFrame{Src: src.Ptr() + cuda.DevicePtr(at), SrcLen: len(f), Dst: dst.Ptr() + cuda.DevicePtr(i*frame), DstCap: frame}
			at += (len(f) + 63) &^ 63
		}
		want := make([]byte, frame)
		for _, v := range strings.Split(spec, ",") {
			name, path, _ := strings.Cut(v, "=")
			ptx, err := os.ReadFile(path)
			if err != nil {
				return err
			}
			m, err := cuda.ModuleLoadData(append(ptx, 0))
			if err != nil {
				return fmt.Errorf("%s: %w", name, err)
			}
			f, err := cuda.ModuleGetFunction(m, "zstd")
			if err != nil {
				return err
			}
			z := &Zstd{f: f}
			for _, per := range []int{count, 256, 64} {
				batch, err := z.NewBatch(per)
				if err != nil {
					return err
				}
				b.Run(fmt.Sprintf("%s/launch%d", name, per), func(b *testing.B) {
					b.SetBytes(count * frame)
					for b.Loop() {
						for at := 0; at < count; at += per {
							sizes, err := batch.Decode(0, zf[at:at+per])
							if err != nil {
								b.Fatal(err)
							}
							for i, n := range sizes {
								if n != frame {
									b.Fatalf("frame %d: %d bytes", at+i, n)
								}
							}
						}
					}
				})
				batch.Close()
				for i := 0; i < count; i += 97 {
					if err := cuda.MemcpyDtoH(want, dst.Ptr()+cuda.DevicePtr(i*frame)); err != nil {
						return err
					}
					if string(want) != string(field[i*frame:(i+1)*frame]) {
						return fmt.Errorf("%s: frame %d decoded wrong", name, i)
					}
				}
			}
			cuda.ModuleUnload(m)
		}
		return nil
	})
	if err != nil {
		b.Fatal(err)
	}
}
