package httpexec_test

import (
	"context"
	"io"
	"net/http"
	"testing"

	"github.com/toolwire/toolwire/internal/executors/httpexec"
	toolwirev1 "github.com/toolwire/toolwire/pkg/toolproto/toolwire/v1"
)

// BenchmarkExecutor and BenchmarkDirectNetHTTP send the same request
// (GET /echo?text=hello, a 5-byte text answer) to the same kind of server;
// the difference is the executor's overhead: templates, guard, header
// set-up, response mapping.
func BenchmarkExecutor(b *testing.B) {
	srv := newServer(b)
	exec, err := httpexec.New(httpexec.Config{})
	if err != nil {
		b.Fatal(err)
	}
	defer func() { _ = exec.Close(context.Background()) }()
	spec := srv.spec("echo", http.MethodGet, "/echo", []string{"text"},
		func(hc *toolwirev1.HttpConfig) { hc.QueryArgs = []string{"text"} })
	spec.Version = "sha256:bench" // as the registry sets it: the compiled spec is cached
	req := request(spec, "01BENCH", `{"text":"hello"}`)
	b.ReportAllocs()
	for b.Loop() {
		res, err := exec.Execute(b.Context(), req)
		if err != nil || res.Content[0].GetText().GetText() != "hello" {
			b.Fatal(err, res)
		}
	}
}

func BenchmarkDirectNetHTTP(b *testing.B) {
	srv := newServer(b)
	client := &http.Client{Transport: &http.Transport{MaxIdleConnsPerHost: 16}}
	defer client.CloseIdleConnections()
	url := srv.URL + "/echo?text=hello"
	b.ReportAllocs()
	for b.Loop() {
		req, err := http.NewRequestWithContext(b.Context(), http.MethodGet, url, nil)
		if err != nil {
			b.Fatal(err)
		}
		resp, err := client.Do(req)
		if err != nil {
			b.Fatal(err)
		}
		body, err := io.ReadAll(resp.Body)
		resp.Body.Close()
		if err != nil || string(body) != "hello" {
			b.Fatal(err, string(body))
		}
	}
}
