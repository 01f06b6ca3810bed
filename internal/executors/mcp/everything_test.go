package mcp_test

import (
	"cmp"
	"context"
	"encoding/json"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"syscall"
	"testing"
	"time"

	"github.com/toolwire/toolwire/internal/testdeps"
	"github.com/toolwire/toolwire/internal/testport"

	"connectrpc.com/connect"
	sdk "github.com/modelcontextprotocol/go-sdk/mcp"
	"github.com/stretchr/testify/require"
	"google.golang.org/protobuf/types/known/durationpb"

	"io"
	"net/http"
	"net/http/httptest"
	"strings"

	"github.com/toolwire/toolwire/internal/dispatch/dispatchtest"
	"github.com/toolwire/toolwire/internal/executors/mcp"
	"github.com/toolwire/toolwire/internal/identity"
	"github.com/toolwire/toolwire/internal/mcpserver"
	"github.com/toolwire/toolwire/internal/registry"
	toolwirev1 "github.com/toolwire/toolwire/pkg/toolproto/toolwire/v1"
)

// The npm reference server, installed by `make mcp-everything` from
// testdata/mcp-everything/package-lock.json.
const everythingDir = "../../../testdata/mcp-everything"

// everything returns the paths of node and the reference server's entry
// point. Without them the test fails under CI=true and is skipped
// otherwise.
func everything(t *testing.T) (node, index string) {
	t.Helper()
	missing := func(format string, args ...any) {
		t.Helper()
		testdeps.Missing(t, "run `make mcp-everything`", format, args...)
	}
	node, err := exec.LookPath("node")
	if err != nil {
		missing("node not found: %v", err)
	}
	index, err = filepath.Abs(filepath.Join(everythingDir, "node_modules/@modelcontextprotocol/server-everything/dist/index.js"))
	require.NoError(t, err)
	if _, err := os.Stat(index); err != nil {
		missing("the MCP reference server is not installed: %v", err)
	}
	return node, index
}

// everythingArgs are arguments for tools whose schema alone does not say
// what works offline; other tools get minimalArgs of their schema.
var everythingArgs = map[string]string{
	"echo":                           `{"message":"hello from toolwire"}`,
	"gzip-file-as-resource":          `{"name":"hello.txt.gz","data":"data:text/plain;base64,aGVsbG8gdG9vbHdpcmU=","outputType":"resource"}`,
	"trigger-long-running-operation": `{"duration":0.2,"steps":2}`,
	"get-annotated-message":          `{"messageType":"success","includeImage":true}`,
}

// everythingUnsupported are tools the reference server lists that no
// client without the experimental tasks API (SEP-1686) can call
// (`execution.taskSupport: "required"`): the Go SDK v1.8.0 has none, so
// the executor imports them disabled, with the reason, and a call is
// refused at admission with it.
var everythingUnsupported = map[string]string{
	"simulate-research-query": "requires task augmentation",
}

// minimalArgs builds the smallest arguments a JSON Schema accepts: every
// required property with its first enum value, a string "x", a number at
// its minimum (or 1), false, an empty array or a minimal object.
func minimalArgs(schema map[string]any) map[string]any {
	out := map[string]any{}
	props, _ := schema["properties"].(map[string]any)
	req, _ := schema["required"].([]any)
	for _, r := range req {
		name, _ := r.(string)
		p, _ := props[name].(map[string]any)
		out[name] = minimalValue(p)
	}
	return out
}

func minimalValue(p map[string]any) any {
	if e, ok := p["enum"].([]any); ok && len(e) > 0 {
		return e[0]
	}
	switch p["type"] {
	case "string":
		return "x"
	case "number", "integer":
		if m, ok := p["minimum"].(float64); ok {
			return m
		}
		return 1
	case "boolean":
		return false
	case "array":
		return []any{}
	case "object":
		return minimalArgs(p)
	}
	return nil
}

func TestEverythingStdio(t *testing.T) {
	t.Parallel()
	node, index := everything(t)
	runEverything(t, mcp.ServerConfig{Name: "everything", Required: true,
		Stdio: &mcp.StdioConfig{Command: node, Args: []string{index, "stdio"}, Dir: filepath.Dir(index)}})
}

func TestEverythingStreamableHTTP(t *testing.T) {
	t.Parallel()
	node, index := everything(t)
	url := startEverythingHTTP(t, node, index)
	runEverything(t, mcp.ServerConfig{Name: "everything", Required: true, HTTP: &mcp.HTTPConfig{URL: url}})
}

// startEverythingHTTP runs the reference server in streamableHttp mode on
// a free loopback port until the test ends, and returns its MCP URL.
func startEverythingHTTP(t *testing.T, node, index string) string {
	t.Helper()
	// Below the ephemeral range (testport): the port is dialled until the
	// server listens, and a dial of an ephemeral port nothing listens on
	// can connect to itself and hold the port.
	port := testport.Free(t)
	cmd := exec.Command(node, index, "streamableHttp")
	cmd.Env = []string{"PORT=" + strconv.Itoa(port)}
	cmd.Dir = filepath.Dir(index)
	cmd.SysProcAttr = &syscall.SysProcAttr{Setpgid: true}
	cmd.WaitDelay = time.Second
	require.NoError(t, cmd.Start())
	t.Cleanup(func() {
		_ = syscall.Kill(-cmd.Process.Pid, syscall.SIGKILL)
		_ = cmd.Wait()
	})
	addr := net.JoinHostPort("127.0.0.1", strconv.Itoa(port))
	deadline := time.Now().Add(20 * time.Second)
	for {
		c, err := net.DialTimeout("tcp", addr, time.Second)
		if err == nil {
			_ = c.Close()
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("the reference server never listened on %s: %v", addr, err)
		}
		time.Sleep(20 * time.Millisecond) // polling with a deadline
	}
	return "http://" + addr + "/mcp"
}

// directSession connects to the server with the SDK alone, for the bytes
// the server itself returns.
func directSession(t *testing.T, sc mcp.ServerConfig) *sdk.ClientSession {
	t.Helper()
	var tr sdk.Transport
	if sc.Stdio != nil {
		cmd := exec.Command(sc.Stdio.Command, sc.Stdio.Args...)
		cmd.Dir = sc.Stdio.Dir
		tr = &sdk.CommandTransport{Command: cmd, TerminateDuration: 500 * time.Millisecond}
	} else {
		tr = &sdk.StreamableClientTransport{Endpoint: sc.HTTP.URL}
	}
	cs, err := sdk.NewClient(&sdk.Implementation{Name: "direct", Version: "1"}, &sdk.ClientOptions{Capabilities: &sdk.ClientCapabilities{}}).
		Connect(t.Context(), tr, nil)
	require.NoError(t, err)
	t.Cleanup(func() { _ = cs.Close() })
	return cs
}

// runEverything proves, end to end through the dispatcher and a worker,
// that every tool the reference server lists is callable, that its tiny
// image arrives byte for byte, and that a long-running tool reports
// progress and can be cancelled.
func runEverything(t *testing.T, sc mcp.ServerConfig) {
	s := dispatchtest.Start(t, dispatchtest.Options{NoWorker: true})
	cfg := testConfig(sc)
	e := newExecutor(t, cfg, mcp.Options{Registry: s.Env.Bus.Registry, Conn: s.Env.Bus.NC, Writer: mcpWriter(s)})
	specs := e.Specs()
	s.StartExecutorWorker(t, mcpType, e, specs...)

	direct := directSession(t, sc)
	var listed []string
	for tl, err := range direct.Tools(t.Context(), nil) {
		require.NoError(t, err)
		listed = append(listed, tl.Name)
	}
	byTool := map[string]*toolwirev1.ToolSpec{}
	for _, sp := range specs {
		byTool[sp.GetMcp().GetTool()] = sp
	}
	require.NotEmpty(t, listed)
	taskSupports := map[string]int{}
	t.Logf("the reference server lists %d tools: %v", len(listed), listed)

	for _, name := range listed {
		sp := byTool[name]
		require.NotNil(t, sp, "tool %s was imported", name)
		if why, ok := everythingUnsupported[name]; ok {
			require.True(t, sp.Disabled, "%s is not advertised as callable", name)
			require.Contains(t, sp.DisabledReason, why)
			require.Equal(t, mcp.TaskRequired, sp.GetMcp().GetTaskSupport())
		} else {
			require.False(t, sp.Disabled, name)
		}
		// The server's execution.taskSupport is kept, and is what the MCP
		// form (toolwire's /mcp) advertises: absent is MCP's "forbidden".
		upstream := cmp.Or(sp.GetMcp().GetTaskSupport(), "forbidden")
		require.Equal(t, upstream, registry.TaskSupportName(sp.TaskSupport), name)
		form, err := registry.ExportOne(toolwirev1.ToolFormat_TOOL_FORMAT_MCP, sp)
		require.NoError(t, err)
		require.JSONEq(t, `{"taskSupport":"`+upstream+`"}`, executionOf(t, form), name)
		taskSupports[upstream]++
		s.WaitTool(t, sp.Name)
		args, ok := everythingArgs[name]
		if !ok {
			var schema map[string]any
			require.NoError(t, json.Unmarshal([]byte(sp.InputSchemaJson), &schema))
			b, err := json.Marshal(minimalArgs(schema))
			require.NoError(t, err)
			args = string(b)
		}
		t.Run(name, func(t *testing.T) {
			resp := call(t, s, sp.Name, args)
			if why, ok := everythingUnsupported[name]; ok {
				require.False(t, resp.Ok)
				require.Equal(t, toolwirev1.ErrorType_ERROR_TYPE_NOT_FOUND, resp.Error.Type, "refused at admission: %v", resp.Error)
				require.Contains(t, resp.Error.Message, why)
				return
			}
			require.True(t, resp.Ok, "%s(%s): %v", name, args, resp.Error)
			require.NotEmpty(t, resp.Content, "%s answered content", name)
		})
	}

	// The reference server's tools are forbidden tasks but one, which
	// requires them (and is disabled: the SDK cannot call it so).
	require.Equal(t, 1, taskSupports["required"], "%v", taskSupports)
	require.Equal(t, len(listed)-1, taskSupports["forbidden"], "%v", taskSupports)
	require.Equal(t, toolwirev1.TaskSupport_TASK_SUPPORT_FORBIDDEN, byTool["echo"].TaskSupport)

	t.Run("through /mcp", func(t *testing.T) {
		// toolwire's MCP endpoint advertises each tool's taskSupport as
		// the reference server does, and leaves out the disabled one
		// that requires tasks (every call of it would fail).
		tools := listThroughMCP(t, s)
		for _, name := range listed {
			sp := byTool[name]
			execution, ok := tools[sp.Name]
			if _, unsupported := everythingUnsupported[name]; unsupported {
				require.False(t, ok, "%s is not offered", sp.Name)
				continue
			}
			require.True(t, ok, "%s is listed", sp.Name)
			require.JSONEq(t, `{"taskSupport":"forbidden"}`, string(execution), sp.Name)
		}
	})

	t.Run("tiny image byte for byte", func(t *testing.T) {
		want, err := direct.CallTool(t.Context(), &sdk.CallToolParams{Name: "get-tiny-image", Arguments: map[string]any{}})
		require.NoError(t, err)
		var wantPNG []byte
		for _, c := range want.Content {
			if img, ok := c.(*sdk.ImageContent); ok {
				wantPNG = img.Data
			}
		}
		require.NotEmpty(t, wantPNG)
		resp := call(t, s, byTool["get-tiny-image"].Name, `{}`)
		require.True(t, resp.Ok, "%v", resp.Error)
		require.Len(t, resp.Content, len(want.Content), "one block per MCP block")
		var got *toolwirev1.ImageContent
		for _, c := range resp.Content {
			if c.GetImage() != nil {
				got = c.GetImage()
			}
		}
		require.NotNil(t, got, "an image block")
		require.Equal(t, "image/png", got.MimeType)
		require.Equal(t, wantPNG, got.Data)
	})

	t.Run("progress", func(t *testing.T) {
		name := byTool["trigger-long-running-operation"].Name
		sub, err := s.Client.Submit(t.Context(), connect.NewRequest(&toolwirev1.SubmitRequest{Tool: name, ArgumentsJson: `{"duration":1,"steps":4}`}))
		require.NoError(t, err)
		events := watch(t, s, sub.Msg.CallId, func(ev *toolwirev1.CallEvent) bool {
			return ev.Type == toolwirev1.CallEventType_CALL_EVENT_TYPE_FINISHED
		})
		var progress []*toolwirev1.CallEvent
		for _, ev := range events {
			if ev.Type == toolwirev1.CallEventType_CALL_EVENT_TYPE_PROGRESS {
				progress = append(progress, ev)
			}
		}
		require.GreaterOrEqual(t, len(progress), 2, "progress events: %v", progress)
		require.NotNil(t, progress[0].Percent, "the server gives a total, so a percentage")
		last := events[len(events)-1]
		require.True(t, last.Response.GetOk(), "%v", last.Response.GetError())
	})

	t.Run("cancel", func(t *testing.T) {
		name := byTool["trigger-long-running-operation"].Name
		sub, err := s.Client.Submit(t.Context(), connect.NewRequest(&toolwirev1.SubmitRequest{Tool: name, ArgumentsJson: `{"duration":60,"steps":120}`}))
		require.NoError(t, err)
		// Running once it reports progress.
		watch(t, s, sub.Msg.CallId, func(ev *toolwirev1.CallEvent) bool {
			return ev.Type == toolwirev1.CallEventType_CALL_EVENT_TYPE_PROGRESS
		})
		cancelled := time.Now()
		c, err := s.Client.Cancel(t.Context(), connect.NewRequest(&toolwirev1.CancelRequest{CallId: sub.Msg.CallId, Reason: "test"}))
		require.NoError(t, err)
		require.Equal(t, toolwirev1.CancelOutcome_CANCEL_OUTCOME_REQUESTED, c.Msg.Outcome)
		res, err := s.Client.GetResult(t.Context(), connect.NewRequest(&toolwirev1.GetResultRequest{CallId: sub.Msg.CallId, Wait: durationpb.New(30 * time.Second)}))
		require.NoError(t, err)
		require.Equal(t, toolwirev1.CallState_CALL_STATE_DONE, res.Msg.State)
		require.False(t, res.Msg.Response.Ok)
		require.Equal(t, toolwirev1.ErrorType_ERROR_TYPE_CANCELLED, res.Msg.Response.Error.Type)
		require.Less(t, time.Since(cancelled), 10*time.Second, "the call answered promptly, not after its 60s")
		// The session is still good after the cancel.
		resp := call(t, s, byTool["echo"].Name, `{"message":"after cancel"}`)
		require.True(t, resp.Ok, "%v", resp.Error)
	})
}

// listThroughMCP lists the stack's tools on toolwire's MCP endpoint (a
// 2026-07-28 client, one page), returning each tool's `execution`.
func listThroughMCP(t *testing.T, s *dispatchtest.Stack) map[string]json.RawMessage {
	t.Helper()
	mux := http.NewServeMux()
	ms, err := mcpserver.New(s.Dispatcher, identity.OpenAccess{Identity: identity.Default},
		mcpserver.Config{Version: "test", Tasks: s.Dispatcher.Tasks(), PageSize: 1000})
	require.NoError(t, err)
	ms.Handle(mux)
	srv := httptest.NewServer(mux)
	t.Cleanup(srv.Close)
	body := `{"jsonrpc":"2.0","id":1,"method":"tools/list","params":{"_meta":{` +
		`"io.modelcontextprotocol/protocolVersion":"2026-07-28","io.modelcontextprotocol/clientCapabilities":{}}}}`
	req, err := http.NewRequestWithContext(t.Context(), http.MethodPost, srv.URL+mcpserver.Path, strings.NewReader(body))
	require.NoError(t, err)
	req.Header.Set("Content-Type", "application/json")
	req.Header.Set("Accept", "application/json, text/event-stream")
	req.Header.Set("MCP-Protocol-Version", "2026-07-28")
	req.Header.Set("Mcp-Method", "tools/list")
	resp, err := http.DefaultClient.Do(req)
	require.NoError(t, err)
	defer resp.Body.Close()
	out, err := io.ReadAll(io.LimitReader(resp.Body, 8<<20))
	require.NoError(t, err)
	require.Equal(t, http.StatusOK, resp.StatusCode, string(out))
	for line := range strings.SplitSeq(string(out), "\n") { // an event stream: its last data line
		if data, ok := strings.CutPrefix(line, "data:"); ok {
			out = []byte(strings.TrimSpace(data))
		}
	}
	var msg struct {
		Result struct {
			Tools []struct {
				Name      string          `json:"name"`
				Execution json.RawMessage `json:"execution"`
			} `json:"tools"`
			NextCursor string `json:"nextCursor"`
		} `json:"result"`
	}
	require.NoError(t, json.Unmarshal(out, &msg), string(out))
	require.NotEmpty(t, msg.Result.Tools, string(out))
	require.Empty(t, msg.Result.NextCursor, "one page")
	tools := map[string]json.RawMessage{}
	for _, tl := range msg.Result.Tools {
		tools[tl.Name] = tl.Execution
	}
	return tools
}

// executionOf is the `execution` object of a tool's MCP form.
func executionOf(t *testing.T, form []byte) string {
	t.Helper()
	var tool struct {
		Execution json.RawMessage `json:"execution"`
	}
	require.NoError(t, json.Unmarshal(form, &tool))
	return string(tool.Execution)
}

// watch streams the events of a call until until returns true for one,
// and returns them.
func watch(t *testing.T, s *dispatchtest.Stack, callID string, until func(*toolwirev1.CallEvent) bool) []*toolwirev1.CallEvent {
	t.Helper()
	ctx, cancel := context.WithTimeout(t.Context(), 30*time.Second)
	defer cancel()
	stream, err := s.Client.Watch(ctx, connect.NewRequest(&toolwirev1.WatchRequest{CallId: callID}))
	require.NoError(t, err)
	defer stream.Close()
	var events []*toolwirev1.CallEvent
	for stream.Receive() {
		ev := stream.Msg().Event
		events = append(events, ev)
		if until(ev) {
			return events
		}
	}
	t.Fatalf("watch of %s ended before the awaited event: %v (events %v)", callID, stream.Err(), events)
	return nil
}
