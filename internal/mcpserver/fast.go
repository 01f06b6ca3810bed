package mcpserver

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"mime"
	"net"
	"net/http"
	"net/netip"
	"slices"
	"strings"

	"github.com/modelcontextprotocol/go-sdk/jsonrpc"
	"github.com/modelcontextprotocol/go-sdk/mcp"

	"github.com/toolwire/toolwire/internal/identity"
	"github.com/toolwire/toolwire/internal/profiles"
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

// fastParams are the params the fast path takes, and the model the
// request names (fastModel).
type fastParams struct {
	Name      string
	Arguments json.RawMessage
	Model     string
}

// fast serves r on the fast path when it can (true); otherwise it leaves
// r, its body whole again, to the SDK (false).
func (s *Server) fast(w http.ResponseWriter, r *http.Request) bool {
	h := r.Header
	if mt, _, err := mime.ParseMediaType(h.Get("Content-Type")); err != nil || mt != "application/json" ||
		r.Method != http.MethodPost || h.Get("Mcp-Method") != "tools/call" || h.Get("MCP-Protocol-Version") != ProtocolVersions[0] ||
		!strings.Contains(h.Get("Accept"), "application/json") || !strings.Contains(h.Get("Accept"), "text/event-stream") ||
		h.Get("Mcp-Session-Id") != "" || h.Get("Last-Event-ID") != "" {
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
	// Each object is read key by key, exactly as written: a key the fast
	// path does not know, one repeated, or one in another case (which
	// encoding/json would take for a known one, the SDK not) sends the
	// request to the SDK, so the two never read one body two ways.
	msg, ok := fields(body, "jsonrpc", "id", "method", "params")
	if !ok || !isString(msg["jsonrpc"], "2.0") || !isString(msg["method"], "tools/call") || !plainID(msg["id"]) {
		return false
	}
	params, ok := fields(msg["params"], "name", "arguments", "_meta")
	if !ok {
		return false
	}
	var p fastParams
	if json.Unmarshal(params["name"], &p.Name) != nil || p.Name == "" || h.Get("Mcp-Name") != p.Name {
		return false
	}
	p.Arguments = params["arguments"]
	meta, ok := fields(params["_meta"], "io.modelcontextprotocol/protocolVersion", metaClientCapabilities, "io.modelcontextprotocol/clientInfo", MetaModel)
	if !ok {
		return false
	}
	caps, ok := plainMeta(meta)
	if !ok {
		return false
	}
	id, err := callerOf(r.Context())
	if err != nil {
		return false
	}
	prof, ok := s.fastProfile(h, meta)
	if !ok {
		return false
	}
	if p.Model, ok = fastModel(h, meta); !ok {
		return false
	}
	ctx := context.WithValue(r.Context(), profileKey{}, prof)
	res, err := s.fastCall(ctx, id, &p, caps)
	writeRPC(w, msg["id"], res, err, s.impl())
	return true
}

// fields reads the JSON object b key by key: its members, by exact key,
// when every key is one of allowed and none repeats; false otherwise.
func fields(b []byte, allowed ...string) (map[string]json.RawMessage, bool) {
	dec := json.NewDecoder(bytes.NewReader(b))
	if t, err := dec.Token(); err != nil || t != json.Delim('{') {
		return nil, false
	}
	out := make(map[string]json.RawMessage, len(allowed))
	for dec.More() {
		t, err := dec.Token()
		key, ok := t.(string)
		if err != nil || !ok || !slices.Contains(allowed, key) || out[key] != nil {
			return nil, false
		}
		var v json.RawMessage
		if dec.Decode(&v) != nil {
			return nil, false
		}
		out[key] = v
	}
	if t, err := dec.Token(); err != nil || t != json.Delim('}') {
		return nil, false
	}
	if _, err := dec.Token(); err != io.EOF {
		return nil, false
	}
	return out, true
}

// isString reports whether raw is the JSON string want.
func isString(raw json.RawMessage, want string) bool {
	var s string
	return json.Unmarshal(raw, &s) == nil && s == want
}

// plainID reports whether id is a JSON-RPC request id as the SDK echoes
// it: a string or a whole number.
func plainID(id json.RawMessage) bool {
	var v any
	if len(id) == 0 || json.Unmarshal(id, &v) != nil {
		return false
	}
	switch v.(type) {
	case string:
		return true
	case float64:
		return !bytes.ContainsAny(id, ".eE")
	}
	return false
}

// plainMeta checks a request's _meta (its keys already checked by
// fields) for the fast path: the stateless revision's protocol version,
// client capabilities (returned as JSON) that do not declare the Tasks
// extension, and client info the SDK would take (a name and a version).
func plainMeta(meta map[string]json.RawMessage) (caps string, ok bool) {
	if !isString(meta["io.modelcontextprotocol/protocolVersion"], ProtocolVersions[0]) {
		return "", false
	}
	raw := meta[metaClientCapabilities]
	var c struct {
		Extensions map[string]json.RawMessage `json:"extensions"`
	}
	if !isJSONObject(raw) || json.Unmarshal(raw, &c) != nil || c.Extensions[tasksExtension] != nil {
		return "", false
	}
	if info, ok := meta["io.modelcontextprotocol/clientInfo"]; ok {
		ci, ok := fields(info, "name", "version", "title", "websiteUrl", "icons", "description")
		if !ok || !isNonEmptyString(ci["name"]) || !isNonEmptyString(ci["version"]) {
			return "", false
		}
	}
	return string(raw), true
}

// fastProfile is the profile of a fast request, as withProfile finds it:
// the one its ProfileHeader names, else the one its _meta declares
// (fastClient). A header naming no configured profile is false: the SDK
// path answers the error.
func (s *Server) fastProfile(h http.Header, meta map[string]json.RawMessage) (*profiles.Profile, bool) {
	named := h.Get(ProfileHeader)
	if named == "" {
		return s.cfg.Profiles.Match(fastClient(meta)), true
	}
	p, err := s.profileOf(named, nil)
	return p, err == nil
}

// fastModel is the model a fast request names, as modelOf finds it: its
// ModelHeader, its _meta MetaModel (null as none), both only when they
// agree (pickModel). A value that is no string, not a model name, or one
// that disagrees is false: the SDK path answers the error.
func fastModel(h http.Header, meta map[string]json.RawMessage) (string, bool) {
	var named string
	if raw, ok := meta[MetaModel]; ok && json.Unmarshal(raw, &named) != nil {
		return "", false
	}
	model, err := pickModel(h.Get(ModelHeader), named)
	return model, err == nil
}

// fastClient is the client a fast request's _meta declares (clientOf):
// only its clientInfo and clientCapabilities are decoded.
func fastClient(meta map[string]json.RawMessage) profiles.Client {
	m := make(map[string]any, 2)
	for _, k := range []string{metaClientInfo, metaClientCapabilities} {
		var v any
		if raw, ok := meta[k]; ok && json.Unmarshal(raw, &v) == nil {
			m[k] = v
		}
	}
	return clientOf(m)
}

func isNonEmptyString(raw json.RawMessage) bool {
	var s string
	return json.Unmarshal(raw, &s) == nil && s != ""
}

// fastCall is callTool for a plain call: it waits for the result in the
// dispatcher's Call, and for an approver when the call is parked (unless
// the client's user may confirm it: askToConfirm); a client that goes
// away cancels the call.
func (s *Server) fastCall(ctx context.Context, id identity.Identity, p *fastParams, caps string) (mcp.Result, error) {
	if s.cfg.Tasks != nil && s.d.TaskSupport(p.Name) == toolwirev1.TaskSupport_TASK_SUPPORT_REQUIRED {
		// A client without the extension (plainMeta), as taskMode answers
		// it; without Tasks the call is admitted (and a toolset's refusal
		// answered) as on the SDK path.
		return nil, needsTasks(fmt.Sprintf("tool %q", p.Name))
	}
	args := string(p.Arguments)
	if args == "" || args == "null" {
		args = "{}"
	}
	cr := &toolwirev1.CallRequest{Tool: p.Name, ArgumentsJson: args, ClientCapabilitiesJson: caps, Model: p.Model}
	cres, err := s.d.Call(ctx, id, cr, s.d.Config().MaxWait)
	if err != nil {
		if cres != nil && cres.CallId != "" {
			s.cancel(ctx, id, cres.CallId)
		}
		return nil, err
	}
	resp := cres.Response
	if cres.State == toolwirev1.CallState_CALL_STATE_AWAITING_APPROVAL {
		if res := s.askToConfirm(resp, args, caps); res != nil {
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
		res, err := refused(resp, s.profileFrom(ctx))
		return mark(res, err, true)
	}
	if resp.GetInputRequired() != nil {
		return askInput(resp, true, caps, s.profileFrom(ctx))
	}
	res, err := result(resp, s.profileFrom(ctx))
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
		case jsonrpc.CodeInvalidParams, mcp.CodeMissingRequiredClientCapabilities, mcp.CodeUnsupportedProtocolVersion, mcp.CodeHeaderMismatch:
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
