package mcpserver

import (
	"context"
	"errors"
	"fmt"
	"net/url"
	"strconv"
	"strings"

	"github.com/modelcontextprotocol/go-sdk/jsonrpc"
	"github.com/modelcontextprotocol/go-sdk/mcp"
	"github.com/oklog/ulid/v2"

	"github.com/toolwire/toolwire/internal/dispatch"
	"github.com/toolwire/toolwire/internal/identity"
	toolwirev1 "github.com/toolwire/toolwire/pkg/toolproto/toolwire/v1"
)

// Large results: a response cut to the worker's inline limits (its meta
// says truncated; the whole output is in the blob store) comes with a
// resource_link to the whole output text, outputPrefix + call id +
// "/output", which resources/read on any replica reads (dispatch.GetOutput),
// a page of at most outputPage bytes at a time: a page that does not reach
// the end names the next one (the same URI with ?offset=) in its _meta.
// Nothing is cut silently.

// outputPrefix starts the URI of a call's whole output.
const outputPrefix = "toolwire://calls/"

// outputPage is the most text one resources/read returns.
const outputPage = 1 << 20

// MetaNext names, in a page's _meta, the URI of the next page.
const MetaNext = "io.toolwire/next"

// outputURI is the URI of call id's whole output text from offset.
func outputURI(callID string, offset int64) string {
	u := outputPrefix + callID + "/output"
	if offset > 0 {
		u += "?offset=" + strconv.FormatInt(offset, 10)
	}
	return u
}

// outputLink is the resource_link of a cut response's whole output.
func outputLink(resp *toolwirev1.ToolResponse) *mcp.ResourceLink {
	return &mcp.ResourceLink{URI: outputURI(resp.GetCallId(), 0), Name: "output-" + resp.GetCallId(),
		Title: "The whole output of call " + resp.GetCallId(), MIMEType: "text/plain",
		Description: "The result above is cut to its inline limits; read this resource for all of it."}
}

// isOutputURI reports whether uri names a call's output.
func isOutputURI(uri string) bool { return strings.HasPrefix(uri, outputPrefix) }

// readOutput answers resources/read of a call's output: one page of its
// text, for the caller's tenant.
func (s *Server) readOutput(ctx context.Context, id identity.Identity, uri string) (*mcp.ReadResourceResult, error) {
	u, err := url.Parse(uri)
	if err != nil || u.Scheme != "toolwire" || u.Host != "calls" {
		return nil, mcp.ResourceNotFoundError(uri)
	}
	callID, ok := strings.CutSuffix(strings.TrimPrefix(u.Path, "/"), "/output")
	if _, err := ulid.ParseStrict(callID); err != nil || !ok {
		return nil, mcp.ResourceNotFoundError(uri)
	}
	var offset int64
	if o := u.Query().Get("offset"); o != "" {
		if offset, err = strconv.ParseInt(o, 10, 64); err != nil || offset < 0 {
			return nil, &jsonrpc.Error{Code: jsonrpc.CodeInvalidParams, Message: "offset must be a byte offset"}
		}
	}
	out, err := s.d.GetOutput(ctx, id, &toolwirev1.GetOutputRequest{CallId: callID, Offset: offset, Limit: outputPage})
	switch {
	case errors.Is(err, dispatch.ErrOutputGone):
		return nil, mcp.ResourceNotFoundError(uri) // the whole output is not stored (any more)
	case err != nil:
		return nil, fmt.Errorf("toolwire: %w", err)
	case out.GetState() == toolwirev1.CallState_CALL_STATE_UNKNOWN:
		return nil, mcp.ResourceNotFoundError(uri) // as for a made-up id: another tenant's call too
	case out.GetState() != toolwirev1.CallState_CALL_STATE_DONE:
		return nil, &jsonrpc.Error{Code: jsonrpc.CodeInvalidParams, Message: "call " + callID + " has not finished"}
	}
	c := &mcp.ResourceContents{URI: uri, MIMEType: "text/plain; charset=utf-8", Text: out.GetText()}
	res := &mcp.ReadResourceResult{Contents: []*mcp.ResourceContents{c}}
	if !out.GetEof() {
		res.Meta = mcp.Meta{MetaNext: outputURI(callID, out.GetNextOffset())}
	}
	return res, nil
}
