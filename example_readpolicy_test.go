package kvik_test

import (
	"fmt"
	"log"
	"os"
	"path/filepath"

	"github.com/kvikgo/kvik"
)

// ExampleFileHandle_ReadPlan shows what a read of a whole file would do
// under the buffered read policy, without reading it.
func ExampleFileHandle_ReadPlan() {
	dir, err := os.MkdirTemp("", "readplan-")
	if err != nil {
		log.Fatal(err)
	}
	defer os.RemoveAll(dir)
	path := filepath.Join(dir, "data.bin")
	if err := os.WriteFile(path, make([]byte, 8<<20+100), 0o644); err != nil {
		log.Fatal(err)
	}
	f, err := kvik.Open(path, "r", 0)
	if err != nil {
		log.Fatal(err)
	}
	defer f.Close()

	restore, err := kvik.UpdateDefaults(func(d *kvik.Defaults) {
		d.AutoDirectIORead, d.DirectIOReadPolicy = false, kvik.ReadPolicyBuffered
	})
	if err != nil {
		log.Fatal(err)
	}
	defer restore()
	plan, err := f.ReadPlan(0, 0)
	if err != nil {
		log.Fatal(err)
	}
	fmt.Println(plan)
	fmt.Println("pages cover the file:", plan.TotalPages*os.Getpagesize() >= 8<<20+100, "bytes:", plan.DirectBytes+plan.BufferedBytes)

	// The default policy, as KVIK_DIRECT_IO_READ_POLICY spells it.
	p, err := kvik.ParseReadPolicy("auto")
	fmt.Println(p == kvik.ReadPolicyAuto, err)
	// Output:
	// policy buffered: 0.0% O_DIRECT, 100.0% buffered
	// pages cover the file: true bytes: 8388708
	// true <nil>
}
