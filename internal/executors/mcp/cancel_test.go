package mcp_test

import (
	"context"
	"sync"
	"testing"
	"time"

	sdk "github.com/modelcontextprotocol/go-sdk/mcp"
	"github.com/stretchr/testify/require"

	"github.com/toolwire/toolwire/internal/executors"
	"github.com/toolwire/toolwire/internal/executors/mcp"
	"github.com/toolwire/toolwire/pkg/tool"
	toolwirev1 "github.com/toolwire/toolwire/pkg/toolproto/toolwire/v1"
)

// TestCancelSendsNotification: when a call's context ends, the server
// receives notifications/cancelled for the request (not just a dropped
// stream), its handler stops, and Execute answers CANCELLED at once.
func TestCancelSendsNotification(t *testing.T) {
	t.Parallel()
	dir := tempDir(t)
	srv := newFixtureServer(fixtureOptions{running: dir})
	var mu sync.Mutex
	var cancelled []string
	srv.AddReceivingMiddleware(func(next sdk.MethodHandler) sdk.MethodHandler {
		return func(ctx context.Context, method string, req sdk.Request) (sdk.Result, error) {
			if method == "notifications/cancelled" {
				p := req.GetParams().(*sdk.CancelledParams)
				mu.Lock()
				cancelled = append(cancelled, p.Reason)
				mu.Unlock()
			}
			return next(ctx, method, req)
		}
	})
	url := httpServer(t, srv)
	e := newExecutor(t, testConfig(mcp.ServerConfig{Name: "c", HTTP: &mcp.HTTPConfig{URL: url}, Required: true}), mcp.Options{})
	block := specsByTool(e)["block"]

	ctx, cancel := context.WithCancel(t.Context())
	done := make(chan error, 1)
	go func() {
		_, err := e.Execute(ctx, &executors.Request{Call: &toolwirev1.ToolCall{CallId: "c1", Tool: block.Name, Arguments: []byte(`{}`)}, Spec: block})
		done <- err
	}()
	isRunning := running(dir)
	deadline := time.Now().Add(10 * time.Second)
	for !isRunning() {
		require.True(t, time.Now().Before(deadline), "block never ran")
		time.Sleep(5 * time.Millisecond) // polling with a deadline
	}
	cancel()
	select {
	case err := <-done:
		require.Equal(t, toolwirev1.ErrorType_ERROR_TYPE_CANCELLED, tool.AsError(ctx, err).Type)
	case <-time.After(5 * time.Second):
		t.Fatal("Execute did not return after the cancel")
	}
	for {
		mu.Lock()
		n := len(cancelled)
		mu.Unlock()
		if n > 0 && !isRunning() {
			break
		}
		require.True(t, time.Now().Before(deadline), "no notifications/cancelled seen, or the handler still runs")
		time.Sleep(5 * time.Millisecond) // polling with a deadline
	}
}
