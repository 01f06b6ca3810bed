package mcpserver_test

import (
	"context"
	"encoding/json"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
	"google.golang.org/protobuf/proto"

	"github.com/toolwire/toolwire/internal/builtin"
	"github.com/toolwire/toolwire/internal/dispatch/dispatchtest"
	"github.com/toolwire/toolwire/internal/identity"
	"github.com/toolwire/toolwire/pkg/tool"
	toolwirev1 "github.com/toolwire/toolwire/pkg/toolproto/toolwire/v1"
)

// A block's annotations keep a priority of 0 on every path and revision
// (the SDK's types omit it as a zero value), next to a priority that is
// not 0 and a block without one.
func TestPriorityZeroIsKept(t *testing.T) {
	t.Parallel()
	annotated := tool.Must(tool.New("annotated", func(context.Context, struct{}) (*tool.Result, error) {
		zero, half := tool.Text("zero"), tool.Text("half")
		zero.Annotations = &toolwirev1.ContentAnnotations{Priority: proto.Float64(0)}
		half.Annotations = &toolwirev1.ContentAnnotations{Priority: proto.Float64(0.5), Audience: []string{"user"}}
		return &tool.Result{Content: []*toolwirev1.Content{zero, half, tool.Text("none")}}, nil
	}))
	s := dispatchtest.Start(t, dispatchtest.Options{Tools: append(builtin.Tools(), annotated)})
	url := endpoint(t, s.Dispatcher, identity.OpenAccess{Identity: identity.Default})
	meta26 := `"_meta":{"io.modelcontextprotocol/protocolVersion":"2026-07-28","io.modelcontextprotocol/clientCapabilities":{}`
	for name, c := range map[string]struct{ body, version string }{
		"2026-07-28 fast path":     {`{"jsonrpc":"2.0","id":1,"method":"tools/call","params":{"name":"annotated","arguments":{},` + meta26 + `}}}`, "2026-07-28"},
		"2026-07-28 with progress": {`{"jsonrpc":"2.0","id":1,"method":"tools/call","params":{"name":"annotated","arguments":{},` + meta26 + `,"progressToken":"p"}}}`, "2026-07-28"},
		"2025-11-25":               {`{"jsonrpc":"2.0","id":1,"method":"tools/call","params":{"name":"annotated","arguments":{}}}`, "2025-11-25"},
	} {
		t.Run(name, func(t *testing.T) {
			ctx, cancel := context.WithTimeout(t.Context(), 30*time.Second)
			defer cancel()
			out := postRPC(t, ctx, url, []byte(c.body), "MCP-Protocol-Version", c.version)
			var msg struct {
				Result struct {
					Content []struct {
						Text        string          `json:"text"`
						Annotations json.RawMessage `json:"annotations"`
					} `json:"content"`
				} `json:"result"`
			}
			require.NoError(t, json.Unmarshal(out, &msg), string(out))
			require.Len(t, msg.Result.Content, 3, string(out))
			require.JSONEq(t, `{"priority":0}`, string(msg.Result.Content[0].Annotations))
			require.JSONEq(t, `{"priority":0.5,"audience":["user"]}`, string(msg.Result.Content[1].Annotations))
			require.Empty(t, msg.Result.Content[2].Annotations)
		})
	}
}
