package mcp_test

import (
	"context"
	"fmt"
	"log/slog"
	"net/http"
	"net/http/httptest"

	sdk "github.com/modelcontextprotocol/go-sdk/mcp"

	"github.com/toolwire/toolwire/internal/executors"
	"github.com/toolwire/toolwire/internal/executors/mcp"
	toolwirev1 "github.com/toolwire/toolwire/pkg/toolproto/toolwire/v1"
)

type greetIn struct {
	Name string `json:"name"`
}

// An MCP server's tools become toolwire tools named mcp__<server>__<tool>,
// called with Execute. (Here the server runs in-process over streamable
// HTTP; a stdio server is configured with StdioConfig instead.)
func ExampleNew() {
	srv := sdk.NewServer(&sdk.Implementation{Name: "greeter", Version: "1"}, nil)
	sdk.AddTool(srv, &sdk.Tool{Name: "greet", Description: "Greets someone."},
		func(_ context.Context, _ *sdk.CallToolRequest, in greetIn) (*sdk.CallToolResult, any, error) {
			return &sdk.CallToolResult{Content: []sdk.Content{&sdk.TextContent{Text: "hello, " + in.Name}}}, nil, nil
		})
	ts := httptest.NewServer(sdk.NewStreamableHTTPHandler(func(*http.Request) *sdk.Server { return srv }, nil))
	defer ts.Close()

	ctx := context.Background()
	e, err := mcp.New(ctx, mcp.Config{Servers: []mcp.ServerConfig{
		{Name: "greeter", HTTP: &mcp.HTTPConfig{URL: ts.URL}, Required: true},
	}}, mcp.Options{Logger: slog.New(slog.DiscardHandler)})
	if err != nil {
		fmt.Println(err)
		return
	}
	defer e.Close(ctx)

	spec := e.Specs()[0]
	fmt.Println(spec.Name, spec.Executor, spec.GetMcp().GetTool())
	res, err := e.Execute(ctx, &executors.Request{
		Call: &toolwirev1.ToolCall{CallId: "c1", Tool: spec.Name, Arguments: []byte(`{"name":"Ada"}`)},
		Spec: spec,
	})
	if err != nil {
		fmt.Println(err)
		return
	}
	fmt.Println(res.Content[0].GetText().GetText())
	// Output:
	// mcp__greeter__greet EXECUTOR_TYPE_MCP greet
	// hello, Ada
}
