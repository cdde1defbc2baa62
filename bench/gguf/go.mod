module github.com/kvikgo/kvik/bench/gguf

go 1.26.0

require (
	github.com/gpustack/gguf-parser-go v0.28.1
	github.com/kvikgo/kvik v0.0.0
)

require (
	github.com/aws/aws-sdk-go-v2 v1.47.7 // indirect
	github.com/aws/smithy-go v1.28.8 // indirect
	github.com/ebitengine/purego v0.11.3 // indirect
	github.com/henvic/httpretty v0.1.4 // indirect
	github.com/json-iterator/go v1.1.12 // indirect
	github.com/modern-go/concurrent v0.0.0-20180306012644-bacd9c7ef1dd // indirect
	github.com/modern-go/reflect2 v1.0.2 // indirect
	github.com/smallnest/ringbuffer v0.0.0-20241116012123-461381446e3d // indirect
	golang.org/x/crypto v0.29.0 // indirect
	golang.org/x/exp v0.0.0-20241108190413-2d47ceb2692f // indirect
	golang.org/x/mod v0.22.0 // indirect
	golang.org/x/sync v0.22.0 // indirect
	golang.org/x/sys v0.46.0 // indirect
	golang.org/x/tools v0.27.0 // indirect
	gonum.org/v1/gonum v0.15.1 // indirect
)

replace github.com/kvikgo/kvik => ../..
