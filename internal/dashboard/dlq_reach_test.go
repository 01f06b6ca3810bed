package dashboard

import (
	"fmt"
	"net/http"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
	"google.golang.org/protobuf/proto"
	"google.golang.org/protobuf/types/known/timestamppb"

	"github.com/toolwire/toolwire/internal/dispatch"
	"github.com/toolwire/toolwire/internal/identity"
	toolwirev1 "github.com/toolwire/toolwire/pkg/toolproto/toolwire/v1"
)

// Under --agent-visibility own, a dead letter is placed with the agent
// the calls index has for its call (what a dispatcher stored), never the
// agent the letter names (a worker writes letters): a letter naming the
// reader's agent for another agent's call is not the reader's to see; a
// letter of the reader's own call is.
func TestDeadLetterIsPlacedByTheStoredCallUnderOwn(t *testing.T) {
	t.Parallel()
	own := identity.VisibilityOwn
	u := startUIWith(t, nil, dispatch.Config{AgentVisibility: own}, func(c *Config) { c.AgentVisibility = own }, nil)
	ctx := t.Context()
	call := func(agent string) *toolwirev1.ToolCall {
		r, err := u.Dispatcher.Call(ctx, identity.Identity{Tenant: "acme", Agent: agent, Scopes: []string{"*"}},
			&toolwirev1.CallRequest{Tool: "echo", ArgumentsJson: `{"text":"hi"}`}, 30*time.Second)
		require.NoError(t, err)
		require.True(t, r.Response.GetOk(), "%v", r.Response.GetError())
		waitFor(t, "the call indexed", func() bool { _, ok := u.UI.index.Get(r.CallId); return ok })
		return &toolwirev1.ToolCall{CallId: r.CallId, Tool: "echo", Arguments: []byte(`{"text":"hi"}`), Provider: "builtin",
			Executor: toolwirev1.ExecutorType_EXECUTOR_TYPE_NATIVE, Caller: &toolwirev1.Caller{Tenant: "acme", Agent: "viewer"}}
	}
	letter := func(c *toolwirev1.ToolCall) string {
		data, err := proto.Marshal(&toolwirev1.DeadLetter{Call: c, Reason: "forged " + c.CallId, Attempts: 1, Time: timestamppb.Now()})
		require.NoError(t, err)
		ack, err := u.Env.Bus.JS.Publish(ctx, u.Env.Bus.Subjects.DLQ(c.Executor, "acme", "builtin", "echo"), data)
		require.NoError(t, err)
		return fmt.Sprintf("/ui/dlq/%d", ack.Sequence)
	}
	theirs, mine := call("ops"), call("viewer") // both letters name the viewer
	theirPage, myPage := letter(theirs), letter(mine)

	reader := u.signIn(t, readerKey)
	res, _ := reader.get(theirPage)
	require.Equal(t, http.StatusNotFound, res.StatusCode, "another agent's call's letter")
	res, _ = reader.get(myPage)
	require.Equal(t, http.StatusOK, res.StatusCode, "the reader's own call's letter")
	_, list := reader.get("/ui/dlq")
	require.True(t, strings.Contains(list, mine.CallId))
	require.False(t, strings.Contains(list, theirs.CallId))

	admin := u.signIn(t, adminKey) // sees every agent of acme
	res, _ = admin.get(theirPage)
	require.Equal(t, http.StatusOK, res.StatusCode)
}
