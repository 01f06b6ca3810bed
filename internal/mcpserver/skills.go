package mcpserver

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"strings"

	"github.com/modelcontextprotocol/go-sdk/jsonrpc"
	"github.com/modelcontextprotocol/go-sdk/mcp"

	"github.com/toolwire/toolwire/internal/dispatch"
	"github.com/toolwire/toolwire/internal/identity"
	"github.com/toolwire/toolwire/internal/skills"
	toolwirev1 "github.com/toolwire/toolwire/pkg/toolproto/toolwire/v1"
)

// MCP's Skills extension (SEP-2640), served from the `skill` tool's
// registry entry (docs/skills.md): skills/list and skills/get list the
// skills the caller may load, each with the digest and size of every
// file; each file is a skill:// resource, read with resources/read as a
// call of the `skill` tool, so admission (scopes, toolsets, the policy,
// approvals, limits, the audit) decides every read as it decides a
// tools/call of it. resources/list adds each listed skill's SKILL.md;
// resources/directory/read lists a listed skill's directories from its
// manifest.
const skillsExtension = "io.modelcontextprotocol/skills"

// skillsParams are the params of skills/list, skills/get and
// resources/directory/read.
type skillsParams struct {
	mcp.ParamsBase
	Cursor string `json:"cursor,omitempty"`
	URI    string `json:"uri,omitempty"`
}

// skillEntry is one skill as skills/list and skills/get answer it.
type skillEntry struct {
	URI         string          `json:"uri"`
	Frontmatter json.RawMessage `json:"frontmatter"`
	Resources   []skillResource `json:"resources"`
}

// skillResource is one file of a skill's entry.
type skillResource struct {
	URI    string `json:"uri"`
	Digest string `json:"digest"`
	Size   int64  `json:"size"`
}

// addSkillMethods registers the extension's methods with the SDK, which
// refuses a method it does not know; the receiving middleware answers
// them (skillsMethod, readSkillDirectory).
func addSkillMethods(srv *mcp.Server) {
	unused := func(context.Context, *mcp.ServerSession, *skillsParams) (*reply, error) {
		return nil, errors.New("mcpserver: skills methods are answered by the receiving middleware")
	}
	for _, m := range []string{"skills/list", "skills/get", directoryRead} {
		if err := mcp.AddReceivingCustomMethod(srv, m, unused); err != nil {
			panic(err) // only a name the SDK has as a standard method
		}
	}
}

// skillsFor returns the skills the caller of req may load (dispatch.SkillsFor,
// for the request's session and model).
func (s *Server) skillsFor(ctx context.Context, id identity.Identity, req mcp.Request) ([]*toolwirev1.Skill, error) {
	var meta mcp.Meta
	switch p := req.GetParams().(type) {
	case *skillsParams:
		if p != nil {
			meta = p.Meta
		}
	case *mcp.ReadResourceParams:
		if p != nil {
			meta = p.Meta
		}
	case *mcp.ListResourcesParams:
		if p != nil {
			meta = p.Meta
		}
	}
	session, err := sessionOf(meta)
	if err != nil {
		return nil, err
	}
	model, err := modelOf(req)
	if err != nil {
		return nil, err
	}
	_, sks, err := s.d.SkillsFor(ctx, id, dispatch.ListFor{Session: session, Model: model})
	return sks, err
}

// directoryRead is the extension's optional method (declared with
// directoryRead: true): the direct children of a skill's directory.
const directoryRead = "resources/directory/read"

// directoryMIMEType is the media type of a child that is a directory.
const directoryMIMEType = "inode/directory"

// readSkillDirectory answers resources/directory/read of a directory of
// a skill the caller may load (skill://<name>, or a directory under it),
// from the skill's manifest in the registry, as skills/list answers: the
// directory's files (name, media type, size) and its subdirectories
// (inode/directory), on one page. A URI that is not such a directory (a
// file, a skill the caller may not load, another scheme) is -32602.
func (s *Server) readSkillDirectory(ctx context.Context, id identity.Identity, req mcp.Request) (mcp.Result, error) {
	p, _ := req.GetParams().(*skillsParams)
	if p == nil {
		p = &skillsParams{}
	}
	if p.Cursor != "" {
		return nil, &jsonrpc.Error{Code: jsonrpc.CodeInvalidParams, Message: "invalid cursor: " + directoryRead + " answers on one page"}
	}
	sks, err := s.skillsFor(ctx, id, req)
	if err != nil {
		return nil, err
	}
	children := skillDirectory(sks, p.URI)
	if children == nil {
		return nil, &jsonrpc.Error{Code: jsonrpc.CodeInvalidParams, Message: fmt.Sprintf("not a directory of a skill served: %.200q", p.URI)}
	}
	// Private, as the listing it comes from.
	base := map[string]any{"resources": children, "ttlMs": 0, "cacheScope": "private"}
	if ss, _ := req.GetSession().(*mcp.ServerSession); statelessClient(ss) {
		base["resultType"] = "complete"
	}
	return newReply(base)
}

// skillDirectory returns the direct children of the directory uri names
// in one of sks, subdirectories (named by their first file's path) in
// the order of their first file; nil when uri is not a directory of one.
func skillDirectory(sks []*toolwirev1.Skill, uri string) []*mcp.Resource {
	rest, ok := strings.CutPrefix(uri, skills.URIScheme)
	if !ok {
		return nil
	}
	name, dir, below := strings.Cut(strings.TrimSuffix(rest, "/"), "/") // one trailing slash is the directory
	if below && skills.CheckPath(dir) != nil {
		return nil // written as no manifest path is (an empty element, "..", %-escapes)
	}
	for _, sk := range sks {
		if sk.GetName() != name {
			continue
		}
		prefix := ""
		if dir != "" {
			prefix = dir + "/"
		}
		var out []*mcp.Resource
		seen := map[string]bool{}
		for _, f := range sk.GetFiles() {
			below, ok := strings.CutPrefix(f.GetPath(), prefix)
			if !ok {
				continue
			}
			if sub, _, nested := strings.Cut(below, "/"); nested {
				if !seen[sub] {
					seen[sub] = true
					out = append(out, &mcp.Resource{URI: skills.URI(name, prefix+sub), Name: sub, MIMEType: directoryMIMEType})
				}
				continue
			}
			out = append(out, &mcp.Resource{URI: skills.URI(name, f.GetPath()), Name: below, MIMEType: f.GetMimeType(), Size: f.GetSize()})
		}
		return out // nil when no file is below: not a directory
	}
	return nil
}

// skillsMethod answers skills/list (every skill on one page: a `skill`
// tool serves at most skills.MaxSkills) and skills/get (-32602 for a URI
// that is not the SKILL.md of a skill the caller may load).
func (s *Server) skillsMethod(ctx context.Context, id identity.Identity, method string, req mcp.Request) (mcp.Result, error) {
	p, _ := req.GetParams().(*skillsParams)
	if p == nil {
		p = &skillsParams{}
	}
	sks, err := s.skillsFor(ctx, id, req)
	if err != nil {
		return nil, err
	}
	// Private: the list is this caller's (scopes, toolsets and policy).
	base := map[string]any{"ttlMs": 0, "cacheScope": "private"}
	if ss, _ := req.GetSession().(*mcp.ServerSession); statelessClient(ss) {
		base["resultType"] = "complete"
	}
	if method == "skills/list" {
		if p.Cursor != "" {
			return nil, &jsonrpc.Error{Code: jsonrpc.CodeInvalidParams, Message: "invalid cursor: skills/list answers on one page"}
		}
		entries := make([]skillEntry, 0, len(sks))
		for _, sk := range sks {
			entries = append(entries, entryOf(sk))
		}
		base["skills"] = entries
		return newReply(base)
	}
	for _, sk := range sks {
		if p.URI == skills.URI(sk.GetName(), skills.InstructionsFile) {
			base["skill"] = entryOf(sk)
			return newReply(base)
		}
	}
	return nil, &jsonrpc.Error{Code: jsonrpc.CodeInvalidParams, Message: fmt.Sprintf("no skill served at %.200q", p.URI)}
}

// entryOf is sk's entry: its SKILL.md's URI, its front matter (name and
// description only from a worker older than Skill.frontmatter) and every
// file, SKILL.md first.
func entryOf(sk *toolwirev1.Skill) skillEntry {
	fm := json.RawMessage(sk.GetFrontmatter())
	if len(fm) == 0 {
		fm, _ = json.Marshal(map[string]string{"name": sk.GetName(), "description": sk.GetDescription()})
	}
	e := skillEntry{URI: skills.URI(sk.GetName(), skills.InstructionsFile), Frontmatter: fm, Resources: make([]skillResource, 0, len(sk.GetFiles()))}
	for _, f := range sk.GetFiles() {
		e.Resources = append(e.Resources, skillResource{URI: skills.URI(sk.GetName(), f.GetPath()), Digest: "sha256:" + f.GetSha256(), Size: f.GetSize()})
	}
	return e
}

// isSkillURI reports whether uri is a skill:// resource.
func isSkillURI(uri string) bool { return strings.HasPrefix(uri, skills.URIScheme) }

// readSkill answers resources/read of a skill's file: a call of the
// `skill` tool with the skill's name and the file's path, decided by
// admission as any call, whose answer must be that file: the URI asked
// for, and the size and SHA-256 the registry's manifest gives it (a
// worker's answer is not believed unchecked). A file that is not a
// listed skill's is "Resource not found"; a refused or failed call is
// its error.
func (s *Server) readSkill(ctx context.Context, id identity.Identity, req *mcp.ReadResourceRequest) (mcp.Result, error) {
	uri := req.Params.URI
	sks, err := s.skillsFor(ctx, id, req)
	if err != nil {
		return nil, err
	}
	sk, file := skillFile(sks, uri)
	if file == nil {
		return nil, mcp.ResourceNotFoundError(uri)
	}
	args, _ := json.Marshal(skills.Args{Name: sk.GetName(), Resource: file.GetPath()})
	// The read is a call of the request's session and model, as a
	// tools/call of `skill` would be: its mode's rules, grants, budgets
	// and audit apply.
	session, err := sessionOf(req.Params.Meta)
	if err != nil {
		return nil, err
	}
	model, err := modelOf(req)
	if err != nil {
		return nil, err
	}
	cres, err := s.d.Call(ctx, id, &toolwirev1.CallRequest{Tool: skills.ToolName, ArgumentsJson: string(args), Session: session, Model: model}, s.d.Config().MaxWait)
	if err != nil {
		if cres != nil && cres.CallId != "" {
			s.cancel(ctx, id, cres.CallId)
		}
		return nil, err
	}
	resp := cres.GetResponse()
	if cres.GetState() == toolwirev1.CallState_CALL_STATE_AWAITING_APPROVAL {
		// A read has no way to wait for a person, and a parked read nobody
		// collects would pile up approval requests (clients read listed
		// skills freely): it is withdrawn.
		s.cancel(ctx, id, cres.GetCallId())
		return nil, &jsonrpc.Error{Code: jsonrpc.CodeInvalidRequest, Message: fmt.Sprintf(
			"reading %s needs a person's approval: call the %s tool for it, whose call waits for the approval", uri, skills.ToolName)}
	}
	if cres.GetState() != toolwirev1.CallState_CALL_STATE_DONE {
		if resp, err = s.await(ctx, id, cres.GetCallId()); err != nil {
			s.cancel(ctx, id, cres.GetCallId())
			return nil, err
		}
	}
	if !resp.GetOk() {
		return nil, &jsonrpc.Error{Code: jsonrpc.CodeInternalError, Message: fmt.Sprintf("reading %s: %s", uri, resp.GetError().GetMessage())}
	}
	c, err := skillContents(resp, uri, file)
	if err != nil {
		s.log.WarnContext(ctx, "a skill's file does not match its manifest", "uri", uri, "call_id", cres.GetCallId(), "err", err)
		return nil, &jsonrpc.Error{Code: jsonrpc.CodeInternalError, Message: fmt.Sprintf("reading %s: the answer is not the file its skill lists", uri)}
	}
	// Private: whether the caller may read it is the caller's.
	res := &mcp.ReadResourceResult{Contents: []*mcp.ResourceContents{c}, Cacheable: mcp.Cacheable{CacheScope: "private"}}
	ss, _ := req.GetSession().(*mcp.ServerSession)
	if !statelessClient(ss) {
		return res, nil
	}
	b, err := json.Marshal(res)
	if err != nil {
		return nil, fmt.Errorf("toolwire: %w", err)
	}
	return &reply{raw: markComplete(b)}, nil
}

// skillFile finds the skill of sks and its file that uri names.
func skillFile(sks []*toolwirev1.Skill, uri string) (*toolwirev1.Skill, *toolwirev1.SkillFile) {
	for _, sk := range sks {
		prefix := skills.URI(sk.GetName(), "")
		path, ok := strings.CutPrefix(uri, prefix)
		if !ok {
			continue
		}
		for _, f := range sk.GetFiles() {
			if f.GetPath() == path {
				return sk, f
			}
		}
	}
	return nil, nil
}

// skillContents is the file the `skill` tool answered with, checked
// against its manifest entry: one embedded resource at uri whose bytes
// have the listed size and SHA-256.
func skillContents(resp *toolwirev1.ToolResponse, uri string, f *toolwirev1.SkillFile) (*mcp.ResourceContents, error) {
	cs := resp.GetContent()
	if len(cs) != 1 || cs[0].GetResource() == nil {
		return nil, errors.New("not one embedded resource")
	}
	r := cs[0].GetResource()
	if r.GetUri() != uri {
		return nil, fmt.Errorf("the resource is %.200q", r.GetUri())
	}
	b := []byte(r.GetText())
	if _, blob := r.GetContents().(*toolwirev1.EmbeddedResource_Blob); blob {
		b = r.GetBlob()
	}
	sum := sha256.Sum256(b)
	if int64(len(b)) != f.GetSize() || hex.EncodeToString(sum[:]) != f.GetSha256() {
		return nil, errors.New("its size or SHA-256 is not the manifest's")
	}
	c := &mcp.ResourceContents{URI: uri, MIMEType: f.GetMimeType()}
	if _, blob := r.GetContents().(*toolwirev1.EmbeddedResource_Blob); blob {
		c.Blob = b
	} else {
		c.Text = r.GetText()
	}
	return c, nil
}

// listSkillResources appends to res (resources/list's answer) the
// SKILL.md of each skill the caller may load, named and described by its
// front matter, on the first page.
func (s *Server) listSkillResources(ctx context.Context, id identity.Identity, req mcp.Request, res mcp.Result) (mcp.Result, error) {
	lr, ok := res.(*mcp.ListResourcesResult)
	if !ok || lr == nil {
		lr = &mcp.ListResourcesResult{}
	}
	// Private, with skills or without: which skills are listed is the
	// caller's.
	lr.CacheScope, lr.TTLMs = "private", 0
	if p, _ := req.GetParams().(*mcp.ListResourcesParams); p != nil && p.Cursor != "" {
		return lr, nil // on the first page only
	}
	sks, err := s.skillsFor(ctx, id, req)
	if err != nil {
		return nil, err
	}
	for _, sk := range sks {
		f := sk.GetFiles()[0]
		lr.Resources = append(lr.Resources, &mcp.Resource{URI: skills.URI(sk.GetName(), f.GetPath()), Name: sk.GetName(),
			Description: sk.GetDescription(), MIMEType: f.GetMimeType(), Size: f.GetSize()})
	}
	return lr, nil
}
