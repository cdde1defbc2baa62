// Package remote benchmarks kvik's remote reads against the AWS SDK for
// Go v2 (one GetObject stream, and the S3 transfer manager's concurrent
// downloader) on a versitygw S3 server on loopback. It is a module of
// its own so that the SDK stays out of kvik's go.mod.
//
//	cd bench/remote && KVIK_TEST_VERSITYGW=/path/to/versitygw go test -run '^$' -bench . -benchtime 3x
package remote
