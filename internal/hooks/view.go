package hooks

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"unicode/utf8"

	sdk "github.com/modelcontextprotocol/go-sdk/mcp"

	"github.com/toolwire/toolwire/internal/mcpcontent"
	"github.com/toolwire/toolwire/pkg/hook"
	toolwirev1 "github.com/toolwire/toolwire/pkg/toolproto/toolwire/v1"
)

// view is the response's content and structured output as the
// after-hooks so far left them.
type view struct {
	content    []*toolwirev1.Content
	structured string
	changed    bool
	redacted   bool
	// input: the response asks the caller for input.
	input bool
}

// response is resp as an after-hook sees it, with v's content and
// structured output.
func (v *view) response(resp *toolwirev1.ToolResponse) (hook.Response, error) {
	blocks, err := mcpcontent.ToMCP(v.content)
	if err != nil {
		return hook.Response{}, fmt.Errorf("the response's content has no MCP form: %w", err)
	}
	if blocks == nil {
		blocks = []sdk.Content{}
	}
	content, err := json.Marshal(blocks)
	if err != nil {
		return hook.Response{}, err
	}
	hr := hook.Response{OK: resp.Ok, Content: content}
	if v.structured != "" {
		hr.StructuredContent = json.RawMessage(v.structured)
	}
	if e := resp.Error; e != nil {
		hr.Error = &hook.Error{Type: e.Type.String(), Message: e.Message}
	}
	if in := resp.GetInputRequired(); in != nil {
		hr.InputRequests = make(map[string]hook.InputRequest, len(in.GetRequests()))
		for k, r := range in.GetRequests() {
			hr.InputRequests[k] = hook.InputRequest{Method: r.GetMethod(), Params: json.RawMessage(r.GetParamsJson())}
		}
	}
	return hr, nil
}

// apply takes what an after-hook answered into v and its note, whole or
// not at all; an answer it cannot take is an error (the hook's failure
// mode decides), and leaves v as it was. The reason is cut to
// maxHookReason bytes.
func (v *view) apply(ans *hook.AfterAnswer, note *toolwirev1.HookNote) error {
	note.Action, note.Reason = string(ans.Action), cutUTF8(ans.Reason, maxHookReason)
	if note.Action == "" {
		note.Action = string(hook.Continue)
	}
	if err := checkAnnotations(ans.Annotations); err != nil {
		return err
	}
	note.Annotations = ans.Annotations
	next := *v
	if err := next.take(hook.Action(note.Action), ans); err != nil {
		return err
	}
	*v = next
	return nil
}

// cutUTF8 is s cut to at most n bytes on a character boundary.
func cutUTF8(s string, n int) string {
	if len(s) <= n {
		return s
	}
	for n > 0 && !utf8.RuneStart(s[n]) {
		n--
	}
	return s[:n]
}

// take applies action's content and structured output to v.
func (v *view) take(action hook.Action, ans *hook.AfterAnswer) error {
	switch action {
	case hook.Continue, hook.Annotate, hook.Withhold:
		return nil
	case hook.Redact, hook.Replace:
		if v.input {
			return fmt.Errorf("%s of a request for input: it can be passed, annotated or withheld", action)
		}
	default:
		return fmt.Errorf("unknown action %q (want continue, annotate, redact, replace or withhold)", ans.Action)
	}
	if action == hook.Redact {
		// What the redactor does not give back does not pass.
		v.content, v.structured, v.changed, v.redacted = nil, "", true, true
	}
	if len(ans.Content) > 0 {
		var r sdk.CallToolResult
		if err := json.Unmarshal([]byte(`{"content":`+string(ans.Content)+`}`), &r); err != nil {
			return fmt.Errorf("its content is not MCP content blocks: %w", err)
		}
		content, err := mcpcontent.FromMCP(r.Content)
		if err != nil {
			return err
		}
		v.content, v.changed = content, true
	}
	if s := bytes.TrimSpace(ans.StructuredContent); len(s) > 0 {
		switch {
		case string(s) == "null":
			v.structured = ""
		case s[0] == '{' && json.Valid(s):
			v.structured = string(s)
		default:
			return errors.New("its structured_content is not a JSON object (or null)")
		}
		v.changed = true
	}
	return nil
}

func checkAnnotations(a map[string]string) error {
	if len(a) > maxHookAnnotations {
		return fmt.Errorf("%d annotations (at most %d)", len(a), maxHookAnnotations)
	}
	for k, val := range a {
		if k == "" || len(k) > maxHookAnnotationKey || len(val) > maxHookAnnotationValue || !utf8.ValidString(k) || !utf8.ValidString(val) {
			return fmt.Errorf("annotation %.64q: keys 1 to %d bytes, values at most %d, UTF-8", k, maxHookAnnotationKey, maxHookAnnotationValue)
		}
	}
	return nil
}
