package dashboard

// Tools: the registry's tools, one tool's versions with a diff between two
// of them, and the MCP tools whose changed definition awaits an admin's
// approval.
//
// Decisions where the issue was silent:
//   - Admins see every tool; other viewers see the tools ListTools shows
//     their key (scopes and policy), as the API would.
//   - Executor configuration is shown to admins only (as GetTool does),
//     and even to them without values that may be secret: HTTP header
//     values, sandbox environment values, and the user info and query of
//     an HTTP URL template are replaced by [REDACTED] (names kept). A
//     diff whose versions differ only there says so.
//   - Specs are diffed as sorted, indented JSON (protojson with the proto
//     field names), the JSON held in string fields (input and output
//     schemas, _meta) expanded in place, so that a schema change is a
//     line change.
//   - A tool's versions are its registry keys versions.<tool>.<version>,
//     newest write first, at most maxVersions; "published" is the time of
//     the key's last write (workers write their version at start-up).
//   - A definition awaits approval when the tool is disabled and its MCP
//     definition hash is not the approved one; the Approve button carries
//     the hash the page showed, so a definition that changed again in
//     between is refused, not approved unseen.

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"net/http"
	"net/url"
	"regexp"
	"slices"
	"strings"
	"time"
	"unicode"

	"github.com/nats-io/nats.go/jetstream"
	"github.com/pmezard/go-difflib/difflib"
	"google.golang.org/protobuf/encoding/protojson"
	"google.golang.org/protobuf/proto"

	"github.com/toolwire/toolwire/internal/dispatch"
	"github.com/toolwire/toolwire/internal/redact"
	"github.com/toolwire/toolwire/internal/registry"
	toolwirev1 "github.com/toolwire/toolwire/pkg/toolproto/toolwire/v1"
)

// maxVersions bounds the versions a tool's page lists.
const maxVersions = 200

// hidden replaces configuration values that may be secret.
const hidden = redact.Redacted

// versionRe is what a version looks like (registry.Version: hex SHA-256),
// for versions read from a URL.
var versionRe = regexp.MustCompile(`^[0-9a-zA-Z:_-]{1,80}$`)

// toolsFor returns the current specs v may see, sorted by name: every
// tool for an installation admin, what ListTools shows v otherwise (a
// tenant's admin too: the tools are every tenant's).
func (s *Server) toolsFor(v *viewer) []*toolwirev1.ToolSpec {
	if !v.InstallationAdmin {
		return s.cfg.Core.VisibleTools(v.ID, registry.Filter{})
	}
	ents := s.cfg.Registry.List(registry.Filter{Scopes: []string{"*"}})
	out := make([]*toolwirev1.ToolSpec, len(ents))
	for i, e := range ents {
		out[i] = e.Spec
	}
	return out
}

// shownSpec is spec as v may be shown it: no executor configuration but
// for installation admins, and never a value that may be secret.
func shownSpec(v *viewer, spec *toolwirev1.ToolSpec) *toolwirev1.ToolSpec {
	c := proto.CloneOf(spec)
	if !v.InstallationAdmin {
		c.Config = nil
		return c
	}
	if h := c.GetHttp(); h != nil {
		for k := range h.Headers {
			h.Headers[k] = hidden
		}
		h.UrlTemplate = hideURLSecrets(h.UrlTemplate)
	}
	if sb := c.GetSandbox(); sb != nil {
		for k := range sb.Env {
			sb.Env[k] = hidden
		}
	}
	return c
}

// hideURLSecrets replaces the user info and the query of a URL template.
func hideURLSecrets(tmpl string) string {
	if i := strings.Index(tmpl, "://"); i >= 0 {
		rest := tmpl[i+3:]
		if at := strings.IndexByte(rest, '@'); at >= 0 && !strings.ContainsAny(rest[:at], "/?#") {
			tmpl = tmpl[:i+3] + hidden + "@" + rest[at+1:]
		}
	}
	if q := strings.IndexByte(tmpl, '?'); q >= 0 {
		tmpl = tmpl[:q+1] + hidden
	}
	return tmpl
}

// pendingDefinition is an MCP tool disabled until an admin approves its
// changed definition.
type pendingDefinition struct {
	Name, Reason, Hash, Approved string
}

// pendingDefinitions returns the tools among specs whose definition
// awaits approval.
func (s *Server) pendingDefinitions(ctx context.Context, specs []*toolwirev1.ToolSpec) ([]pendingDefinition, error) {
	var out []pendingDefinition
	for _, spec := range specs {
		cur, err := s.cfg.Registry.Get(spec.GetName()) // the stored spec: specs may have lost their config
		if err != nil || !cur.Spec.GetDisabled() || cur.Spec.GetMcp().GetDefinitionHash() == "" {
			continue
		}
		hash := cur.Spec.GetMcp().GetDefinitionHash()
		approved, _, err := s.cfg.Core.ApprovedDefinition(ctx, spec.GetName())
		if err != nil {
			return out, fmt.Errorf("reading the approved definitions: %w", err)
		}
		if approved != hash {
			out = append(out, pendingDefinition{Name: spec.GetName(), Reason: cur.Spec.GetDisabledReason(), Hash: hash, Approved: approved})
		}
	}
	return out, nil
}

type toolsData struct {
	Tools   []*toolwirev1.ToolSpec
	Pending []pendingDefinition
	Done    string
	Error   string
}

// toolsPage lists the registry's tools and the definitions awaiting
// approval.
func (s *Server) toolsPage(w http.ResponseWriter, r *http.Request, v *viewer) {
	specs := s.toolsFor(v)
	d := toolsData{Tools: specs, Done: doneMessage(r)}
	var err error
	if d.Pending, err = s.pendingDefinitions(r.Context(), specs); err != nil {
		d.Error = err.Error()
	}
	s.render(w, r, http.StatusOK, "tools", v, "Tools", "tools", d)
}

// toolVersion is one stored version of a tool.
type toolVersion struct {
	Version   string
	Published time.Time
	Current   bool
	spec      *toolwirev1.ToolSpec
}

// toolVersions reads the stored versions of tool name, newest write
// first, at most maxVersions.
func (s *Server) toolVersions(ctx context.Context, name, current string) ([]toolVersion, error) {
	w, err := s.cfg.Streams.Registry.WatchFiltered(ctx, []string{registry.VersionKey(name, "*")}, jetstream.IgnoreDeletes())
	if err != nil {
		return nil, fmt.Errorf("reading the versions of %s: %w", name, err)
	}
	defer func() { _ = w.Stop() }()
	var out []toolVersion
	for {
		select {
		case <-ctx.Done():
			return nil, fmt.Errorf("reading the versions of %s: %w", name, ctx.Err())
		case e, ok := <-w.Updates():
			if !ok || e == nil { // nil: every stored version delivered
				slices.SortStableFunc(out, func(a, b toolVersion) int { return b.Published.Compare(a.Published) })
				if len(out) > maxVersions {
					out = out[:maxVersions]
				}
				return out, nil
			}
			spec := &toolwirev1.ToolSpec{}
			if proto.Unmarshal(e.Value(), spec) != nil || spec.GetVersion() == "" {
				continue
			}
			out = append(out, toolVersion{Version: spec.GetVersion(), Published: e.Created(), Current: spec.GetVersion() == current, spec: spec})
		}
	}
}

// specJSON is spec as sorted, indented JSON, with the JSON its string
// fields hold expanded in place.
func specJSON(spec *toolwirev1.ToolSpec) (string, error) {
	b, err := protojson.MarshalOptions{UseProtoNames: true}.Marshal(spec)
	if err != nil {
		return "", fmt.Errorf("encoding the spec: %w", err)
	}
	var m map[string]any
	if err := json.Unmarshal(b, &m); err != nil {
		return "", fmt.Errorf("encoding the spec: %w", err)
	}
	for _, k := range []string{"input_schema_json", "output_schema_json", "meta_json"} {
		if s, ok := m[k].(string); ok {
			var inner any
			if json.Unmarshal([]byte(s), &inner) == nil {
				m[k] = inner
			}
		}
	}
	out, err := json.MarshalIndent(m, "", "  ") // maps: keys sorted
	if err != nil {
		return "", fmt.Errorf("encoding the spec: %w", err)
	}
	return string(out), nil
}

// diffLine is one line of a unified diff, with its kind (a CSS class):
// "add", "del", "muted" (a hunk header) or "" (context and headers).
type diffLine struct {
	Kind, Text string
}

// unifiedDiff is the line diff of a and b, three lines of context.
func unifiedDiff(a, b, nameA, nameB string) ([]diffLine, error) {
	text, err := difflib.GetUnifiedDiffString(difflib.UnifiedDiff{A: difflib.SplitLines(a), B: difflib.SplitLines(b),
		FromFile: nameA, ToFile: nameB, Context: 3})
	if err != nil {
		return nil, fmt.Errorf("diffing: %w", err)
	}
	var out []diffLine
	for _, l := range strings.Split(strings.TrimSuffix(text, "\n"), "\n") {
		if l == "" {
			continue
		}
		kind := ""
		switch {
		case strings.HasPrefix(l, "+++"), strings.HasPrefix(l, "---"):
		case strings.HasPrefix(l, "+"):
			kind = "add"
		case strings.HasPrefix(l, "-"):
			kind = "del"
		case strings.HasPrefix(l, "@@"):
			kind = "muted" // a hunk header
		}
		out = append(out, diffLine{Kind: kind, Text: reveal(l)})
	}
	return out, nil
}

type toolData struct {
	Spec     *toolwirev1.ToolSpec // as v may see it
	JSON     string
	Versions []toolVersion
	Pending  *pendingDefinition
	// Approver is who last approved a definition of the tool (MCP tools).
	Approver *registry.Approver
	A, B     string
	Diff     []diffLine
	// SameShown: the two versions differ only in values the page hides.
	SameShown bool
	// DescA and DescB are the two versions' descriptions, whole, when they
	// differ: a changed description is where a malicious definition hides
	// its instructions, so it is shown as text, wrapped, side by side.
	DescA, DescB string
	// DescALen and DescBLen are their lengths in bytes, as stored.
	DescALen, DescBLen int
	DescDiff           bool
	Done               string
	Error              string
}

// toolPage shows one tool: its current spec, its versions, and the diff
// of versions a and b (?a=&b=; by default the one before the current and
// the current; a alone: against the current).
func (s *Server) toolPage(w http.ResponseWriter, r *http.Request, v *viewer) {
	spec, ok := s.toolOf(v, r.PathValue("name"))
	if !ok {
		s.refuse(w, r, v, http.StatusNotFound, "no such tool")
		return
	}
	d := toolData{Spec: shownSpec(v, spec), Done: doneMessage(r)}
	var err error
	if d.JSON, err = specJSON(d.Spec); err != nil {
		d.Error = err.Error()
	}
	d.JSON = reveal(d.JSON)
	if p, err := s.pendingDefinitions(r.Context(), []*toolwirev1.ToolSpec{spec}); err == nil && len(p) == 1 {
		d.Pending = &p[0]
	}
	if spec.GetMcp() != nil {
		if a, ok, err := s.cfg.Core.ToolApprover(r.Context(), spec.GetName()); err == nil && ok {
			d.Approver = &a
		}
	}
	if d.Versions, err = s.toolVersions(r.Context(), spec.GetName(), spec.GetVersion()); err != nil {
		d.Error = err.Error()
		s.render(w, r, http.StatusBadGateway, "tool", v, "Tool "+spec.GetName(), "tools", d)
		return
	}
	q := r.URL.Query()
	d.A, d.B = q.Get("a"), q.Get("b")
	if d.A == "" && d.B == "" && len(d.Versions) > 1 {
		d.B = spec.GetVersion()
		for _, tv := range d.Versions {
			if tv.Version != d.B {
				d.A = tv.Version
				break
			}
		}
	}
	if d.A != "" && d.B == "" {
		d.B = spec.GetVersion() // a version against the current one
	}
	status := http.StatusOK
	if d.A != "" || d.B != "" {
		if err := s.diffVersions(v, &d); err != nil {
			d.Error, status = err.Error(), http.StatusBadRequest
		}
	}
	s.render(w, r, status, "tool", v, "Tool "+spec.GetName(), "tools", d)
}

// diffVersions fills d.Diff with the diff of versions d.A and d.B, both
// among d.Versions.
func (s *Server) diffVersions(v *viewer, d *toolData) error {
	find := func(which, ver string) (*toolwirev1.ToolSpec, error) {
		if !versionRe.MatchString(ver) {
			return nil, fmt.Errorf("%s: not a version", which)
		}
		for _, tv := range d.Versions {
			if tv.Version == ver {
				return tv.spec, nil
			}
		}
		return nil, fmt.Errorf("%s: no version %s of this tool", which, short(ver))
	}
	a, err := find("a", d.A)
	if err != nil {
		return err
	}
	b, err := find("b", d.B)
	if err != nil {
		return err
	}
	ja, err := specJSON(shownSpec(v, a))
	if err != nil {
		return err
	}
	jb, err := specJSON(shownSpec(v, b))
	if err != nil {
		return err
	}
	if d.Diff, err = unifiedDiff(ja, jb, "version "+short(d.A), "version "+short(d.B)); err != nil {
		return err
	}
	d.SameShown = len(d.Diff) == 0 && d.A != d.B
	if a.GetDescription() != b.GetDescription() {
		d.DescA, d.DescB, d.DescDiff = reveal(a.GetDescription()), reveal(b.GetDescription()), true
		d.DescALen, d.DescBLen = len(a.GetDescription()), len(b.GetDescription())
	}
	return nil
}

// toolOf returns the current spec of tool name when v may see it.
func (s *Server) toolOf(v *viewer, name string) (*toolwirev1.ToolSpec, bool) {
	if !registry.NameRe.MatchString(name) {
		return nil, false
	}
	e, err := s.cfg.Registry.Get(name)
	if err != nil {
		return nil, false
	}
	if v.InstallationAdmin {
		return e.Spec, true
	}
	visible := s.cfg.Core.VisibleTools(v.ID, registry.Filter{NameGlob: name})
	return e.Spec, len(visible) == 1
}

// approveTool approves the definition of an MCP tool that its change
// disabled: exactly the definition hash the page showed.
func (s *Server) approveTool(w http.ResponseWriter, r *http.Request, v *viewer) {
	name := r.PathValue("name")
	hash := strings.TrimSpace(r.PostForm.Get("hash"))
	if _, ok := s.toolOf(v, name); !ok {
		s.refuse(w, r, v, http.StatusNotFound, "no such tool")
		return
	}
	if hash == "" || len(hash) > 256 {
		s.refuse(w, r, v, http.StatusBadRequest, "the form names no definition hash: reload the page and try again")
		return
	}
	_, err := s.cfg.Core.ApproveTool(r.Context(), v.ID, name, hash)
	switch {
	case errors.Is(err, dispatch.ErrNeedAdminScope):
		s.refuse(w, r, v, http.StatusForbidden, err.Error())
		return
	case errors.Is(err, registry.ErrNotFound):
		s.refuse(w, r, v, http.StatusNotFound, "no such tool")
		return
	case errors.Is(err, dispatch.ErrNoDefinition), errors.Is(err, dispatch.ErrDefinitionChanged):
		s.refuse(w, r, v, http.StatusConflict, err.Error()+": reload the page to see the definition as it is now")
		return
	case err != nil:
		s.refuse(w, r, v, http.StatusBadGateway, "approving failed: "+err.Error())
		return
	}
	s.log.Info("dashboard tool definition approved", "who", v.who(), "tool", name, "definition_hash", hash)
	http.Redirect(w, r, Prefix+"/tools/"+url.PathEscape(name)+"?done="+url.QueryEscape("definition "+short(hash)+" approved; the worker enables the tool"), http.StatusSeeOther)
}

// short is the first 12 characters of a hash.
func short(h string) string {
	if len(h) > 12 {
		return h[:12]
	}
	return h
}

// doneMessage is the done= message a redirect after an action carries,
// bounded.
func doneMessage(r *http.Request) string {
	m := r.URL.Query().Get("done")
	if len(m) > 300 {
		m = m[:300]
	}
	return m
}

// invisible reports whether r shows as nothing (or as a space) in a
// browser: format characters (Cf), variation selectors, controls other
// than newlines and tabs, line and paragraph separators, and the
// fillers that render blank.
func invisible(r rune) bool {
	switch r {
	case '\n', '\t', '\r':
		return false
	case 0x034F, 0x115F, 0x1160, 0x2028, 0x2029, 0x3164, 0xFFA0:
		return true
	}
	return unicode.Is(unicode.Cf, r) || unicode.Is(unicode.Variation_Selector, r) || unicode.IsControl(r)
}

// reveal makes the characters that show as nothing visible in a text
// shown for review: format characters (zero-width spaces and joiners,
// bidi overrides and isolates, Unicode tag characters — the usual ways to
// hide an instruction in a tool description) become ⟦U+XXXX⟧. Newlines
// and tabs stay as they are.
func reveal(s string) string {
	var b strings.Builder
	for _, r := range s {
		if invisible(r) {
			fmt.Fprintf(&b, "⟦U+%04X⟧", r)
			continue
		}
		b.WriteRune(r)
	}
	return b.String()
}
