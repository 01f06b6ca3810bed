package mcpserver

import (
	"bytes"
	"encoding/json"
	"io"
	"net/http"

	"github.com/modelcontextprotocol/go-sdk/jsonrpc"
	"github.com/modelcontextprotocol/go-sdk/mcp"
)

// taskHeaders answers 400 with -32020 (header mismatch) a tasks/get,
// tasks/update or tasks/cancel of the stateless revision whose Mcp-Name
// header is not its taskId (or is missing), as the SDK answers a
// tools/call whose Mcp-Name is not its tool: a mismatch is refused before
// the request is read, the same way on every method. It reports whether
// it answered. A body it cannot read as one request is the SDK's, and
// task keeps its own check.
func (s *Server) taskHeaders(w http.ResponseWriter, r *http.Request) bool {
	h := r.Header
	method := h.Get("Mcp-Method")
	switch method {
	case "tasks/get", "tasks/update", "tasks/cancel":
	default:
		return false
	}
	if r.Method != http.MethodPost || h.Get("MCP-Protocol-Version") < ProtocolVersions[0] {
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
		ID     json.RawMessage `json:"id"`
		Method string          `json:"method"`
		Params struct {
			TaskID string `json:"taskId"`
		} `json:"params"`
	}
	if json.Unmarshal(body, &msg) != nil || msg.Method != method || h.Get("Mcp-Name") == msg.Params.TaskID {
		return false
	}
	writeRPC(w, msg.ID, nil, &jsonrpc.Error{Code: mcp.CodeHeaderMismatch,
		Message: "header mismatch: the Mcp-Name header must be the taskId"}, s.impl())
	return true
}
