package mcpserver

import (
	"context"
	"encoding/json"
	"net/http"
	"reflect"

	"github.com/modelcontextprotocol/go-sdk/jsonrpc"
	"github.com/modelcontextprotocol/go-sdk/mcp"

	"github.com/toolwire/toolwire/internal/profiles"
	toolwirev1 "github.com/toolwire/toolwire/pkg/toolproto/toolwire/v1"
)

// Client profiles (docs/mcp.md, "Client profiles"; internal/profiles):
// the endpoint renders tools/list and tools/call for the client that
// asks. The client is identified on each request, as nothing of a client
// is kept between requests: by the ProfileHeader when the request has one
// (a profile's name: the operator's way to name it in a client's
// configuration), else by the clientInfo and capabilities a client of the
// stateless revision declares in each request's _meta, matched against
// the configured profiles (first match wins); else (a client of an older
// revision, whose clientInfo only its initialize request carries) the
// default profile. Tools never see it.

// ProfileHeader names the rendering profile of a request's answers, on
// the MCP endpoint and on the Connect API alike.
const ProfileHeader = profiles.Header

// metaClientInfo is the request _meta key of a stateless client's
// clientInfo.
const metaClientInfo = "io.modelcontextprotocol/clientInfo"

// profileKey keys a request's profile in its context (withProfile).
type profileKey struct{}

// withProfile identifies the client of req and keeps its profile in ctx;
// a ProfileHeader naming no configured profile is invalid params.
func (s *Server) withProfile(ctx context.Context, req mcp.Request) (context.Context, error) {
	var h http.Header
	if ex := req.GetExtra(); ex != nil {
		h = ex.Header
	}
	var meta map[string]any
	// A request without params holds a typed nil.
	if p := req.GetParams(); p != nil && !reflect.ValueOf(p).IsNil() {
		meta = p.GetMeta()
	}
	p, err := s.profileOf(h.Get(ProfileHeader), meta)
	if err != nil {
		return nil, err
	}
	return context.WithValue(ctx, profileKey{}, p), nil
}

// profileOf is the profile named (a ProfileHeader's value) or, when
// none is, the one of the client the request _meta declares.
func (s *Server) profileOf(named string, meta map[string]any) (*profiles.Profile, error) {
	if named != "" {
		p, err := s.cfg.Profiles.Select(named)
		if err != nil {
			return nil, &jsonrpc.Error{Code: jsonrpc.CodeInvalidParams, Message: ProfileHeader + ": " + err.Error()}
		}
		return p, nil
	}
	return s.cfg.Profiles.Match(clientOf(meta)), nil
}

// profileFrom is the profile withProfile kept in ctx; the default one
// when it kept none.
func (s *Server) profileFrom(ctx context.Context) *profiles.Profile {
	if p, ok := ctx.Value(profileKey{}).(*profiles.Profile); ok {
		return p
	}
	return s.cfg.Profiles.Default()
}

// clientOf is the client a request's _meta declares (the stateless
// revision's clientInfo and clientCapabilities); the zero Client when it
// declares none. Bounded before matching: the name is cut
// (profiles.ClientName: a name longer than profiles.MaxClientName
// matches no client_names rule), and a client declaring more than
// profiles.MaxCapabilities capabilities or extensions is taken to
// declare none.
func clientOf(meta map[string]any) profiles.Client {
	c := profiles.Client{Capabilities: map[string]bool{}}
	if info, ok := meta[metaClientInfo].(map[string]any); ok {
		name, _ := info["name"].(string)
		c.Name = profiles.ClientName(name)
	}
	caps, _ := meta[metaClientCapabilities].(map[string]any)
	if len(caps) > profiles.MaxCapabilities {
		return c
	}
	for k, v := range caps {
		if k != "extensions" {
			c.Capabilities[k] = v != nil
			continue
		}
		ext, _ := v.(map[string]any)
		if len(ext) > profiles.MaxCapabilities {
			return profiles.Client{Name: c.Name, Capabilities: map[string]bool{}}
		}
		for name, e := range ext {
			c.Capabilities["extensions/"+name] = e != nil
		}
	}
	return c
}

// renderTool is a tool's MCP form t (registry.ExportOne's JSON) as p's
// clients get it: its _meta filtered and the widget meta generated from
// spec (profiles.Profile.ToolMeta), values kept as raw JSON. t itself
// when nothing changes. A _meta that is not a JSON object is left out
// (dropped reports it): the tool is listed without it.
func renderTool(t json.RawMessage, spec *toolwirev1.ToolSpec, p *profiles.Profile) (_ json.RawMessage, dropped bool, _ error) {
	if spec.GetMetaJson() == "" && (spec.GetUiTemplate() == "" || p.Widgets == "") {
		return t, false, nil
	}
	var tool map[string]json.RawMessage
	if err := json.Unmarshal(t, &tool); err != nil {
		return nil, false, err
	}
	var meta map[string]json.RawMessage
	if raw, ok := tool["_meta"]; ok {
		if err := json.Unmarshal(raw, &meta); err != nil || meta == nil {
			meta, dropped = nil, true
		}
	}
	meta = p.ToolMeta(meta, spec)
	delete(tool, "_meta")
	if len(meta) > 0 {
		raw, err := json.Marshal(meta)
		if err != nil {
			return nil, false, err
		}
		tool["_meta"] = raw
	}
	out, err := json.Marshal(tool)
	return out, dropped, err
}
