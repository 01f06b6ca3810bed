package mcp_test

import (
	"context"
	"fmt"
	"net/http"
	"net/http/httptest"
	"sync"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/toolwire/toolwire/internal/dispatch/dispatchtest"
	"github.com/toolwire/toolwire/internal/executors"
	"github.com/toolwire/toolwire/internal/executors/mcp"
	"github.com/toolwire/toolwire/internal/identity"
	"github.com/toolwire/toolwire/internal/mcpserver"
	"github.com/toolwire/toolwire/pkg/tool"
	toolwirev1 "github.com/toolwire/toolwire/pkg/toolproto/toolwire/v1"
)

// recorder is the worker's side of a call: a tool.PartialReporter that
// keeps progress and partial output in the order they come.
type recorder struct {
	mu     sync.Mutex
	got    []string // "progress: <message>" or "partial <seq>: <text>"
	chunks int
	all    chan struct{} // closed at the want-th chunk
	want   int
}

func (r *recorder) Progress(message string, _ float64) {
	r.mu.Lock()
	defer r.mu.Unlock()
	r.got = append(r.got, "progress: "+message)
}

func (r *recorder) Partial(seq uint32, content []*toolwirev1.Content) {
	r.mu.Lock()
	defer r.mu.Unlock()
	r.got = append(r.got, fmt.Sprintf("partial %d: %s", seq, content[0].GetText().GetText()))
	if r.chunks++; r.chunks == r.want {
		close(r.all)
	}
}

// An upstream toolwire fleet's partial output (its MCP face's
// notifications/progress with _meta io.toolwire/partial) becomes the
// call's partial output here, in order, and its plain progress stays
// progress: the upstream tool does not return until this side has every
// chunk, so they came during the call. The result is the upstream tool's.
func TestUpstreamPartialOutputIsForwarded(t *testing.T) {
	t.Parallel()
	const n = 3
	rec := &recorder{all: make(chan struct{}), want: n}
	stream := tool.Must(tool.New("stream", func(ctx context.Context, _ struct{}) (string, error) {
		tool.Progress(ctx, "starting", -1)
		for i := range n {
			if err := tool.PartialText(ctx, fmt.Sprintf("line %d", i+1)); err != nil {
				return "", err
			}
		}
		select {
		case <-rec.all:
		case <-ctx.Done():
			return "", ctx.Err()
		}
		return "all lines", nil
	}, tool.ReadOnly()))
	up := dispatchtest.Start(t, dispatchtest.Options{Tools: []*tool.Tool{stream}})
	ms, err := mcpserver.New(up.Dispatcher, identity.OpenAccess{Identity: identity.Default}, mcpserver.Config{Version: "test"})
	require.NoError(t, err)
	mux := http.NewServeMux()
	ms.Handle(mux)
	ts := httptest.NewServer(mux)
	t.Cleanup(ts.Close)

	e := newExecutor(t, testConfig(mcp.ServerConfig{Name: "up", HTTP: &mcp.HTTPConfig{URL: ts.URL + mcpserver.Path}, Required: true}), mcp.Options{})
	spec := specsByTool(e)["stream"]
	require.NotNil(t, spec)
	res, err := e.Execute(tool.WithReporter(t.Context(), rec), &executors.Request{
		Call: &toolwirev1.ToolCall{CallId: "c1", Tool: spec.Name, Arguments: []byte(`{}`)}, Spec: spec})
	require.NoError(t, err)
	require.Equal(t, "all lines", res.Content[0].GetText().GetText())

	rec.mu.Lock()
	defer rec.mu.Unlock()
	require.Equal(t, []string{"progress: starting", "partial 1: line 1", "partial 2: line 2", "partial 3: line 3"}, rec.got)
}
