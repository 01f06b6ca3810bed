package mcpserver

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"net/netip"
	"strings"

	"github.com/modelcontextprotocol/go-sdk/jsonrpc"
	"github.com/modelcontextprotocol/go-sdk/mcp"

	"github.com/toolwire/toolwire/internal/dispatch"
	toolwirev1 "github.com/toolwire/toolwire/pkg/toolproto/toolwire/v1"
)

// The fast path: a plain tools/call of the stateless revision — one
// request, in a POST of its own, without a progress token, answers to a
// request for input or the Tasks extension — is answered here, without
// the SDK, whose general machinery (a session per request, its JSON
// decoder reading the message several times) costs most of an MCP call's
// CPU. What it checks and answers is what the SDK path does for such a
// request; anything else (another method or revision, headers that do not
// match the body, a batch, a field it does not know) goes to the SDK,
// which answers it, errors included. The tests run the conformance suite
// and the other MCP tests through both paths.

// fastParams are the params the fast path takes; any other field sends
// the request to the SDK.
type fastParams struct {
	Name      string                     `json:"name"`
	Arguments json.RawMessage            `json:"arguments,omitempty"`
	Meta      map[string]json.RawMessage `json:"_meta,omitempty"`
}

// fast serves r on the fast path when it can (true); otherwise it leaves
// r, its body whole again, to the SDK (false).
func (s *Server) fast(w http.ResponseWriter, r *http.Request) bool {
	h := r.Header
	if r.Method != http.MethodPost || h.Get("Mcp-Method") != "tools/call" || h.Get("MCP-Protocol-Version") != ProtocolVersions[0] ||
		!strings.Contains(h.Get("Accept"), "application/json") || !strings.Contains(h.Get("Accept"), "text/event-stream") ||
		!strings.HasPrefix(h.Get("Content-Type"), "application/json") || h.Get("Mcp-Session-Id") != "" {
		return false
	}
	// The SDK's DNS rebinding check: a loopback listener reached under a
	// name that is not loopback is its to refuse.
	if a, ok := r.Context().Value(http.LocalAddrContextKey).(net.Addr); ok && a != nil && loopback(a.String()) && !loopback(r.Host) {
		return false
	}
	body, err := io.ReadAll(io.LimitReader(r.Body, s.cfg.MaxRequestBytes+1))
	// Whatever happens next, the SDK can read the body whole.
	r.Body = struct {
		io.Reader
		io.Closer
	}{io.MultiReader(bytes.NewReader(body), r.Body), r.Body}
	if err != nil || int64(len(body)) > s.cfg.MaxRequestBytes {
		return false
	}
	var msg struct {
		JSONRPC string          `json:"jsonrpc"`
		ID      json.RawMessage `json:"id"`
		Method  string          `json:"method"`
		Params  json.RawMessage `json:"params"`
	}
	var p fastParams
	if strict(body, &msg) != nil || msg.JSONRPC != "2.0" || msg.Method != "tools/call" || !plainID(msg.ID) ||
		strict(msg.Params, &p) != nil || p.Name == "" || h.Get("Mcp-Name") != p.Name {
		return false
	}
	caps, ok := plainMeta(p.Meta)
	if !ok {
		return false
	}
	id, err := identity(r.Context())
	if err != nil {
		return false
	}
	res, err := s.fastCall(r.Context(), id, &p, caps)
	writeRPC(w, msg.ID, res, err, s.impl())
	return true
}

// strict decodes JSON b into v, refusing fields v does not have.
func strict(b []byte, v any) error {
	dec := json.NewDecoder(bytes.NewReader(b))
	dec.DisallowUnknownFields()
	if err := dec.Decode(v); err != nil {
		return err
	}
	if dec.More() {
		return errors.New("trailing data")
	}
	return nil
}

// plainID reports whether id is a JSON-RPC request id: a string or a
// number.
func plainID(id json.RawMessage) bool {
	if len(id) == 0 {
		return false
	}
	var v any
	if json.Unmarshal(id, &v) != nil {
		return false
	}
	switch v.(type) {
	case string, float64:
		return true
	}
	return false
}

// plainMeta checks a request's _meta for the fast path: the stateless
// revision's protocol version, no progress token, and client capabilities
// (returned as JSON) that do not declare the Tasks extension.
func plainMeta(meta map[string]json.RawMessage) (caps string, ok bool) {
	var version string
	if json.Unmarshal(meta["io.modelcontextprotocol/protocolVersion"], &version) != nil || version != ProtocolVersions[0] {
		return "", false
	}
	if _, progress := meta["progressToken"]; progress {
		return "", false
	}
	raw, declared := meta[metaClientCapabilities]
	if !declared || string(raw) == "null" {
		return "", true
	}
	var c struct {
		Extensions map[string]json.RawMessage `json:"extensions"`
	}
	if json.Unmarshal(raw, &c) != nil || c.Extensions[tasksExtension] != nil || !isJSONObject(raw) {
		return "", false
	}
	return string(raw), true
}

// fastCall is callTool for a plain call: it waits for the result in the
// dispatcher's Call, and for an approver when the call is parked (unless
// the client's user may confirm it: askToConfirm); a client that goes
// away cancels the call.
func (s *Server) fastCall(ctx context.Context, id dispatch.Identity, p *fastParams, caps string) (mcp.Result, error) {
	if s.d.TaskSupport(p.Name) == toolwirev1.TaskSupport_TASK_SUPPORT_REQUIRED {
		return nil, needsTasks(fmt.Sprintf("tool %q", p.Name)) // a client without the extension (plainMeta)
	}
	args := string(p.Arguments)
	if args == "" || args == "null" {
		args = "{}"
	}
	cr := &toolwirev1.CallRequest{Tool: p.Name, ArgumentsJson: args, ClientCapabilitiesJson: caps}
	cres, err := s.d.Call(ctx, id, cr, s.d.Config().MaxWait)
	if err != nil {
		if cres != nil && cres.CallId != "" {
			s.cancel(ctx, id, cres.CallId)
		}
		return nil, err
	}
	resp := cres.Response
	if cres.State == toolwirev1.CallState_CALL_STATE_AWAITING_APPROVAL {
		if res := askToConfirm(resp, args, caps); res != nil {
			return res, nil
		}
	}
	if cres.State != toolwirev1.CallState_CALL_STATE_DONE {
		if resp, err = s.await(ctx, id, cres.CallId); err != nil {
			s.cancel(ctx, id, cres.CallId)
			return nil, err
		}
	}
	if resp.GetMeta().GetSource() == "dispatcher" && !resp.GetOk() {
		res, err := refused(resp)
		return mark(res, err, true)
	}
	if resp.GetInputRequired() != nil {
		return askInput(resp, true, caps)
	}
	res, err := result(resp)
	return mark(res, err, true)
}

// impl is the server's implementation info, as results name it.
func (s *Server) impl() *mcp.Implementation {
	return &mcp.Implementation{Name: "toolwire", Title: "toolwire", Version: s.cfg.Version}
}

// writeRPC writes the JSON-RPC response of request id: res with the
// server's info in its _meta, or err as the SDK would answer it (the HTTP
// status of SEP-2575 for the errors that have one).
func writeRPC(w http.ResponseWriter, id json.RawMessage, res mcp.Result, err error, impl *mcp.Implementation) {
	out := map[string]any{"jsonrpc": "2.0", "id": id}
	status := http.StatusOK
	if err == nil {
		m := res.GetMeta()
		if m == nil {
			m = mcp.Meta{}
		}
		if _, ok := m["io.modelcontextprotocol/serverInfo"]; !ok {
			m["io.modelcontextprotocol/serverInfo"] = impl
		}
		res.SetMeta(m)
		out["result"] = res
	} else {
		var je *jsonrpc.Error
		if !errors.As(err, &je) {
			je = &jsonrpc.Error{Code: jsonrpc.CodeInternalError, Message: err.Error()}
		}
		switch je.Code {
		case jsonrpc.CodeMethodNotFound:
			status = http.StatusNotFound
		case jsonrpc.CodeInvalidParams, mcp.CodeMissingRequiredClientCapabilities, mcp.CodeUnsupportedProtocolVersion:
			status = http.StatusBadRequest
		}
		out["error"] = je
	}
	b, merr := json.Marshal(out)
	if merr != nil {
		b, _ = json.Marshal(map[string]any{"jsonrpc": "2.0", "id": id,
			"error": &jsonrpc.Error{Code: jsonrpc.CodeInternalError, Message: merr.Error()}})
		status = http.StatusOK
	}
	w.Header().Set("Content-Type", "application/json")
	w.WriteHeader(status)
	_, _ = w.Write(b)
}

// loopback reports whether host[:port] is localhost or a loopback
// address.
func loopback(hostport string) bool {
	host, _, err := net.SplitHostPort(hostport)
	if err != nil {
		host = strings.Trim(hostport, "[]")
	}
	if host == "localhost" {
		return true
	}
	ip, err := netip.ParseAddr(host)
	return err == nil && ip.IsLoopback()
}
