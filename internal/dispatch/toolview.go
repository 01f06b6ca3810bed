package dispatch

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"slices"
	"strings"

	"google.golang.org/protobuf/proto"

	"github.com/toolwire/toolwire/internal/identity"
	"github.com/toolwire/toolwire/internal/policy"
	"github.com/toolwire/toolwire/internal/redact"
	"github.com/toolwire/toolwire/internal/registry"
	"github.com/toolwire/toolwire/internal/sessionview"
	toolwirev1 "github.com/toolwire/toolwire/pkg/toolproto/toolwire/v1"
)

// toolView is the spec as ListTools and GetTool show it to id. Executor
// configuration (a sandbox tool's argv, environment and paths, an HTTP
// tool's URL and body templates, headers, allowed hosts and networks, an
// MCP tool's server, tool and definition hash) is the installation's
// operators': it is shown to installation admins only (the "admin" and
// "installation" scopes: identity.Identity.AdministersInstallation — a
// tool serves every tenant, so a tenant's admin does not see how it
// runs), and cleared (no config set, the executor type kept) for
// everyone else. A caller needs the name, docs, schemas, annotations and
// limits to call a tool, never how it runs.
func toolView(id identity.Identity, spec *toolwirev1.ToolSpec) *toolwirev1.ToolSpec {
	if spec.GetConfig() == nil || id.AdministersInstallation() {
		return spec
	}
	c := proto.CloneOf(spec)
	c.Config = nil
	return c
}

// listable returns whether id may see a tool in ListTools, GetTool and
// the unknown-tool hint as far as the policy goes: a tool that an
// unconditional deny covers for the caller (policy.Policy.Hidden) is
// hidden. Its calls are still decided, and denied, by the policy. Without
// a session, a caller is in the policy's sessions.default_mode, as its
// calls are.
func (d *Dispatcher) listable(id identity.Identity) func(name string) bool {
	return d.listableIn(id, "")
}

// listableIn is listable for a caller whose session is in mode ("" =
// none: the policy's sessions.default_mode, if any): the mode's layer
// hides too. A mode the policy in force does not declare hides every
// tool, as admission refuses every call in it (MODE_RESTRICTED).
func (d *Dispatcher) listableIn(id identity.Identity, mode string) func(name string) bool {
	p := d.policyFor(id.Tenant)
	if p == nil {
		return func(string) bool { return true }
	}
	mode = p.Sessions().ModeOf(mode)
	if mode != "" && !p.HasMode(mode) {
		return func(string) bool { return false }
	}
	caller := &toolwirev1.Caller{Tenant: id.Tenant, Agent: id.Agent, Scopes: id.Scopes, Mode: mode}
	return func(name string) bool { return !p.Hidden(name, caller) }
}

// visibleEntries drops from ents the tools the policy hides from id in
// mode ("" = none).
func (d *Dispatcher) visibleEntries(id identity.Identity, mode string, ents []*registry.Entry) []*registry.Entry {
	ok := d.listableIn(id, mode)
	out := ents[:0]
	for _, e := range ents {
		if ok(e.Spec.Name) {
			out = append(out, e)
		}
	}
	return out
}

// VisibleTools returns the specs id may see as registered (the
// dashboard's tools page): the registry's tools that match f and id's
// scopes, less those the policy hides from id (in the policy's
// sessions.default_mode, when it has one: the mode of calls without a
// session), executor configuration only for installation admins. The
// specs' definitions are not applied: they are shown with the spec.
func (d *Dispatcher) VisibleTools(id identity.Identity, f registry.Filter) []*toolwirev1.ToolSpec {
	f.Scopes = id.Scopes
	ents := d.visibleEntries(id, "", d.reg.List(f))
	out := make([]*toolwirev1.ToolSpec, 0, len(ents))
	for _, e := range ents {
		out = append(out, toolView(id, e.Spec))
	}
	return out
}

// VisibleToolsIn is VisibleToolsFor without a model: for a caller in a session of its
// tenant, as ListTools shows them with a session (and MCP tools/list
// with one in its _meta): less the tools the session's mode forbids
// outright (policy.Policy.Hidden with caller.mode; every tool, for a mode
// the policy does not declare). A session without a mode is in the
// policy's sessions.default_mode, as its calls are, and so is an empty
// session; each tool is shown as its spec's definition for the mode has
// it (offeredAs). The
// session's state is the session view's, as admission reads it; an ended
// session lists as its mode does (its calls are refused
// SESSION_INACTIVE). Errors: the session could not be read.
func (d *Dispatcher) VisibleToolsIn(ctx context.Context, id identity.Identity, f registry.Filter, session string) ([]*toolwirev1.ToolSpec, error) {
	return d.VisibleToolsFor(ctx, id, f, ListFor{Session: session})
}

// ListFor says whom a tool list is for, besides the caller's identity.
type ListFor struct {
	// Session is the list's session ("" = none): the tools its mode
	// forbids outright are left out (VisibleToolsIn).
	Session string
	// Model is the model the list is for ("" = none): its family's
	// toolset in the policy in force applies (docs/toolsets.md).
	Model string
}

// ErrBadModel refuses a list or a call for a model that is not a model
// name (policy.ModelNameRE, at most policy.MaxModelBytes).
var ErrBadModel = errors.New("dispatch: model is not a model name (letters, digits and . _ : / @ + -, at most 128 bytes)")

// VisibleToolsFor is VisibleToolsIn for a session and a model: each tool
// as the spec's definition for the model's family and the session's mode
// has it (hidden, or its description and input schema), then the tools
// the toolset of the model's family hides or substitutes are left out,
// and a tool it offers a schema variant of is listed with the variant's
// input schema (copies; the registry's spec is not changed).
// Errors: those of VisibleToolsIn, and ErrBadModel.
func (d *Dispatcher) VisibleToolsFor(ctx context.Context, id identity.Identity, f registry.Filter, lf ListFor) ([]*toolwirev1.ToolSpec, error) {
	st, err := d.listSession(ctx, id, lf)
	if err != nil {
		return nil, err
	}
	return d.visibleTools(ctx, id, f, listedFor{mode: st.Mode, model: lf.Model, pins: st.Pins}), nil
}

// listSession checks lf and returns the state of its session (the zero
// state without one).
func (d *Dispatcher) listSession(ctx context.Context, id identity.Identity, lf ListFor) (sessionview.State, error) {
	if m := lf.Model; m != "" && (len(m) > policy.MaxModelBytes || !policy.ModelNameRE.MatchString(m)) {
		return sessionview.State{}, ErrBadModel
	}
	if lf.Session == "" {
		return sessionview.State{}, nil
	}
	if err := checkSession(lf.Session); err != nil {
		return sessionview.State{}, err
	}
	st, err := d.sessions.State(ctx, id.Tenant, lf.Session)
	if err != nil {
		return sessionview.State{}, fmt.Errorf("dispatch: the list's session: %w", err)
	}
	return st, nil
}

// listedFor is whom a list is for besides the caller: its session's mode
// and pins (none without a session) and its model.
type listedFor struct {
	mode, model string
	pins        map[string]string
}

// visibleTools is what a list shows id for lf: the registry's tools that
// match f, each at the version the session pins for it (listEntries),
// less those the policy hides in the mode, each as the model is offered
// it (offeredAs).
func (d *Dispatcher) visibleTools(ctx context.Context, id identity.Identity, f registry.Filter, lf listedFor) []*toolwirev1.ToolSpec {
	mode, model := lf.mode, lf.model
	f.Scopes = id.Scopes
	ents := d.visibleEntries(id, mode, d.listEntries(ctx, f, lf.pins))
	p := d.policyFor(id.Tenant)
	family := p.ModelFamily(model)
	ts := p.Toolset(family)
	mode = p.Sessions().ModeOf(mode) // as admission decides a call in it
	out := make([]*toolwirev1.ToolSpec, 0, len(ents))
	for _, e := range ents {
		if spec, ok := offeredAs(ts, e.Spec, family, mode); ok {
			out = append(out, toolView(id, spec))
		}
	}
	return out
}

// listEntries is the registry's tools that match f, each tool a session
// pins (pins, by name) at its pinned version, as the session's calls run
// it (lookup, then the scopes step on the pinned spec): the filter is
// applied to the version listed, and a pinned version is listed even
// when the tool has no current version. A pinned version the registry no
// longer holds (or cannot be read now), or disabled, is left out: the
// session's calls of it are refused until it is re-pinned, and the
// refusal says how.
func (d *Dispatcher) listEntries(ctx context.Context, f registry.Filter, pins map[string]string) []*registry.Entry {
	if len(pins) == 0 {
		return d.reg.List(f)
	}
	cur := d.reg.List(registry.Filter{NameGlob: f.NameGlob})
	out := make([]*registry.Entry, 0, len(cur))
	listed := make(map[string]bool, len(cur))
	for _, e := range cur {
		listed[e.Spec.Name] = true
		if v, ok := pins[e.Spec.Name]; ok && v != e.Spec.Version {
			if e = d.pinnedEntry(ctx, e.Spec.Name, v); e == nil {
				continue
			}
		}
		if f.Matches(e.Spec) {
			out = append(out, e)
		}
	}
	added := false
	for name, v := range pins {
		if listed[name] {
			continue
		}
		if _, err := d.reg.Get(name); err == nil {
			continue // current, and outside f's name pattern
		}
		if e := d.pinnedEntry(ctx, name, v); e != nil && f.Matches(e.Spec) {
			out, added = append(out, e), true
		}
	}
	if added {
		slices.SortFunc(out, func(a, b *registry.Entry) int { return strings.Compare(a.Spec.Name, b.Spec.Name) })
	}
	return out
}

// pinnedEntry is version v of tool name, nil when the registry does not
// hold it (or it cannot be read now) or it is disabled.
func (d *Dispatcher) pinnedEntry(ctx context.Context, name, v string) *registry.Entry {
	e, err := d.reg.GetVersion(ctx, name, v)
	if err != nil {
		if !errors.Is(err, registry.ErrNotFound) {
			d.log.DebugContext(ctx, "list: a pinned version could not be read; the tool is left out", "tool", name, "version", v, "err", err)
		}
		return nil
	}
	if e.Spec.Disabled {
		return nil
	}
	return e
}

// offeredAs is spec as a request of model family (its toolset ts) in a
// session of mode is offered it, as admission decides its calls: the
// spec's definition for the family and mode (registry.Definition) first,
// then the toolset's schema variant on top; false when the toolset or the
// definition hides the tool. When both give an input schema, the view's
// is both ({"type":"object","allOf":[definition's, variant's]}): a call
// must satisfy both (variantStep), and a model is shown what it is held
// to. The view is a copy where it differs; the registry's spec is not
// changed.
func offeredAs(ts *policy.Toolset, spec *toolwirev1.ToolSpec, family, mode string) (*toolwirev1.ToolSpec, bool) {
	if ok, _ := ts.Offered(spec.Name); !ok {
		return nil, false
	}
	def, _ := registry.Definition(spec, family, mode)
	if def.GetHidden() {
		return nil, false
	}
	defined := registry.DefinedView(spec, def)
	view := ts.View(defined)
	if d := def.GetInputSchemaJson(); d != "" && view != defined {
		both, err := json.Marshal(struct {
			Type  string            `json:"type"`
			AllOf []json.RawMessage `json:"allOf"`
		}{"object", []json.RawMessage{json.RawMessage(d), json.RawMessage(view.InputSchemaJson)}})
		if err == nil { // both compiled when they were loaded: valid JSON
			view.InputSchemaJson = string(both)
		}
	}
	return view, true
}

// VisibleTool returns version of tool name (the current one when version
// is empty) as GetTool shows it to id: executor configuration only for
// the admin scope. A tool that id's scopes or the policy hide from id
// is registry.ErrNotFound, as is one the registry does not hold.
func (d *Dispatcher) VisibleTool(ctx context.Context, id identity.Identity, name, version string) (*toolwirev1.ToolSpec, error) {
	ent, err := d.reg.GetVersion(ctx, name, version)
	if err != nil {
		return nil, err
	}
	if !registry.HasScopes(id.Scopes, ent.Spec.Scopes) || !d.listable(id)(ent.Spec.Name) {
		return nil, registry.ErrNotFound
	}
	return toolView(id, ent.Spec), nil
}

// GetFor says which version of a tool GetTool shows, and to which model.
type GetFor struct {
	// Version is the version shown ("" = the current one).
	Version string
	// Model is the model the tool is shown to ("" = none): its family's
	// toolset in the policy in force applies, as in VisibleToolsFor.
	Model string
}

// VisibleToolFor is VisibleTool for a model, as ListTools shows the tool
// to the same caller and model (VisibleToolsFor) in the policy's
// sessions.default_mode (GetTool names no session): a tool the toolset of
// the model's family or the spec's definition hides is
// registry.ErrNotFound, and one shown with the definition's description
// and schema, and the toolset's schema variant (copies; the registry's
// spec is not changed). Without a model it is VisibleTool: the registered
// spec, with its definitions. Errors: those of VisibleTool, and
// ErrBadModel.
func (d *Dispatcher) VisibleToolFor(ctx context.Context, id identity.Identity, name string, gf GetFor) (*toolwirev1.ToolSpec, error) {
	if m := gf.Model; m != "" && (len(m) > policy.MaxModelBytes || !policy.ModelNameRE.MatchString(m)) {
		return nil, ErrBadModel
	}
	spec, err := d.VisibleTool(ctx, id, name, gf.Version)
	if err != nil || gf.Model == "" {
		return spec, err // without a model, the registered spec, its definitions with it
	}
	p := d.policyFor(id.Tenant)
	family := p.ModelFamily(gf.Model)
	spec, ok := offeredAs(p.Toolset(family), spec, family, p.Sessions().ModeOf(""))
	if !ok {
		return nil, registry.ErrNotFound
	}
	return spec, nil
}

// TaskSupport is the current spec's task support of tool name (MCP's
// execution.taskSupport); unspecified for a tool the registry does not
// hold.
func (d *Dispatcher) TaskSupport(name string) toolwirev1.TaskSupport {
	e, err := d.reg.Get(name)
	if err != nil {
		return toolwirev1.TaskSupport_TASK_SUPPORT_UNSPECIFIED
	}
	return e.Spec.GetTaskSupport()
}

// MissingScopes are the scopes the current spec of tool name needs that
// id lacks; none for a tool the registry does not hold.
func (d *Dispatcher) MissingScopes(id identity.Identity, name string) []string {
	e, err := d.reg.Get(name)
	if err != nil || registry.HasScopes(id.Scopes, e.Spec.Scopes) {
		return nil
	}
	var out []string
	for _, sc := range e.Spec.Scopes {
		if !registry.HasScopes(id.Scopes, []string{sc}) {
			out = append(out, sc)
		}
	}
	return out
}

// OnToolsChanged calls f after each change of the registry's current
// tools, on the registry watcher's goroutine (registry.Store.OnChange): f
// must not block.
func (d *Dispatcher) OnToolsChanged(f func()) { d.reg.OnChange(f) }

// ShownArguments is args as a person may be shown them: the values of the
// arguments the current spec of tool name marks secret replaced
// (internal/redact), in canonical form (one spelling, no padding).
func (d *Dispatcher) ShownArguments(name string, args []byte) string {
	var spec *toolwirev1.ToolSpec
	if e, err := d.reg.Get(name); err == nil {
		spec = e.Spec
	}
	shown := redact.ForSpec(spec).Arguments(args)
	if c, err := policy.Canonicalize(shown); err == nil {
		return string(c)
	}
	return string(shown)
}
