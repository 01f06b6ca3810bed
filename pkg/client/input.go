package client

import (
	toolwirev1 "github.com/toolwire/toolwire/pkg/toolproto/toolwire/v1"
)

// InputRequired returns what the tool asked its caller for, when it
// answered that it needs input before it can finish (nil otherwise):
// answer with WithAnswers, calling the same tool with the same arguments.
func (r *Result) InputRequired() *toolwirev1.InputRequired {
	return r.Response.GetInputRequired()
}

// WithAnswers makes the call continue callID, whose tool asked for input:
// answers are by the keys of its requests, each a JSON object (an MCP
// ElicitResult, CreateMessageResult or ListRootsResult). The call must be
// of the same tool with the same arguments, as sent the first time.
func WithAnswers(callID string, answers map[string]string) CallOption {
	return func(s *callSettings) {
		s.opts.Continues = callID
		s.opts.InputResponsesJson = answers
	}
}

// WithClientCapabilities declares what input the caller can give (a JSON
// object of MCP client capabilities: "elicitation", "sampling", "roots"),
// so that tools ask only for that.
func WithClientCapabilities(capabilitiesJSON string) CallOption {
	return func(s *callSettings) { s.opts.ClientCapabilitiesJson = capabilitiesJSON }
}
