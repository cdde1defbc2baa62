package kvik_test

import (
	"context"
	"errors"
	"fmt"
	"log"
	"os"
	"path/filepath"

	"github.com/kvikgo/kvik"
	"github.com/kvikgo/kvik/cuda"
)

// exampleFile returns the path of a new file in a temporary directory
// holding data, and a function that removes the directory.
func exampleFile(data string) (path string, cleanup func()) {
	dir, err := os.MkdirTemp("", "kvik-example-")
	if err != nil {
		log.Fatal(err)
	}
	path = filepath.Join(dir, "data.bin")
	if err := os.WriteFile(path, []byte(data), 0o644); err != nil {
		log.Fatal(err)
	}
	return path, func() { os.RemoveAll(dir) }
}

// ExampleOpen writes a file and reads it back. A read that runs into the
// end of the file returns the bytes it got and io.EOF, as io.ReaderAt
// requires.
func ExampleOpen() {
	dir, err := os.MkdirTemp("", "kvik-example-")
	if err != nil {
		log.Fatal(err)
	}
	defer os.RemoveAll(dir)

	// "w+": read and write, create, truncate.
	f, err := kvik.Open(filepath.Join(dir, "hello.txt"), "w+", 0)
	if err != nil {
		log.Fatal(err)
	}
	defer f.Close()

	if _, err := f.WriteAt([]byte("hello, kvik"), 0); err != nil {
		log.Fatal(err)
	}
	buf := make([]byte, 11)
	n, err := f.ReadAt(buf, 0)
	fmt.Printf("%d %q %v\n", n, buf[:n], err)

	// Ask for 8 bytes where only 4 remain.
	n, err = f.ReadAt(buf[:8], 7)
	fmt.Printf("%d %q %v\n", n, buf[:n], err)
	// Output:
	// 11 "hello, kvik" <nil>
	// 4 "kvik" EOF
}

// ExampleFileHandle_ReadV fills several buffers from consecutive ranges
// of a file in one call, as preadv(2) does: here a 4-byte header and a
// body. The file ends inside the last buffer, so the read returns the
// bytes it got and io.EOF.
func ExampleFileHandle_ReadV() {
	path, cleanup := exampleFile("KVIKhello, vectors")
	defer cleanup()
	f, err := kvik.Open(path, "r", 0)
	if err != nil {
		log.Fatal(err)
	}
	defer f.Close()

	magic, body := make([]byte, 4), make([]byte, 20)
	n, err := f.ReadV([][]byte{magic, body}, 0) // a net.Buffers works too
	fmt.Printf("%d %q %q %v\n", n, magic, body[:n-len(magic)], err)
	// Output:
	// 18 "KVIK" "hello, vectors" EOF
}

// ExampleFileHandle_PRead starts a read in the background and collects its
// result from the Future.
func ExampleFileHandle_PRead() {
	path, cleanup := exampleFile("parallel reads, collected later")
	defer cleanup()

	f, err := kvik.Open(path, "r", 0)
	if err != nil {
		log.Fatal(err)
	}
	defer f.Close()

	buf := make([]byte, 14)
	fut := f.PRead(context.Background(), buf, 0)
	// buf belongs to the operation until the Future completes.
	n, err := fut.Get()
	if err != nil {
		log.Fatal(err)
	}
	fmt.Println(n, string(buf[:n]))
	// Output: 14 parallel reads
}

// ExampleSetDefaults changes the settings for a scope and restores them.
func ExampleSetDefaults() {
	d, err := kvik.GetDefaults()
	if err != nil {
		log.Fatal(err) // a bad KVIKIO_* variable
	}
	before := d

	d.NumThreads = 2
	d.TaskSize = 1 << 20
	restore, err := kvik.SetDefaults(d)
	if err != nil {
		log.Fatal(err)
	}
	now, _ := kvik.GetDefaults()
	fmt.Println("threads:", now.NumThreads, "task size:", now.TaskSize)

	restore()
	after, _ := kvik.GetDefaults()
	fmt.Println("restored:", after == before)

	// Out-of-range settings are refused.
	d.NumThreads = 0
	_, err = kvik.SetDefaults(d)
	fmt.Println(errors.Is(err, kvik.ErrInvalidArgument))
	// Output:
	// threads: 2 task size: 1048576
	// restored: true
	// true
}

// ExampleUpdateDefaults turns on opportunistic O_DIRECT reads for the rest
// of a function.
func ExampleUpdateDefaults() {
	before, err := kvik.GetDefaults()
	if err != nil {
		log.Fatal(err)
	}

	func() {
		restore, err := kvik.UpdateDefaults(func(d *kvik.Defaults) {
			d.AutoDirectIORead = true
			d.NumThreads = 4
		})
		if err != nil {
			log.Fatal(err)
		}
		defer restore()

		d, _ := kvik.GetDefaults()
		fmt.Println("direct reads:", d.AutoDirectIORead, "threads:", d.NumThreads)
	}()

	after, _ := kvik.GetDefaults()
	fmt.Println("restored:", after == before)
	// Output:
	// direct reads: true threads: 4
	// restored: true
}

// ExampleParseCompatMode parses compat modes as KVIKIO_COMPAT_MODE takes
// them.
func ExampleParseCompatMode() {
	for _, s := range []string{"ON", " auto ", "no", "1", "sometimes"} {
		m, err := kvik.ParseCompatMode(s)
		if err != nil {
			fmt.Printf("%q: invalid argument: %v\n", s, errors.Is(err, kvik.ErrInvalidArgument))
			continue
		}
		fmt.Printf("%q: %v\n", s, m)
	}
	// Output:
	// "ON": on
	// " auto ": auto
	// "no": off
	// "1": on
	// "sometimes": invalid argument: true
}

// ExampleFileHandle_CompatReason opens a file in compat mode on, where
// device I/O goes through POSIX I/O and pinned bounce buffers, and shows
// what the handle resolved to and why.
func ExampleFileHandle_CompatReason() {
	path, cleanup := exampleFile("x")
	defer cleanup()

	f, err := kvik.Open(path, "r", 0, kvik.WithCompatMode(kvik.CompatOn))
	if err != nil {
		log.Fatal(err)
	}
	defer f.Close()

	fmt.Println(f.CompatMode())
	fmt.Println(f.CompatReason())
	// Output:
	// on
	// compat mode on: POSIX I/O requested
}

// ExampleFileHandle_ReadDevice reads a file into GPU memory allocated in
// device 0's primary context. It needs a GPU, so it is compiled but not
// run by go test.
func ExampleFileHandle_ReadDevice() {
	if err := cuda.Init(); err != nil {
		log.Fatal(err) // errors.Is(err, cuda.ErrLibraryNotFound) without a driver
	}
	dev, err := cuda.DeviceGet(0)
	if err != nil {
		log.Fatal(err)
	}
	ctx, err := dev.PrimaryCtxRetain()
	if err != nil {
		log.Fatal(err)
	}
	defer dev.PrimaryCtxRelease()

	f, err := kvik.Open("data.bin", "r", 0)
	if err != nil {
		log.Fatal(err)
	}
	defer f.Close()
	size, err := f.Size()
	if err != nil {
		log.Fatal(err)
	}

	// MemAlloc allocates in the context current on the calling thread;
	// WithContext makes ctx current for the function.
	var buf *cuda.DeviceBuffer
	if err := cuda.WithContext(ctx, func() (err error) {
		buf, err = cuda.MemAlloc(int(size))
		return err
	}); err != nil {
		log.Fatal(err)
	}
	defer buf.Close()

	// kvik finds the buffer's context itself, so no context need be current.
	n, err := f.ReadDevice(buf.Ptr(), int(size), 0, 0)
	if err != nil {
		log.Fatal(err)
	}
	fmt.Printf("read %d bytes to the GPU (compat mode %v: %s)\n", n, f.CompatMode(), f.CompatReason())
}

// ExampleReadFileToDevice loads a whole file into new device memory. It
// needs a GPU, so it is compiled but not run by go test.
func ExampleReadFileToDevice() {
	buf, err := kvik.ReadFileToDevice("weights.bin")
	if err != nil {
		log.Fatal(err)
	}
	defer buf.Close()
	fmt.Printf("%d bytes at device address %#x\n", buf.Size(), uint64(buf.Ptr()))

	// And back to a file.
	if err := kvik.WriteFileFromDevice("weights-copy.bin", buf); err != nil {
		log.Fatal(err)
	}
}

// ExampleWarmup prepares device 0 for device reads at start-up, so that a
// service's first ReadDevice runs as fast as later ones. It needs a GPU, so
// it is compiled but not run by go test.
func ExampleWarmup() {
	// No cuda.Init needed: the driver is initialised when it loads.
	if err := kvik.Warmup(0); err != nil {
		log.Fatal(err) // errors.Is(err, cuda.ErrLibraryNotFound) without a driver
	}
	total, pinned := kvik.BounceBufferBytes()
	fmt.Printf("%d bytes of bounce buffers ready, %d of them pinned\n", total, pinned)
}

// ExampleCreatePending replaces a file atomically: the new bytes go to a
// temporary file beside it, whose size is reserved first, and Commit
// renames it over the old one; until then readers see the old file.
func ExampleCreatePending() {
	path, cleanup := exampleFile("old contents")
	defer cleanup()
	data := []byte("new contents, written in place of the old")
	p, err := kvik.CreatePending(path, 0)
	if err != nil {
		log.Fatal(err)
	}
	defer p.Abort() // after Commit it does nothing
	if err := p.Reserve(int64(len(data))); err != nil {
		log.Fatal(err) // syscall.ENOSPC where the disk has no room: the old file stays
	}
	if _, err := p.WriteAt(data, 0); err != nil {
		log.Fatal(err)
	}
	old, _ := os.ReadFile(path)
	if err := p.Commit(); err != nil {
		log.Fatal(err)
	}
	now, _ := os.ReadFile(path)
	fmt.Printf("before Commit: %s\nafter: %s\n", old, now)
	// Output:
	// before Commit: old contents
	// after: new contents, written in place of the old
}

// ExampleMkdirAll saves a file into directories that do not exist yet:
// MkdirAll makes them durable, as SaveFile makes the file.
func ExampleMkdirAll() {
	root, err := os.MkdirTemp("", "kvik-example-")
	if err != nil {
		log.Fatal(err)
	}
	defer os.RemoveAll(root)
	dir := filepath.Join(root, "runs", "42", "step-1000")
	if err := kvik.MkdirAll(dir, 0o755); err != nil {
		log.Fatal(err)
	}
	path := filepath.Join(dir, "weights.bin")
	if err := kvik.SaveFile(context.Background(), path, []kvik.Piece{{Data: []byte("weights")}}); err != nil {
		log.Fatal(err)
	}
	b, _ := os.ReadFile(path)
	fmt.Printf("%s: %s\n", filepath.Base(path), b)
	// Output: weights.bin: weights
}
