package mcp_test

import (
	"context"
	"testing"
	"time"

	sdk "github.com/modelcontextprotocol/go-sdk/mcp"

	"github.com/toolwire/toolwire/internal/executors"
	"github.com/toolwire/toolwire/internal/executors/mcp"
	toolwirev1 "github.com/toolwire/toolwire/pkg/toolproto/toolwire/v1"
)

// The two benchmarks call the same echo tool of the same in-process
// fixture server over the same transport (streamable HTTP on loopback):
// the difference is the executor's overhead (lookup, definition check,
// argument validation, progress token, content mapping).

const benchArgs = `{"text":"hello, benchmark"}`

func BenchmarkExecutorCall(b *testing.B) {
	url := httpServer(b, newFixtureServer(fixtureOptions{running: b.TempDir()}))
	cfg := testConfig(mcp.ServerConfig{Name: "bench", HTTP: &mcp.HTTPConfig{URL: url}, Required: true})
	e, err := mcp.New(b.Context(), cfg, mcp.Options{Logger: discardLogger()})
	if err != nil {
		b.Fatal(err)
	}
	b.Cleanup(func() {
		ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
		defer cancel()
		_ = e.Close(ctx)
	})
	spec := specsByTool(e)["echo"]
	req := &executors.Request{Call: &toolwirev1.ToolCall{CallId: "bench", Tool: spec.Name, Arguments: []byte(benchArgs), Attempt: 1}, Spec: spec}
	ctx := context.Background()
	b.ReportAllocs()
	b.RunParallel(func(pb *testing.PB) {
		for pb.Next() {
			res, err := e.Execute(ctx, req)
			if err != nil || res.Content[0].GetText().GetText() != "hello, benchmark" {
				b.Errorf("execute: %v %v", res, err)
				return
			}
		}
	})
}

func BenchmarkDirectSDKCall(b *testing.B) {
	url := httpServer(b, newFixtureServer(fixtureOptions{running: b.TempDir()}))
	cs, err := sdk.NewClient(&sdk.Implementation{Name: "direct", Version: "1"}, &sdk.ClientOptions{Capabilities: &sdk.ClientCapabilities{}}).
		Connect(b.Context(), &sdk.StreamableClientTransport{Endpoint: url}, nil)
	if err != nil {
		b.Fatal(err)
	}
	b.Cleanup(func() { _ = cs.Close() })
	ctx := context.Background()
	b.ReportAllocs()
	b.RunParallel(func(pb *testing.PB) {
		for pb.Next() {
			res, err := cs.CallTool(ctx, &sdk.CallToolParams{Name: "echo", Arguments: map[string]any{"text": "hello, benchmark"}})
			if err != nil || res.Content[0].(*sdk.TextContent).Text != "hello, benchmark" {
				b.Errorf("call: %v %v", res, err)
				return
			}
		}
	})
}
