package kvik_test

import (
	"context"
	"errors"
	"strings"
	"testing"

	"github.com/kvikgo/kvik"
)

// An upload to an http(s) URL without S3 credentials says that uploads go
// to S3 and how to give credentials, and stays an ErrNoCredentials.
func TestUploadNeedsS3Hint(t *testing.T) {
	for _, k := range []string{"AWS_ACCESS_KEY_ID", "AWS_SECRET_ACCESS_KEY", "AWS_SESSION_TOKEN"} {
		t.Setenv(k, "")
	}
	err := kvik.UploadS3(context.Background(), "http://127.0.0.1:1/bucket/x.bin", []byte("data"))
	if !errors.Is(err, kvik.ErrNoCredentials) {
		t.Fatalf("upload without credentials: %v", err)
	}
	for _, w := range []string{"S3 only", "s3://", "AWS_ACCESS_KEY_ID", "WithS3Credentials"} {
		if !strings.Contains(err.Error(), w) {
			t.Errorf("error %q lacks %q", err, w)
		}
	}
	if strings.Contains(err.Error(), "pass credentials") {
		t.Errorf("error %q asks to pass credentials", err)
	}
	// SaveFile, under npy.Save, safetensors.Save and gguf.Save, says so too.
	err = kvik.SaveFile(context.Background(), "https://127.0.0.1:1/bucket/x.npy", []kvik.Piece{{Data: []byte("x")}})
	if !errors.Is(err, kvik.ErrNoCredentials) || !strings.Contains(err.Error(), "s3://") {
		t.Fatalf("SaveFile to an https URL without credentials: %v", err)
	}
	err = kvik.UploadS3(context.Background(), "s3://bucket/x.bin", []byte("data"))
	if !errors.Is(err, kvik.ErrNoCredentials) || strings.Contains(err.Error(), "S3 only") {
		t.Fatalf("s3:// upload without credentials: %v", err)
	}
}
