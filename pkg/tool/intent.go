package tool

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"strconv"
	"sync"

	toolwirev1 "github.com/toolwire/toolwire/pkg/toolproto/toolwire/v1"
)

// The built-in intent types (see Intent in the wire contract). Custom
// types are namespaced in lower case: "acme.reindex".
const (
	// IntentEndSession ends the session. Payload: {"reason"?: string}.
	IntentEndSession = "END_SESSION"
	// IntentSuppressAudio keeps the result from being spoken. Payload:
	// {"suppress"?: bool (default true)}.
	IntentSuppressAudio = "SUPPRESS_AUDIO"
	// IntentSuppressTranscript keeps the result out of the transcript.
	// Payload: {"suppress"?: bool (default true)}.
	IntentSuppressTranscript = "SUPPRESS_TRANSCRIPT"
	// IntentSetPendingMessage sets what the agent says next. Payload:
	// {"message": string}.
	IntentSetPendingMessage = "SET_PENDING_MESSAGE"
	// IntentSetState sets a session value; null deletes it. Payload:
	// {"key": string, "value": any}.
	IntentSetState = "SET_STATE"
	// IntentEmitEvent emits a named event. Payload: {"name": string,
	// "data"?: any}.
	IntentEmitEvent = "EMIT_EVENT"
	// IntentNotify notifies the user or operator. Payload: {"message":
	// string, "level"?: "info"|"warning"|"error"}.
	IntentNotify = "NOTIFY"
	// IntentInjectContext adds text to the model's context. Payload:
	// {"text": string, "role"?: "system"|"user"}.
	IntentInjectContext = "INJECT_CONTEXT"
	// IntentSetMode sets the session's mode, a mode the policy declares;
	// an empty mode clears it. Payload: {"mode": string}.
	IntentSetMode = "SET_MODE"
)

// ErrNoInvocation is returned by EmitIntent when ctx does not belong to a
// running Invoke, including after the invocation has returned.
var ErrNoInvocation = errors.New("tool: EmitIntent outside a running invocation")

// EmitIntent asks the orchestrator for a state change (see Intent in the
// wire contract). Intents are returned with the call's Result, in the order
// emitted and after any the function put in its own Result, with ids "i1",
// "i2", ... in emit order. A failed call returns no intents.
//
// payload is encoded as JSON (a json.RawMessage is kept as is, compacted);
// nil means no payload. typ must be a type the tool declares with
// WithIntents; the worker checks types and payloads after the call.
//
// EmitIntent is safe for concurrent use by goroutines of one invocation.
// It returns ErrNoInvocation when ctx is not the context of a running
// Invoke (or one derived from it), and an error when typ is empty or
// payload cannot be encoded.
func EmitIntent(ctx context.Context, typ string, payload any) error {
	c, _ := ctx.Value(intentsKey{}).(*intentCollector)
	if c == nil {
		return ErrNoInvocation
	}
	if typ == "" {
		return errors.New("tool: EmitIntent: empty intent type")
	}
	var payloadJSON []byte
	if payload != nil {
		var err error
		if payloadJSON, err = json.Marshal(payload); err != nil {
			return fmt.Errorf("tool: EmitIntent %s: encoding the payload: %w", typ, err)
		}
	}
	return c.add(typ, string(payloadJSON))
}

type intentsKey struct{}

// intentCollector gathers the intents of one invocation.
type intentCollector struct {
	mu      sync.Mutex
	done    bool
	intents []*toolwirev1.Intent
}

func withIntentCollector(ctx context.Context) (context.Context, *intentCollector) {
	c := &intentCollector{}
	return context.WithValue(ctx, intentsKey{}, c), c
}

func (c *intentCollector) add(typ, payloadJSON string) error {
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.done {
		return ErrNoInvocation
	}
	c.intents = append(c.intents, &toolwirev1.Intent{
		Id:          "i" + strconv.Itoa(len(c.intents)+1),
		Type:        typ,
		PayloadJson: payloadJSON,
	})
	return nil
}

// finish closes the collector and returns what it gathered. Later calls
// return nil.
func (c *intentCollector) finish() []*toolwirev1.Intent {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.done = true
	intents := c.intents
	c.intents = nil
	return intents
}
