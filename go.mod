module github.com/kvikgo/kvik

go 1.25.0

require (
	github.com/ebitengine/purego v0.11.3
	golang.org/x/sys v0.46.0
)

require go.uber.org/goleak v1.3.0

require (
	github.com/klauspost/compress v1.20.3
	github.com/pierrec/lz4/v4 v4.1.33
)
