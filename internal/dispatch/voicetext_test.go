package dispatch_test

import (
	"context"
	"fmt"
	"os"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/toolwire/toolwire/internal/dispatch/dispatchtest"
	"github.com/toolwire/toolwire/internal/identity"
	"github.com/toolwire/toolwire/internal/policy"
	"github.com/toolwire/toolwire/pkg/tool"
	toolwirev1 "github.com/toolwire/toolwire/pkg/toolproto/toolwire/v1"
)

// searchTool answers a query at once.
func searchTool(name string) *tool.Tool {
	return tool.Must(tool.New(name, func(_ context.Context, in struct {
		Q string `json:"q"`
	}) (string, error) {
		return "found " + in.Q, nil
	}))
}

// The seed's voice/text example of docs/policy.md (the whole document is
// docs/examples/policy-voice-text.yaml, shown verbatim in the docs) holds
// as the docs say on a real dispatcher: two retrieval calls per turn in a
// voice session and five in a text one, the third (sixth) refused
// BUDGET_EXCEEDED; a retrieval call is held to 800 ms in voice and 2 s in
// text; export_csv is MODE_RESTRICTED in voice only.
func TestVoiceTextExampleOfTheDocs(t *testing.T) {
	t.Parallel()
	src, err := os.ReadFile("../../docs/examples/policy-voice-text.yaml")
	require.NoError(t, err)
	docs, err := os.ReadFile("../../docs/policy.md")
	require.NoError(t, err)
	require.Contains(t, string(docs), "```yaml\n"+string(src)+"```\n", "docs/policy.md shows the example verbatim")

	s := dispatchtest.Start(t, dispatchtest.Options{Tools: []*tool.Tool{
		searchTool("search_kb"), napTool("search_slow", 900*time.Millisecond), napTool("export_csv", 0)}})
	s.ApplyPolicy(t, string(src))
	s.SetMode(t, "s-voice", "voice")
	s.SetMode(t, "s-text", "text")
	callWith := func(name, args, session, turn string) *toolwirev1.CallResponse {
		r, err := s.Dispatcher.Call(t.Context(), identity.Default, &toolwirev1.CallRequest{Tool: name, ArgumentsJson: args,
			Session: session, Turn: turn}, 30*time.Second)
		require.NoError(t, err)
		return r
	}
	call := func(name, session, turn string) *toolwirev1.CallResponse { return callWith(name, `{}`, session, turn) }
	turn := func(session, turn string, n int) {
		search := func(i int) *toolwirev1.ToolResponse { // each asks something else: no loop
			return callWith("search_kb", fmt.Sprintf(`{"q":"question %s.%d"}`, turn, i), session, turn).Response
		}
		for i := range n {
			r := search(i)
			require.True(t, r.GetOk(), "%s turn %s: call %d: %v", session, turn, i+1, r.GetError())
		}
		r := search(n)
		require.Equal(t, toolwirev1.ErrorType_ERROR_TYPE_BUDGET_EXCEEDED, r.GetError().GetType(), "%s: call %d", session, n+1)
		require.Contains(t, r.GetError().GetMessage(), "retrieval calls per turn")
	}
	turn("s-voice", "1", 2)
	turn("s-voice", "2", 2) // a new turn, a new budget
	turn("s-text", "1", 5)

	over := call("search_slow", "s-voice", "3").Response.GetMeta().GetLatencyBudgetExceeded()
	require.NotNil(t, over, "900 ms is over the voice budget")
	require.Equal(t, 800*time.Millisecond, over.GetBudget().AsDuration())
	require.Equal(t, "voice-retrieval", over.GetEntry())
	p, err := policy.Parse(src)
	require.NoError(t, err)
	b, ok := p.LatencyBudgetFor(&toolwirev1.ToolSpec{Name: "search_slow"}, "text")
	require.True(t, ok)
	require.Equal(t, 2*time.Second, b.Soft)
	_, ok = p.LatencyBudgetFor(&toolwirev1.ToolSpec{Name: "search_slow"}, "")
	require.False(t, ok, "no budget without a mode")

	r := call("export_csv", "s-voice", "4").Response
	require.Equal(t, toolwirev1.ErrorType_ERROR_TYPE_MODE_RESTRICTED, r.GetError().GetType())
	require.True(t, strings.Contains(r.GetError().GetMessage(), "too slow to speak"))
	require.True(t, call("export_csv", "s-text", "4").Response.GetOk())
}
