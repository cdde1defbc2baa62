package remote

import (
	"reflect"
	"testing"
)

func TestCandidates(t *testing.T) {
	for raw, want := range map[string][]Type{
		"s3://bucket/key/x.bin":                                              {S3, S3Public},
		"s3://bucket/":                                                       nil,
		"https://bkt.s3.us-east-2.amazonaws.com/a/b":                         {S3, S3Public, HTTP},
		"https://s3.us-east-2.amazonaws.com/bkt/a":                           {S3, S3Public, HTTP},
		"http://bkt.s3.amazonaws.com/a":                                      {S3, S3Public, HTTP},
		"https://s3-eu-west-1.amazonaws.com/bkt/a":                           {S3, S3Public, HTTP},
		"https://bkt.s3.amazonaws.com/a?X-Amz-Algorithm=A&X-Amz-Signature=s": {S3Presigned, HTTP},
		"http://nn:9870/webhdfs/v1/user/x?user.name=me":                      {WebHDFS, HTTP},
		"http://nn/webhdfs/v1/user/x":                                        {HTTP}, // no port: not WebHDFS
		"http://example.com/file.bin":                                        {HTTP},
		"http://example.com/":                                                nil,
		"ftp://example.com/file":                                             nil,
	} {
		if got := Candidates(raw); !reflect.DeepEqual(got, want) {
			t.Errorf("Candidates(%q) = %v, want %v", raw, got, want)
		}
	}
}

func TestObjectURL(t *testing.T) {
	for _, c := range []struct {
		raw  string
		cfg  S3Config
		want string
	}{
		{"s3://b/k/x y", S3Config{Region: "eu-west-1"}, "https://b.s3.eu-west-1.amazonaws.com/k/x%20y"},
		{"s3://b/k%20z+1", S3Config{EndpointURL: "http://127.0.0.1:9000/", Region: "r"}, "http://127.0.0.1:9000/b/k%20z%2B1"},
		{"http://h:1/b/a=b", S3Config{}, "http://h:1/b/a%3Db"},
	} {
		e, err := New(S3Public, c.raw, c.cfg)
		if err != nil || e.URL.String() != c.want {
			t.Errorf("New(S3Public, %q) = %v, %v; want %s", c.raw, e, err, c.want)
		}
	}
	if _, err := New(S3, "s3://b/k", S3Config{Region: "r"}); err == nil {
		t.Error("S3 without credentials accepted")
	}
	if _, err := New(S3Public, "s3://b/k", S3Config{}); err == nil {
		t.Error("s3:// without region or endpoint accepted")
	}
}

func TestParseContentRange(t *testing.T) {
	for s, ok := range map[string]bool{
		"bytes 0-0/1": true, "bytes 5-9/*": true, "bytes 10-4/20": false, "bytes 0-9/5": false,
		"bytes -1-3/9": false, "0-3/9": false, "bytes 0-3": false, "bytes a-3/9": false,
	} {
		if _, _, _, err := parseContentRange(s); (err == nil) != ok {
			t.Errorf("parseContentRange(%q): %v", s, err)
		}
	}
}

func TestPartSize(t *testing.T) {
	if p := PartSize(1<<30, 1<<20); p != MinPartSize {
		t.Errorf("PartSize raised to the minimum: %d", p)
	}
	size := int64(MaxParts)*MinPartSize*3 + 7
	if p := PartSize(size, 0); (size+p-1)/p > MaxParts {
		t.Errorf("PartSize(%d) = %d needs more than %d parts", size, p, MaxParts)
	}
}
