package builtin

import (
	"context"
	"encoding/json"

	"github.com/toolwire/toolwire/pkg/tool"
	toolwirev1 "github.com/toolwire/toolwire/pkg/toolproto/toolwire/v1"
)

// RememberInput is the input of remember.
type RememberInput struct {
	Key   string          `json:"key" jsonschema:"the name to remember the value under"`
	Value json.RawMessage `json:"value" jsonschema:"any JSON value; null forgets the key"`
}

// remember shows intents: it changes no state itself, it asks the
// orchestrator to set a session value (SET_STATE).
func newRememberTool() *tool.Tool {
	return tool.Must(tool.New("remember",
		func(ctx context.Context, in RememberInput) (string, error) {
			if in.Key == "" {
				return "", tool.InvalidArgument("/key", "must not be empty")
			}
			value := in.Value
			if len(value) == 0 {
				value = json.RawMessage("null")
			}
			if err := tool.EmitIntent(ctx, tool.IntentSetState, map[string]any{"key": in.Key, "value": value}); err != nil {
				return "", err
			}
			return "remembered " + in.Key, nil
		},
		tool.WithTitle("Remember"),
		tool.WithSummary("Remembers a value in the session's state under a key (null forgets it)."),
		tool.WithDescription("Asks the orchestrator to set a session state value (a SET_STATE intent); "+
			"the value is applied by whoever applies the call's intents."),
		tool.WithCategory(toolwirev1.ToolCategory_TOOL_CATEGORY_ACTION),
		tool.WithIntents(tool.IntentSetState),
		tool.Idempotent(), tool.Destructive(false), tool.OpenWorld(false),
	))
}
