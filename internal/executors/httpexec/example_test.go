package httpexec_test

import (
	"context"
	"fmt"
	"io"
	"net"
	"net/http"
	"net/http/httptest"

	"github.com/toolwire/toolwire/internal/executors"
	"github.com/toolwire/toolwire/internal/executors/httpexec"
	toolwirev1 "github.com/toolwire/toolwire/pkg/toolproto/toolwire/v1"
)

// An http tool that creates an issue: the project goes into the path (one
// segment, escaped), the rest into a JSON body built from body_template.
func Example() {
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		body, _ := io.ReadAll(r.Body)
		fmt.Println(r.Method, r.URL.EscapedPath(), r.Header.Get("Idempotency-Key"))
		fmt.Println(string(body))
		w.Header().Set("Content-Type", "application/json")
		io.WriteString(w, `{"id":42,"intents":[{"type":"acme.notify","payload":{"issue":42}}]}`)
	}))
	defer srv.Close()
	port := int32(srv.Listener.Addr().(*net.TCPAddr).Port)

	spec := &toolwirev1.ToolSpec{
		Name:            "create_issue",
		Executor:        toolwirev1.ExecutorType_EXECUTOR_TYPE_HTTP,
		InputSchemaJson: `{"type":"object","properties":{"project":{},"title":{},"labels":{}}}`,
		Config: &toolwirev1.ToolSpec_Http{Http: &toolwirev1.HttpConfig{
			Method:       http.MethodPost,
			UrlTemplate:  srv.URL + "/projects/{project}/issues",
			BodyTemplate: `{"title": "[bot] {title}", "labels": "{labels}"}`,
			IntentsField: "intents",
			// The test server is on loopback: allow it explicitly.
			AllowNetworks: []string{"127.0.0.1/32"},
			AllowPorts:    []int32{port},
		}},
	}
	if err := httpexec.CheckSpec(spec); err != nil {
		panic(err)
	}
	exec, err := httpexec.New(httpexec.Config{})
	if err != nil {
		panic(err)
	}
	defer func() { _ = exec.Close(context.Background()) }()

	res, err := exec.Execute(context.Background(), &executors.Request{
		Call: &toolwirev1.ToolCall{CallId: "01CALL", Tool: "create_issue",
			Arguments: []byte(`{"project":"acme/web","title":"Fix \"login\"","labels":["bug"]}`)},
		Spec: spec,
	})
	if err != nil {
		panic(err)
	}
	fmt.Println(string(res.Structured))
	fmt.Println(res.Intents[0].GetId(), res.Intents[0].GetType(), res.Intents[0].GetPayloadJson())
	// Output:
	// POST /projects/acme%2Fweb/issues 01CALL
	// {"title":"[bot] Fix \"login\"","labels":["bug"]}
	// {"id":42}
	// i1 acme.notify {"issue":42}
}
