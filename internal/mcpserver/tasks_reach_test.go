package mcpserver_test

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"fmt"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/oklog/ulid/v2"
	"github.com/stretchr/testify/require"

	"github.com/toolwire/toolwire/internal/builtin"
	"github.com/toolwire/toolwire/internal/dispatch"
	"github.com/toolwire/toolwire/internal/dispatch/dispatchtest"
	"github.com/toolwire/toolwire/internal/identity"
	"github.com/toolwire/toolwire/internal/mcpserver"
	"github.com/toolwire/toolwire/pkg/tool"
	toolwirev1 "github.com/toolwire/toolwire/pkg/toolproto/toolwire/v1"
)

// agentKeys authenticates key "a" as agent bot-a and "b" as agent bot-b,
// both of tenant acme with the tools scope.
func agentKeys(t *testing.T) *identity.APIKeys {
	t.Helper()
	doc := "keys:\n"
	for key, agent := range map[string]string{"a": "bot-a", "b": "bot-b"} {
		sum := sha256.Sum256([]byte(key))
		doc += fmt.Sprintf("  - {sha256: %s, tenant: acme, agent: %s, scopes: [tools]}\n", hex.EncodeToString(sum[:]), agent)
	}
	f := filepath.Join(t.TempDir(), "keys.yaml")
	require.NoError(t, os.WriteFile(f, []byte(doc), 0o600))
	k, err := identity.LoadAPIKeys(f)
	require.NoError(t, err)
	return k
}

// Under --agent-visibility own, another agent's task is unknown on every
// tasks method — tasks/get too, when the task's record has the answers of
// its next call fixed and not submitted yet (a replica died between the
// two steps): the other agent neither submits that call (as itself) nor
// fails the task; its own agent's next look submits it.
func TestTaskOfAnotherAgentIsUnknownUnderOwn(t *testing.T) {
	t.Parallel()
	release := make(chan struct{})
	var acts atomic.Int64
	confirm := tool.Must(tool.New("confirm", func(ctx context.Context, _ struct{}) (*tool.Result, error) {
		if a := tool.InputFrom(ctx); a != nil && a.PreviousCallID != "" {
			acts.Add(1)
			return &tool.Result{Content: []*toolwirev1.Content{tool.Text("confirmed")}}, nil
		}
		<-release
		return tool.NeedInput(map[string]tool.InputRequest{"ok": tool.Elicit("Sure?", map[string]any{"type": "object"})}, nil), nil
	}))
	s := dispatchtest.Start(t, dispatchtest.Options{Tools: append(builtin.Tools(), confirm), Auth: agentKeys(t),
		Dispatcher: dispatch.Config{AgentVisibility: identity.VisibilityOwn}})
	mux := http.NewServeMux()
	ms, err := mcpserver.New(s.Dispatcher, agentKeys(t), mcpserver.Config{TaskAfter: 200 * time.Millisecond, Tasks: s.Dispatcher.Tasks()})
	require.NoError(t, err)
	ms.Handle(mux)
	srv := httptest.NewServer(mux)
	t.Cleanup(srv.Close)
	a, b := taskClient{t, srv.URL + mcpserver.Path, "a"}, taskClient{t, srv.URL + mcpserver.Path, "b"}

	created, e := a.rpc("tools/call", map[string]any{"name": "confirm", "arguments": map[string]any{}})
	require.Nil(t, e)
	require.Equal(t, "task", created["resultType"])
	id := created["taskId"].(string)
	close(release)
	a.until(id, "input_required")

	// The answers fixed, the call that answers them not submitted.
	ctx, key := t.Context(), "acme."+id
	entry, err := s.Dispatcher.Tasks().Get(ctx, key)
	require.NoError(t, err)
	var rec map[string]any
	require.NoError(t, json.Unmarshal(entry.Value(), &rec))
	rec["submitting"] = map[string]string{"ok": `{"action":"accept","content":{}}`}
	val, err := json.Marshal(rec)
	require.NoError(t, err)
	_, err = s.Dispatcher.Tasks().Update(ctx, key, val, entry.Revision())
	require.NoError(t, err)

	madeUp := ulid.Make().String()
	answer := func(c taskClient, method, taskID string) string {
		_, e := c.rpc(method, map[string]any{"taskId": taskID})
		if e == nil {
			return "ok"
		}
		return fmt.Sprint(e.Code, " ", strings.ReplaceAll(e.Message, taskID, "ID"))
	}
	for _, method := range []string{"tasks/get", "tasks/cancel"} {
		want := answer(b, method, madeUp)
		require.Contains(t, want, "unknown task")
		require.Equal(t, want, answer(b, method, id), "bot-b's %s of bot-a's task", method)
	}
	entry, err = s.Dispatcher.Tasks().Get(ctx, key)
	require.NoError(t, err)
	require.JSONEq(t, string(val), string(entry.Value()), "bot-b changed nothing")
	require.Zero(t, acts.Load())

	done := a.until(id, "completed")
	require.Equal(t, "confirmed", done["result"].(map[string]any)["content"].([]any)[0].(map[string]any)["text"])
	require.Equal(t, int64(1), acts.Load())
}
