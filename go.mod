module github.com/kvikgo/kvik

go 1.25.0

require (
	github.com/ebitengine/purego v0.11.3
	golang.org/x/sys v0.46.0
)

require (
	github.com/aws/aws-sdk-go-v2 v1.47.7
	go.uber.org/goleak v1.3.0
)

require github.com/aws/smithy-go v1.28.8 // indirect
