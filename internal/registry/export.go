package registry

import (
	"encoding/json"
	"fmt"

	toolwirev1 "github.com/toolwire/toolwire/pkg/toolproto/toolwire/v1"
)

// Export renders specs as the tool list of an LLM provider, as JSON:
// OpenAI (chat-completions `tools`), Anthropic (`tools`), Gemini
// (`functionDeclarations` with `parametersJsonSchema`) or MCP
// (`tools/list` result, with the tools' icons, `_meta` and
// `execution.taskSupport`, which the fleet's MCP endpoint honours;
// docs/mcp.md). Descriptions are the summary when the spec has one, so
// models always see the short form; the full doc is on demand.
func Export(format toolwirev1.ToolFormat, specs []*toolwirev1.ToolSpec) ([]byte, error) {
	items := make([]any, 0, len(specs))
	for _, s := range specs {
		item, err := exportOne(format, s)
		if err != nil {
			return nil, err
		}
		items = append(items, item)
	}
	switch format {
	case toolwirev1.ToolFormat_TOOL_FORMAT_GEMINI:
		return json.Marshal(map[string]any{"functionDeclarations": items})
	case toolwirev1.ToolFormat_TOOL_FORMAT_MCP:
		return json.Marshal(map[string]any{"tools": items})
	}
	return json.Marshal(items)
}

// ExportOne renders one spec in a provider's format.
func ExportOne(format toolwirev1.ToolFormat, s *toolwirev1.ToolSpec) ([]byte, error) {
	item, err := exportOne(format, s)
	if err != nil {
		return nil, err
	}
	return json.Marshal(item)
}

func exportOne(format toolwirev1.ToolFormat, s *toolwirev1.ToolSpec) (any, error) {
	schema := json.RawMessage(s.InputSchemaJson)
	if len(schema) == 0 {
		schema = json.RawMessage(`{"type":"object"}`)
	}
	desc := s.Description
	if s.Summary != "" {
		desc = s.Summary
	}
	switch format {
	case toolwirev1.ToolFormat_TOOL_FORMAT_OPENAI:
		return map[string]any{"type": "function", "function": map[string]any{
			"name": s.Name, "description": desc, "parameters": schema}}, nil
	case toolwirev1.ToolFormat_TOOL_FORMAT_ANTHROPIC:
		return map[string]any{"name": s.Name, "description": desc, "input_schema": schema}, nil
	case toolwirev1.ToolFormat_TOOL_FORMAT_GEMINI:
		return map[string]any{"name": s.Name, "description": desc, "parametersJsonSchema": schema}, nil
	case toolwirev1.ToolFormat_TOOL_FORMAT_MCP:
		t := map[string]any{"name": s.Name, "description": desc, "inputSchema": schema}
		if s.Title != "" {
			t["title"] = s.Title
		}
		if s.OutputSchemaJson != "" {
			t["outputSchema"] = json.RawMessage(s.OutputSchemaJson)
		}
		if len(s.Icons) > 0 {
			icons := make([]map[string]any, len(s.Icons))
			for i, ic := range s.Icons {
				m := map[string]any{"src": ic.Src}
				if ic.MimeType != "" {
					m["mimeType"] = ic.MimeType
				}
				if len(ic.Sizes) > 0 {
					m["sizes"] = ic.Sizes
				}
				if ic.Theme != "" {
					m["theme"] = ic.Theme
				}
				icons[i] = m
			}
			t["icons"] = icons
		}
		if s.MetaJson != "" && json.Valid([]byte(s.MetaJson)) {
			t["_meta"] = json.RawMessage(s.MetaJson)
		}
		t["execution"] = map[string]any{"taskSupport": TaskSupportName(s.TaskSupport)}
		if a := s.Annotations; a != nil {
			ann := map[string]any{}
			if a.ReadOnly != nil {
				ann["readOnlyHint"] = *a.ReadOnly
			}
			if a.Destructive != nil {
				ann["destructiveHint"] = *a.Destructive
			}
			if a.Idempotent != nil {
				ann["idempotentHint"] = *a.Idempotent
			}
			if a.OpenWorld != nil {
				ann["openWorldHint"] = *a.OpenWorld
			}
			if len(ann) > 0 {
				t["annotations"] = ann
			}
		}
		return t, nil
	}
	return nil, fmt.Errorf("registry: format %s has no JSON rendering", format)
}

// TaskSupportName is MCP's name of ts ("forbidden", "optional",
// "required"); unset is "optional".
func TaskSupportName(ts toolwirev1.TaskSupport) string {
	switch ts {
	case toolwirev1.TaskSupport_TASK_SUPPORT_FORBIDDEN:
		return "forbidden"
	case toolwirev1.TaskSupport_TASK_SUPPORT_REQUIRED:
		return "required"
	}
	return "optional"
}
