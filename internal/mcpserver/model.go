package mcpserver

import (
	"reflect"

	"github.com/modelcontextprotocol/go-sdk/jsonrpc"
	"github.com/modelcontextprotocol/go-sdk/mcp"

	"github.com/toolwire/toolwire/internal/policy"
)

// Tools per model (docs/toolsets.md): a tools/list and a tools/call may
// say which model they are for, and the policy's toolset for the model's
// family applies (dispatch's VisibleToolsFor; the call's
// CallRequest.model). The model is named by the ModelHeader on the HTTP
// request (an agent service's configuration: one client, one model), or
// by MetaModel in the request's _meta (a client that switches models);
// both may be given only when they agree. Like the session it is a claim
// of the client, never a grant: a toolset only hides, substitutes and
// narrows.

// ModelHeader names the model of a request, on the MCP endpoint.
const ModelHeader = "Toolwire-Model"

// MetaModel, in a request's _meta, names the model the request is for (a
// string).
const MetaModel = "io.toolwire/model"

// modelOf is the model req names ("" = none): a value that is not a
// string, not a model name (policy.ModelNameRE) or disagrees with the
// header is invalid params.
func modelOf(req mcp.Request) (string, error) {
	var header string
	if ex := req.GetExtra(); ex != nil && ex.Header != nil {
		header = ex.Header.Get(ModelHeader)
	}
	var meta string
	if p := req.GetParams(); p != nil && !reflect.ValueOf(p).IsNil() {
		if v, ok := p.GetMeta()[MetaModel]; ok && v != nil {
			s, ok := v.(string)
			if !ok {
				return "", &jsonrpc.Error{Code: jsonrpc.CodeInvalidParams, Message: MetaModel + " must be a string"}
			}
			meta = s
		}
	}
	return pickModel(header, meta)
}

// pickModel is the model of a request whose ModelHeader is header and
// whose _meta MetaModel is meta ("" = not given): both only when they
// agree, and a model name (invalid params otherwise). The fast path
// (fast.go) takes the same.
func pickModel(header, meta string) (string, error) {
	model := header
	switch {
	case header == "":
		model = meta
	case meta != "" && meta != header:
		return "", &jsonrpc.Error{Code: jsonrpc.CodeInvalidParams, Message: ModelHeader + " and _meta " + MetaModel + " name different models"}
	}
	if model != "" && (len(model) > policy.MaxModelBytes || !policy.ModelNameRE.MatchString(model)) {
		return "", &jsonrpc.Error{Code: jsonrpc.CodeInvalidParams, Message: "the model is not a model name (letters, digits and . _ : / @ + -, at most 128 bytes)"}
	}
	return model, nil
}
