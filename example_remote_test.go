package kvik_test

import (
	"context"
	"crypto/tls"
	"crypto/x509"
	"fmt"
	"log"
	"net/http"
	"net/http/httptest"
	"strings"
	"time"

	"github.com/kvikgo/kvik"
)

// ExampleOpenRemote reads part of an object from an HTTP server with
// parallel ranged GETs.
func ExampleOpenRemote() {
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		http.ServeContent(w, r, "data.txt", time.Time{}, strings.NewReader("hello, remote world"))
	}))
	defer srv.Close()

	f, err := kvik.OpenRemote(context.Background(), srv.URL+"/data.txt")
	if err != nil {
		log.Fatal(err)
	}
	defer f.Close()
	buf := make([]byte, 6)
	if _, err := f.ReadAt(buf, 7); err != nil {
		log.Fatal(err)
	}
	size, _ := f.Size()
	fmt.Println(f.EndpointType(), size, string(buf))
	// Output: HTTP 19 remote
}

// ExampleWithTLSConfig trusts a private CA for one handle; SSL_CERT_FILE
// does so for the whole process, and AWS_CA_BUNDLE for S3 endpoints.
func ExampleWithTLSConfig() {
	srv := httptest.NewTLSServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		http.ServeContent(w, r, "data.txt", time.Time{}, strings.NewReader("over TLS"))
	}))
	defer srv.Close()
	ca := x509.NewCertPool()
	ca.AddCert(srv.Certificate()) // in practice: ca.AppendCertsFromPEM(pemBytes)

	f, err := kvik.OpenRemote(context.Background(), srv.URL+"/data.txt", kvik.WithTLSConfig(&tls.Config{RootCAs: ca}))
	if err != nil {
		log.Fatal(err)
	}
	defer f.Close()
	buf := make([]byte, 8)
	_, err = f.ReadAt(buf, 0)
	fmt.Println(string(buf), err)
	// Output: over TLS <nil>
}
