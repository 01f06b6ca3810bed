package intents

import (
	"fmt"
	"regexp"
	"slices"
	"strings"
	"sync"

	"github.com/santhosh-tekuri/jsonschema/v6"
	"github.com/toolwire/toolwire/internal/registry"
	"github.com/toolwire/toolwire/pkg/tool"
)

// The built-in intent types (DESIGN §3).
const (
	EndSession         = tool.IntentEndSession
	SuppressAudio      = tool.IntentSuppressAudio
	SuppressTranscript = tool.IntentSuppressTranscript
	SetPendingMessage  = tool.IntentSetPendingMessage
	SetState           = tool.IntentSetState
	EmitEvent          = tool.IntentEmitEvent
	Notify             = tool.IntentNotify
	InjectContext      = tool.IntentInjectContext
	SetMode            = tool.IntentSetMode
)

// Builtin describes one built-in intent type.
type Builtin struct {
	Type string
	// Doc says what an applier does with it.
	Doc string
	// Schema is the payload's JSON Schema (draft 2020-12). A missing
	// payload is checked as {}.
	Schema string
}

// Catalog lists the built-in types with their payload schemas.
var Catalog = []Builtin{
	{EndSession, "End the session; no more turns. Payload: optional reason.",
		`{"type":"object","properties":{"reason":{"type":"string","maxLength":1000}},"additionalProperties":false}`},
	{SuppressAudio, "Do not speak the tool's result (voice agents). Payload: optional suppress (default true).",
		`{"type":"object","properties":{"suppress":{"type":"boolean"}},"additionalProperties":false}`},
	{SuppressTranscript, "Keep the tool's result out of the transcript. Payload: optional suppress (default true).",
		`{"type":"object","properties":{"suppress":{"type":"boolean"}},"additionalProperties":false}`},
	{SetPendingMessage, "Set the message the agent says next; an empty message clears it.",
		`{"type":"object","properties":{"message":{"type":"string","maxLength":10000}},"required":["message"],"additionalProperties":false}`},
	{SetState, "Set a session state value; a null value deletes the key.",
		`{"type":"object","properties":{"key":{"type":"string","minLength":1,"maxLength":256},"value":{}},"required":["key","value"],"additionalProperties":false}`},
	{EmitEvent, "Emit a named event to the orchestrator's listeners.",
		`{"type":"object","properties":{"name":{"type":"string","minLength":1,"maxLength":256},"data":{}},"required":["name"],"additionalProperties":false}`},
	{Notify, "Notify the user or operator.",
		`{"type":"object","properties":{"message":{"type":"string","minLength":1,"maxLength":10000},"level":{"enum":["info","warning","error"]}},"required":["message"],"additionalProperties":false}`},
	{InjectContext, "Add text to the model's context for the next turn.",
		`{"type":"object","properties":{"text":{"type":"string","minLength":1,"maxLength":100000},"role":{"enum":["system","user"]}},"required":["text"],"additionalProperties":false}`},
	{SetMode, "Set the session's mode (a name the policy's modes: declares; an empty mode clears it): the mode's policy layer applies to the session's later calls.",
		`{"type":"object","properties":{"mode":{"type":"string","pattern":"^([A-Za-z][A-Za-z0-9_-]{0,63})?$"}},"required":["mode"],"additionalProperties":false}`},
}

// CustomRe is the rule for custom intent types: a lower-case namespace and
// a name, dot-separated (acme.reindex, acme.search.refresh).
var CustomRe = regexp.MustCompile(`^[a-z][a-z0-9_-]*(\.[a-z0-9_-]+)+$`)

// builtinSchemas are compiled on first use, not at package init (sandbox
// helpers re-execute the worker binary: its inits are on every spawn).
var builtinSchemas = sync.OnceValue(func() map[string]*jsonschema.Schema {
	m := make(map[string]*jsonschema.Schema, len(Catalog))
	for _, b := range Catalog {
		s, err := registry.DefaultSchemas.Compile(b.Schema)
		if err != nil {
			panic(fmt.Sprintf("intents: built-in schema of %s: %v", b.Type, err))
		}
		m[b.Type] = s
	}
	return m
})

// IsBuiltin reports whether t is a built-in type.
func IsBuiltin(t string) bool { _, ok := builtinSchemas()[t]; return ok }

// CheckType says whether t is a type a spec may declare: a built-in one or
// a namespaced custom one.
func CheckType(t string) error {
	if IsBuiltin(t) || CustomRe.MatchString(t) {
		return nil
	}
	if strings.ToUpper(t) == t {
		return fmt.Errorf("intent type %q is not a built-in type (%s)", t, strings.Join(builtinNames(), ", "))
	}
	return fmt.Errorf("intent type %q is neither built-in nor namespaced like acme.reindex", t)
}

func builtinNames() []string {
	names := make([]string, 0, len(Catalog))
	for _, b := range Catalog {
		names = append(names, b.Type)
	}
	return slices.Clip(names)
}
