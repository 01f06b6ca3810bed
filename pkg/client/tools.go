package client

import (
	"context"
	"encoding/json"
	"fmt"

	"connectrpc.com/connect"

	toolwirev1 "github.com/toolwire/toolwire/pkg/toolproto/toolwire/v1"
)

// ListOption filters ListTools and ExportTools.
type ListOption func(*toolwirev1.ListToolsRequest)

// WithNameGlob lists only the tools whose names match glob (path.Match
// syntax, e.g. "mcp__github__*").
func WithNameGlob(glob string) ListOption {
	return func(r *toolwirev1.ListToolsRequest) { r.NameGlob = glob }
}

// WithExecutor lists only the tools run by executor type t.
func WithExecutor(t toolwirev1.ExecutorType) ListOption {
	return func(r *toolwirev1.ListToolsRequest) { r.Executor = t }
}

// WithCategory lists only the tools of category c (retrieval, action,
// utility).
func WithCategory(c toolwirev1.ToolCategory) ListOption {
	return func(r *toolwirev1.ListToolsRequest) { r.Category = c }
}

// InSession lists the tools of one session of the caller's tenant: the
// tools its mode forbids outright are left out (what a model in that
// session is offered).
func InSession(session string) ListOption {
	return func(r *toolwirev1.ListToolsRequest) { r.Session = session }
}

// ForModel lists the tools a model is offered: the policy's toolset for
// the model's family leaves out the tools it hides or substitutes and
// lists the schema variants it offers (docs/toolsets.md). Pass the same
// model to the calls (WithModel).
func ForModel(model string) ListOption {
	return func(r *toolwirev1.ListToolsRequest) { r.Model = model }
}

// ListTools returns the specs of the tools the caller's scopes allow, at
// their current versions. Errors are transport errors wrapping the
// *connect.Error.
func (c *Client) ListTools(ctx context.Context, opts ...ListOption) ([]*toolwirev1.ToolSpec, error) {
	resp, err := c.rpc.ListTools(ctx, connect.NewRequest(listRequest(toolwirev1.ToolFormat_TOOL_FORMAT_NATIVE, opts)))
	if err != nil {
		return nil, transportError("list tools", err)
	}
	return resp.Msg.GetTools(), nil
}

// ExportTools returns the tools ListTools would list as one JSON document
// in a provider's format (OPENAI, ANTHROPIC, GEMINI or MCP), ready to pass
// to that provider's API. It returns an error for the native format (use
// ListTools), or a transport error wrapping the *connect.Error.
func (c *Client) ExportTools(ctx context.Context, format toolwirev1.ToolFormat, opts ...ListOption) (json.RawMessage, error) {
	if err := providerFormat(format); err != nil {
		return nil, err
	}
	resp, err := c.rpc.ListTools(ctx, connect.NewRequest(listRequest(format, opts)))
	if err != nil {
		return nil, transportError("export tools", err)
	}
	return json.RawMessage(resp.Msg.GetToolsJson()), nil
}

// GetOption says how GetTool and ExportTool show a tool.
type GetOption func(*toolwirev1.GetToolRequest)

// GetForModel shows a tool as ListTools with ForModel(model) lists it:
// with the schema variant the toolset of the model's family offers, and
// not found when that toolset hides or substitutes it
// (docs/toolsets.md).
func GetForModel(model string) GetOption {
	return func(r *toolwirev1.GetToolRequest) { r.Model = model }
}

// GetTool returns the current spec of the tool name. A tool that does not
// exist, or that the caller's scopes do not allow, is an error whose
// connect.CodeOf is connect.CodeNotFound; other errors are transport
// errors wrapping the *connect.Error.
func (c *Client) GetTool(ctx context.Context, name string, opts ...GetOption) (*toolwirev1.ToolSpec, error) {
	resp, err := c.rpc.GetTool(ctx, connect.NewRequest(getRequest(name, toolwirev1.ToolFormat_TOOL_FORMAT_UNSPECIFIED, opts)))
	if err != nil {
		return nil, transportError(fmt.Sprintf("get tool %q", name), err)
	}
	return resp.Msg.GetTool(), nil
}

// ExportTool returns the current definition of the tool name in a
// provider's format (OPENAI, ANTHROPIC, GEMINI or MCP). Errors are as for
// GetTool, plus an error for the native format.
func (c *Client) ExportTool(ctx context.Context, name string, format toolwirev1.ToolFormat, opts ...GetOption) (json.RawMessage, error) {
	if err := providerFormat(format); err != nil {
		return nil, err
	}
	resp, err := c.rpc.GetTool(ctx, connect.NewRequest(getRequest(name, format, opts)))
	if err != nil {
		return nil, transportError(fmt.Sprintf("export tool %q", name), err)
	}
	return json.RawMessage(resp.Msg.GetToolJson()), nil
}

func listRequest(format toolwirev1.ToolFormat, opts []ListOption) *toolwirev1.ListToolsRequest {
	r := &toolwirev1.ListToolsRequest{Format: format}
	for _, opt := range opts {
		opt(r)
	}
	return r
}

func getRequest(name string, format toolwirev1.ToolFormat, opts []GetOption) *toolwirev1.GetToolRequest {
	r := &toolwirev1.GetToolRequest{Name: name, Format: format}
	for _, opt := range opts {
		opt(r)
	}
	return r
}

func providerFormat(f toolwirev1.ToolFormat) error {
	switch f {
	case toolwirev1.ToolFormat_TOOL_FORMAT_UNSPECIFIED, toolwirev1.ToolFormat_TOOL_FORMAT_NATIVE:
		return fmt.Errorf("toolwire client: %s is not a provider format; use ListTools or GetTool for native specs", f)
	}
	return nil
}

// ApproveTool approves the current definition of a tool that was disabled
// because its definition changed after registration (an MCP server's
// tool). hash must be the definition hash the disabled spec shows
// (ToolSpec.Mcp.DefinitionHash), so an operator approves exactly what they
// reviewed. It needs credentials with the "admin" scope. The tool is
// served again once its worker sees the approval.
func (c *Client) ApproveTool(ctx context.Context, name, hash string) (*toolwirev1.ToolSpec, error) {
	resp, err := c.rpc.ApproveTool(ctx, connect.NewRequest(&toolwirev1.ApproveToolRequest{Name: name, DefinitionHash: hash}))
	if err != nil {
		return nil, transportError(fmt.Sprintf("approve tool %q", name), err)
	}
	return resp.Msg.GetTool(), nil
}
