// Package gguf compares kvik's GGUF parser (github.com/kvikgo/kvik/gguf)
// with gguf-parser-go, the Go parser of GPUStack: the same metadata and
// tensor table on every fixture of gguf/testdata (written by gguf-py) and
// on a synthetic model with a large vocabulary, and the time each takes
// to parse it. It is a module of its own so that gguf-parser-go stays out
// of kvik's go.mod.
//
//	cd bench/gguf && go test . && go test -run '^$' -bench . -benchtime 20x
package gguf
