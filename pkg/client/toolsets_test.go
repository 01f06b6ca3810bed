package client_test

import (
	"context"
	"testing"

	"connectrpc.com/connect"
	"github.com/stretchr/testify/require"

	"github.com/toolwire/toolwire/internal/dispatch/dispatchtest"
	"github.com/toolwire/toolwire/pkg/client"
	"github.com/toolwire/toolwire/pkg/tool"
	toolwirev1 "github.com/toolwire/toolwire/pkg/toolproto/toolwire/v1"
)

type patchArgs struct {
	Patch string `json:"patch"`
}

// ForModel lists, and WithModel calls and submits, as the model's
// family's toolset says (docs/toolsets.md).
func TestToolsPerModel(t *testing.T) {
	t.Parallel()
	named := func(name string) *tool.Tool {
		return tool.Must(tool.New(name, func(ctx context.Context, _ patchArgs) (string, error) {
			info, _ := tool.CallInfoFrom(ctx)
			return info.Caller.GetModelFamily(), nil
		}))
	}
	b := setup(t, dispatchtest.Options{Tools: []*tool.Tool{named("edit"), named("apply_patch")}})
	b.stack.ApplyPolicy(t, "tenant: {default: allow}\ntoolsets:\n  gpt: {substitute: {edit: apply_patch}}\n")
	ctx := t.Context()

	specs, err := b.client.ListTools(ctx, client.ForModel("gpt-5.1"))
	require.NoError(t, err)
	require.Len(t, specs, 1)
	require.Equal(t, "apply_patch", specs[0].GetName())
	out, err := b.client.ExportTools(ctx, toolwirev1.ToolFormat_TOOL_FORMAT_OPENAI, client.ForModel("gpt-5.1"))
	require.NoError(t, err)
	require.NotContains(t, string(out), `"edit"`)

	r, err := b.client.Call(ctx, "apply_patch", patchArgs{Patch: "x"}, client.WithModel("gpt-5.1"))
	require.NoError(t, err)
	require.Equal(t, "gpt", r.Response.GetContent()[0].GetText().GetText())
	r, err = b.client.Call(ctx, "edit", patchArgs{Patch: "x"}, client.WithModel("gpt-5.1"))
	require.NoError(t, err)
	require.ErrorContains(t, r.Err(), "toolset gpt offers apply_patch instead")
	sub, err := b.client.Submit(ctx, "edit", patchArgs{Patch: "x"}, client.WithModel("gpt-5.1"))
	require.NoError(t, err)
	require.NotNil(t, sub.Result, "refused at admission")
	require.ErrorContains(t, sub.Result.Err(), "toolset gpt offers apply_patch instead", "Submit carries the model too")
	r, err = b.client.Call(ctx, "edit", patchArgs{Patch: "x"}, client.WithModel("claude-sonnet-4-5"))
	require.NoError(t, err)
	require.Equal(t, "claude", r.Response.GetContent()[0].GetText().GetText())
}

// GetForModel shows a tool as ForModel lists it: a substituted or hidden
// tool is not found, a variant comes with its schema, and without a model
// the registered spec (docs/toolsets.md).
func TestGetToolPerModel(t *testing.T) {
	t.Parallel()
	named := func(name string) *tool.Tool {
		return tool.Must(tool.New(name, func(context.Context, patchArgs) (string, error) { return "", nil }))
	}
	b := setup(t, dispatchtest.Options{Tools: []*tool.Tool{named("edit"), named("apply_patch"), named("shell"), named("fmt")}})
	b.stack.ApplyPolicy(t, `tenant:
  default: allow
  rules:
    - id: no-fmt
      effect: deny
      tools: [fmt]
toolsets:
  gpt:
    hide: [shell]
    substitute: {edit: apply_patch}
    variants:
      apply_patch:
        input_schema: {type: object, required: [patch], properties: {patch: {type: string, maxLength: 64}}}
      fmt:
        input_schema: {type: object, properties: {patch: {type: string}}}
`)
	ctx := t.Context()
	gpt := client.GetForModel("gpt-5.1")

	listed, err := b.client.ListTools(ctx, client.ForModel("gpt-5.1"), client.WithNameGlob("apply_patch"))
	require.NoError(t, err)
	require.Len(t, listed, 1)
	got, err := b.client.GetTool(ctx, "apply_patch", gpt)
	require.NoError(t, err)
	require.Equal(t, listed[0].GetInputSchemaJson(), got.GetInputSchemaJson(), "GetTool shows what ListTools lists")
	require.Contains(t, got.GetInputSchemaJson(), `"maxLength":64`)
	plain, err := b.client.GetTool(ctx, "apply_patch")
	require.NoError(t, err)
	require.NotContains(t, plain.GetInputSchemaJson(), "maxLength", "without a model: the registered spec")
	doc, err := b.client.ExportTool(ctx, "apply_patch", toolwirev1.ToolFormat_TOOL_FORMAT_OPENAI, gpt)
	require.NoError(t, err)
	require.Contains(t, string(doc), `"maxLength":64`)

	// A deny still wins: a variant offered to the model grants nothing.
	_, err = b.client.GetTool(ctx, "fmt", gpt)
	require.Equal(t, connect.CodeNotFound, connect.CodeOf(err), "fmt is denied, whatever the model is offered")
	for _, name := range []string{"edit", "shell"} {
		_, err = b.client.GetTool(ctx, name, gpt)
		require.Equal(t, connect.CodeNotFound, connect.CodeOf(err), "%s is not offered to gpt", name)
		_, err = b.client.ExportTool(ctx, name, toolwirev1.ToolFormat_TOOL_FORMAT_MCP, gpt)
		require.Equal(t, connect.CodeNotFound, connect.CodeOf(err), "%s is not offered to gpt", name)
		_, err = b.client.GetTool(ctx, name, client.GetForModel("claude-sonnet-4-5"))
		require.NoError(t, err, "another family is offered %s", name)
	}
	_, err = b.client.GetTool(ctx, "edit", client.GetForModel("not a model"))
	require.Equal(t, connect.CodeInvalidArgument, connect.CodeOf(err))
}
