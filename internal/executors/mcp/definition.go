package mcp

import (
	"bytes"
	"cmp"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"fmt"
	"regexp"
	"strings"

	sdk "github.com/modelcontextprotocol/go-sdk/mcp"
	"github.com/toolwire/toolwire/internal/mcpcontent"
	"github.com/toolwire/toolwire/internal/registry"
	toolwirev1 "github.com/toolwire/toolwire/pkg/toolproto/toolwire/v1"
)

// ToolName returns the toolwire name of tool of server: mcp__<server>__<tool>,
// with every character of tool outside [a-zA-Z0-9_-] replaced by '_'. It
// returns an error when the name would exceed registry.NameRe's 64
// characters (the tool is then not imported).
func ToolName(server, tool string) (string, error) {
	if tool == "" {
		return "", fmt.Errorf("server %s lists a tool without a name", server)
	}
	name := "mcp__" + server + "__" + invalidNameChars.ReplaceAllString(tool, "_")
	if !registry.NameRe.MatchString(name) {
		return "", fmt.Errorf("tool %q of server %s: toolwire name %q would not match %s (too long)", tool, server, name, registry.NameRe)
	}
	return name, nil
}

var invalidNameChars = regexp.MustCompile(`[^a-zA-Z0-9_-]`)

// DefinitionHash is the pinned identity of an MCP tool definition:
// "sha256:" and the hex SHA-256 of the canonical JSON encoding of an
// object holding the tool's name, title, description, input schema,
// output schema and annotations (object keys sorted, no insignificant
// white space; numbers as encoding/json writes the values the SDK
// decoded, or as written in a json.RawMessage schema). Anything the model
// sees or the executor relies on is covered, so a server cannot change
// what a tool does or claims without the hash changing. `_meta`, icons and
// execution.taskSupport are not covered: a tool that comes to require
// task augmentation is disabled without an approval step, and enabled
// again when it no longer does.
func DefinitionHash(t *sdk.Tool) (string, error) {
	def := map[string]any{"name": t.Name}
	if t.Title != "" {
		def["title"] = t.Title
	}
	if t.Description != "" {
		def["description"] = t.Description
	}
	for k, v := range map[string]any{"inputSchema": t.InputSchema, "outputSchema": t.OutputSchema, "annotations": t.Annotations} {
		c, err := canonical(v)
		if err != nil {
			return "", fmt.Errorf("tool %q: %s: %w", t.Name, k, err)
		}
		if c != nil {
			def[k] = c
		}
	}
	b, err := marshalCanonical(def)
	if err != nil {
		return "", fmt.Errorf("tool %q: %w", t.Name, err)
	}
	sum := sha256.Sum256(b)
	return "sha256:" + hex.EncodeToString(sum[:]), nil
}

// canonical returns v decoded into generic JSON values (numbers kept as
// written), or nil when v is nil or JSON null.
func canonical(v any) (any, error) {
	if v == nil {
		return nil, nil
	}
	b, err := json.Marshal(v)
	if err != nil {
		return nil, err
	}
	d := json.NewDecoder(bytes.NewReader(b))
	d.UseNumber()
	var out any
	if err := d.Decode(&out); err != nil {
		return nil, err
	}
	return out, nil
}

// marshalCanonical encodes generic JSON with sorted keys (encoding/json
// sorts map keys) and without HTML escaping.
func marshalCanonical(v any) ([]byte, error) {
	var buf bytes.Buffer
	enc := json.NewEncoder(&buf)
	enc.SetEscapeHTML(false)
	if err := enc.Encode(v); err != nil {
		return nil, err
	}
	return bytes.TrimSuffix(buf.Bytes(), []byte("\n")), nil
}

// schemaJSON is the canonical JSON text of a schema; "" for none.
func schemaJSON(v any) (string, error) {
	c, err := canonical(v)
	if err != nil || c == nil {
		return "", err
	}
	b, err := marshalCanonical(c)
	return string(b), err
}

// maxToolExtraBytes bounds a tool's icons and its `_meta` in its spec
// (each, encoded): a spec is one registry value, and a data: URI icon
// can be large. Larger ones are left out of the spec (and logged).
const maxToolExtraBytes = 64 << 10

// buildSpec returns the spec of tool t of server, named name, at
// definition hash, with extra (what tools/list said that t lacks). It
// keeps t's icons and `_meta` and the server's execution.taskSupport (as
// written in McpConfig.task_support, and as ToolSpec.task_support, which
// the MCP endpoint advertises and honours); dropped names the fields left out for their size.
func buildSpec(server, name string, t *sdk.Tool, hash string, extra listedTool) (spec *toolwirev1.ToolSpec, dropped []string, err error) {
	in, err := schemaJSON(t.InputSchema)
	if err != nil {
		return nil, nil, fmt.Errorf("input schema: %w", err)
	}
	out, err := schemaJSON(t.OutputSchema)
	if err != nil {
		return nil, nil, fmt.Errorf("output schema: %w", err)
	}
	meta, err := mcpcontent.MetaJSON(t.Meta)
	if err != nil {
		return nil, nil, fmt.Errorf("_meta: %w", err)
	}
	if len(meta) > maxToolExtraBytes {
		meta, dropped = "", append(dropped, "_meta")
	}
	icons := mcpcontent.IconsFromMCP(t.Icons)
	if b, err := json.Marshal(t.Icons); err != nil || len(b) > maxToolExtraBytes {
		icons, dropped = nil, append(dropped, "icons")
	}
	spec = &toolwirev1.ToolSpec{
		Name:        name,
		Description: t.Description,
		Summary:     summaryOf(t.Description),
		Executor:    toolwirev1.ExecutorType_EXECUTOR_TYPE_MCP,
		Config: &toolwirev1.ToolSpec_Mcp{Mcp: &toolwirev1.McpConfig{Server: server, Tool: t.Name, DefinitionHash: hash,
			TaskSupport: extra.TaskSupport}},
		TaskSupport:      taskSupportOf(extra.TaskSupport),
		InputSchemaJson:  in,
		OutputSchemaJson: out,
		Provider:         server,
		Icons:            icons,
		MetaJson:         meta,
	}
	if a := t.Annotations; a != nil {
		ro, idem := a.ReadOnlyHint, a.IdempotentHint
		spec.Annotations = &toolwirev1.ToolAnnotations{
			ReadOnly: &ro, Idempotent: &idem, Destructive: a.DestructiveHint, OpenWorld: a.OpenWorldHint,
		}
		spec.Title = cmp.Or(t.Title, a.Title)
	} else {
		spec.Title = t.Title
	}
	if err := registry.Check(spec); err != nil {
		return nil, nil, err
	}
	return spec, dropped, nil
}

// taskSupportOf is the ToolSpec.task_support of a tool whose server
// lists it with execution.taskSupport ts: the same, so that toolwire's
// MCP endpoint advertises what the server does. A tool listed without it
// (or with a value MCP does not define) is "forbidden", MCP's default.
func taskSupportOf(ts string) toolwirev1.TaskSupport {
	switch ts {
	case "optional":
		return toolwirev1.TaskSupport_TASK_SUPPORT_OPTIONAL
	case TaskRequired:
		return toolwirev1.TaskSupport_TASK_SUPPORT_REQUIRED
	}
	return toolwirev1.TaskSupport_TASK_SUPPORT_FORBIDDEN
}

// TaskRequired is the execution.taskSupport value of a tool that can only
// be called with task augmentation.
const TaskRequired = "required"

// unavailableReason says why tool of server cannot be called whatever
// its approval, from what tools/list said of it; empty when it can.
// toolwire calls tools without task augmentation (the SDK has none), so a
// tool that requires it would fail every call: it is disabled instead.
func unavailableReason(server, tool string, extra listedTool) string {
	if extra.TaskSupport != TaskRequired {
		return ""
	}
	return fmt.Sprintf("MCP server %s requires task augmentation to call tool %q (execution.taskSupport %q), "+
		"which toolwire does not use", server, tool, TaskRequired)
}

// disabledReason is the DisabledReason of a tool that is not enabled.
func (ts *toolState) disabledReason(name string) string {
	if ts.unavailable != "" {
		return ts.unavailable
	}
	return changedReason(name, ts.approved, ts.hash)
}

// changedReason is the DisabledReason of a tool whose definition differs
// from the approved one.
func changedReason(name, approved, current string) string {
	return fmt.Sprintf("the MCP server changed the definition of this tool from %s to %s; "+
		"review it and approve it with: toolctl tools approve %s --hash %s", approved, current, name, current)
}

// summaryOf is the summary shown to models: the description's first
// paragraph, at most 4 lines of at most 200 characters each.
func summaryOf(desc string) string {
	para, _, _ := strings.Cut(strings.TrimSpace(desc), "\n\n")
	lines := strings.Split(para, "\n")
	if len(lines) > 4 {
		lines = lines[:4]
	}
	for i, l := range lines {
		l = strings.TrimSpace(l)
		if r := []rune(l); len(r) > 200 {
			l = string(r[:199]) + "…"
		}
		lines[i] = l
	}
	return strings.Join(lines, "\n")
}
