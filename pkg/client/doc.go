// Package client is the Go SDK for agent services that call tools through
// toolwire.
//
//	c, err := client.New("http://127.0.0.1:8080", client.WithAPIKey(key))
//	...
//	res, err := c.Call(ctx, "search", map[string]any{"query": q})
//	if err != nil {
//		return err // no terminal response: transport failure or still pending
//	}
//	if err := res.Err(); err != nil {
//		return err // the tool answered with a *ToolError
//	}
//	fmt.Println(res.Text())
//
// # Submit, wait, fetch
//
// A call is admitted by a dispatcher (tool lookup, scopes, limits, JSON
// Schema), queued on JetStream and executed by a worker of the tool's
// pool, which publishes exactly one terminal response. Call does all of
// that and waits for the response, up to a wait (WithWait; by default 60s,
// and never past ctx's deadline). When the wait ends first the call keeps
// running, and Call returns a *StateError matching ErrPending with the
// call id. Submit queues a call and returns its id at once. GetResult
// fetches a response by call id, optionally waiting for it, from any
// dispatcher replica: results live in JetStream, not in the dispatcher
// that admitted the call, so a caller may submit through one replica and
// fetch through another, or after a restart of either.
//
// A response over the tool's output limits (limits.max_output_bytes and
// max_output_lines) arrives cut, with a marker line and
// Meta.Truncated set; GetOutput reads the whole output text by byte range
// (OutputQuery.Offset, Limit) or by pattern (Grep), page by page until
// Eof.
//
// # Watch and cancel
//
// Watch streams a call's lifecycle and progress events (ACCEPTED, then per
// attempt STARTED, PROGRESS, RETRYING) up to its terminal event, FINISHED
// with the response or REJECTED, from any replica; Final turns the
// terminal event into a Result. Cancel asks a call to stop: a queued call
// never runs, a running one has its context cancelled, and its result is
// CANCELLED. Cancelling twice, late or an unknown id is harmless; the
// CancelOutcome says which it was.
//
// # Tool errors and transport errors
//
// Two kinds of failure are kept apart:
//
//   - A tool error is an answer. The call reached the fabric and its
//     terminal response says it failed: refused at admission (VALIDATION
//     with field violations, NOT_FOUND, PERMISSION_DENIED, ...) or failed
//     in a worker (TIMEOUT, TRANSIENT, MAX_ATTEMPTS, ...). Call and
//     GetResult return it as a Result with a nil error; Result.Err gives
//     the typed *ToolError with its type, message, retryability, partial
//     side effects and violations. An agent usually hands it back to the
//     model.
//   - A transport error means there is no answer: the dispatcher could not
//     be reached, refused the credentials, or ctx ended. It is returned as
//     the error, wrapping the *connect.Error, so connect.CodeOf(err) tells
//     codes apart. Whether the call was admitted is then unknown; give
//     calls an idempotency key (WithIdempotencyKey) to retry them safely.
//
// A call that has no terminal response yet is neither: Call and GetResult
// return a *StateError (ErrPending, or ErrUnknownCall for an id the
// dispatcher does not know) carrying the call id.
//
// # Approvals
//
// When the dispatcher's policy asks for approval (a rule, or a tool whose
// spec requires approval), the call is parked for an approver, never
// queued: Call and GetResult return an *ApprovalRequiredError carrying
// the approval id (which is the call id), its expiry, the reason and,
// for a caller with the "confirm" scope when the dispatchers hold token
// keys, a token; Submit reports it in Submission.Approval. It unwraps to
// the CONFIRMATION_REQUIRED *ToolError. WithWaitForApproval makes Call
// wait instead, for the result once approved and run, or the denial.
// An approver (the "approve" scope) lists (ListApprovals, GetApproval),
// approves (Approve; ApproveFor a session, agent or tenant also stores a
// grant covering later calls, shaped by WithArgsPattern, WithGrantTool
// and WithGrantTTL) or denies (Deny, with a reason the caller is told as
// PERMISSION_DENIED); ListGrants and RevokeGrant manage grants. An
// orchestrator that confirms with its own user sends the same call again
// with WithApprovalToken(err.Token): it runs as the parked call, once.
//
// # Arguments
//
// Arguments travel as exact JSON text (CallRequest.arguments_json). Pass
// the JSON an LLM emitted as a json.RawMessage, []byte or string and it
// reaches the tool byte for byte — big integers included; pass any other
// Go value and it is encoded with encoding/json. The protobuf Struct form
// of the arguments, which rounds numbers through float64, is never used.
//
// # Protocols
//
// The client speaks Connect with binary protobuf by default. WithJSON
// switches to protobuf JSON and WithGRPC to the gRPC protocol; all three
// reach the same dispatcher handler. WithAPIKey authenticates every
// request with a bearer key, from which the dispatcher derives the
// caller's tenant, agent and scopes.
package client
