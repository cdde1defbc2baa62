package cuda_test

import (
	"fmt"
	"log"

	"github.com/kvikgo/kvik/cuda"
)

// Example copies data to device 0 and back through its primary context.
func Example() {
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

	src := []byte("hello, GPU")
	dst := make([]byte, len(src))
	err = cuda.WithContext(ctx, func() error {
		buf, err := cuda.MemAlloc(len(src))
		if err != nil {
			return err
		}
		defer buf.Close()
		if err := cuda.MemcpyHtoD(buf.Ptr(), src); err != nil {
			return err
		}
		return cuda.MemcpyDtoH(dst, buf.Ptr())
	})
	if err != nil {
		log.Fatal(err)
	}
	fmt.Println(string(dst))
}
