package toolctl

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"time"

	"github.com/spf13/cobra"

	"github.com/toolwire/toolwire/pkg/client"
	toolwirev1 "github.com/toolwire/toolwire/pkg/toolproto/toolwire/v1"
	"google.golang.org/protobuf/types/known/timestamppb"
)

// callFlags are the per-call options of call and submit.
type callFlags struct {
	idempotencyKey, session, user, run, turn, specVersion, approvalToken string
	parent, model                                                        string
	scheduleToStart, scheduleToClose                                     time.Duration
	pinVersions                                                          bool
}

func (f *callFlags) register(cmd *cobra.Command) {
	fs := cmd.Flags()
	fs.StringVar(&f.idempotencyKey, "idempotency-key", "", "same key and arguments = the same call, executed once")
	fs.StringVar(&f.session, "session", "", "agent session the call belongs to")
	fs.StringVar(&f.user, "user", "", "end user the call acts for")
	fs.StringVar(&f.run, "run", "", "agent run the call belongs to")
	fs.StringVar(&f.turn, "turn", "", "conversation turn the call belongs to")
	fs.StringVar(&f.parent, "parent", "", "the call on whose behalf this one is made (a running call of your tenant; cancelling it cancels this one)")
	fs.StringVar(&f.model, "model", "", "the model the call is made for (its family's toolset applies: docs/toolsets.md)")
	fs.StringVar(&f.specVersion, "spec-version", "", "pin the tool's spec version (default: current)")
	fs.BoolVar(&f.pinVersions, "pin-versions", false, "lock the session's spec versions: its first call of a tool pins the version later calls run (needs --session)")
	fs.StringVar(&f.approvalToken, "approval-token", "", "approval token for tools that require approval")
	fs.DurationVar(&f.scheduleToStart, "schedule-to-start", 0, "longest wait in the queue before the call starts (0 = the tool's)")
	fs.DurationVar(&f.scheduleToClose, "schedule-to-close", 0, "longest time for the whole call (0 = the tool's)")
}

func (f *callFlags) options() []client.CallOption {
	return []client.CallOption{
		client.WithIdempotencyKey(f.idempotencyKey), client.WithSession(f.session), client.WithUser(f.user),
		client.WithRun(f.run), client.WithTurn(f.turn), client.WithSpecVersion(f.specVersion),
		client.WithApprovalToken(f.approvalToken), client.WithPinSessionVersions(f.pinVersions),
		client.WithScheduleToStart(f.scheduleToStart), client.WithScheduleToClose(f.scheduleToClose),
		client.WithParentCall(f.parent), client.WithModel(f.model),
	}
}

const argsHelp = `JSON is the arguments object, sent to the tool byte for byte; "-" reads it
from stdin; without it the arguments are {}.`

func (a *app) callCommand() *cobra.Command {
	var f callFlags
	var wait time.Duration
	var waitForApproval bool
	cmd := &cobra.Command{
		Use:   "call TOOL [JSON]",
		Short: "Call a tool and print its response",
		Long: `Call a tool and wait for its response.

` + argsHelp + `

With -o text the tool's content is printed on stdout, and an error as
"error: TYPE: message" plus one line per offending field on stderr,
followed by "call: ID" on stderr (the id for get, watch, session apply and
audit). With -o json the whole answer is printed as JSON.

When the policy asks for approval the call is parked, not run: the call id
(which is the approval id) is printed on stdout and, on stderr, why and the
command that approves it; the exit status is 3. With --wait-for-approval
the call waits (up to --wait) for an approver instead, then for its result.`,
		Example: `  toolctl call echo '{"text":"hi"}'
  echo '{"duration":"2s"}' | toolctl call sleep - --wait 1s`,
		Args: cobra.RangeArgs(1, 2),
		RunE: func(cmd *cobra.Command, args []string) error {
			callArgs, err := readArgs(cmd.InOrStdin(), args[1:])
			if err != nil {
				return err
			}
			if wait < 0 {
				return fmt.Errorf("--wait %s: must not be negative", wait)
			}
			opts := append(f.options(), client.WithWait(wait))
			if waitForApproval {
				opts = append(opts, client.WithWaitForApproval())
			}
			res, err := a.client.Call(cmd.Context(), args[0], callArgs, opts...)
			code := a.printOutcome(res, err)
			if res != nil && res.CallID != "" && !a.json() {
				// On stderr, so stdout stays the tool's output: the id for
				// get, watch, cancel, session apply and audit.
				fmt.Fprintf(a.io.Stderr, "call: %s\n", res.CallID)
			}
			return code
		},
	}
	f.register(cmd)
	cmd.Flags().DurationVar(&wait, "wait", 0, "longest wait for the response (0 = the dispatcher's default, 60s); then exit 3 with the call id")
	cmd.Flags().BoolVar(&waitForApproval, "wait-for-approval", false, "when the policy asks for approval, keep waiting for an approver and the result")
	return cmd
}

func (a *app) submitCommand() *cobra.Command {
	var f callFlags
	cmd := &cobra.Command{
		Use:   "submit TOOL [JSON]",
		Short: "Queue a call and print its id",
		Long: `Queue a call without waiting and print its id; fetch the result with
'toolctl get ID'. A call refused at admission is reported like a failed
call (exit 1).

` + argsHelp,
		Example: `  id=$(toolctl submit sleep '{"duration":"10s"}') && toolctl get "$id" --wait 1m`,
		Args:    cobra.RangeArgs(1, 2),
		RunE: func(cmd *cobra.Command, args []string) error {
			callArgs, err := readArgs(cmd.InOrStdin(), args[1:])
			if err != nil {
				return err
			}
			sub, err := a.client.Submit(cmd.Context(), args[0], callArgs, f.options()...)
			if err != nil {
				return &requestError{err}
			}
			if a.json() {
				msg := &toolwirev1.SubmitResponse{CallId: sub.CallID, Duplicate: sub.Duplicate}
				if sub.Result != nil {
					msg.Response = sub.Result.Response
				}
				if sub.Approval != nil {
					msg.State, msg.Response = toolwirev1.CallState_CALL_STATE_AWAITING_APPROVAL, awaitingProto(sub.Approval)
					if err := a.printProto(msg); err != nil {
						return err
					}
					return exitCode(ExitPending)
				}
				if err := a.printProto(msg); err != nil {
					return err
				}
				return exitFor(sub.Result)
			}
			if sub.Approval != nil {
				return a.printOutcome(nil, sub.Approval)
			}
			if sub.Result != nil && !sub.Result.OK() {
				a.printToolError(sub.Result)
				return exitCode(ExitToolError)
			}
			fmt.Fprintln(a.io.Stdout, sub.CallID)
			if sub.Duplicate {
				fmt.Fprintln(a.io.Stderr, "note: the idempotency key matched this earlier call; nothing new was queued")
			}
			return nil
		},
	}
	f.register(cmd)
	return cmd
}

func (a *app) getCommand() *cobra.Command {
	var wait time.Duration
	var tree bool
	cmd := &cobra.Command{
		Use:   "get CALL_ID",
		Short: "Print the result of a call",
		Long: `Print the result of a call by id, from any dispatcher replica, like 'call'
prints it. Without --wait a call that is still running exits 3 at once.

A call in a delegation chain (docs/delegation.md) also gets its place in
the chain on stderr: its ancestors from the root down, then its direct
children (at most 20, "and N more" past them), each with its id, tool and
state. --tree prints only that, on stdout (-o json: the GetDelegation
answer).`,
		Args: cobra.ExactArgs(1),
		RunE: func(cmd *cobra.Command, args []string) error {
			if wait < 0 {
				return fmt.Errorf("--wait %s: must not be negative", wait)
			}
			if tree {
				if wait > 0 {
					return errors.New("--tree answers at once: it does not take --wait")
				}
				return a.treeOutcome(cmd.Context(), args[0])
			}
			res, err := a.client.GetResult(cmd.Context(), args[0], wait)
			out := a.printOutcome(res, err)
			if !a.json() && knownCall(err) {
				// Best effort, and bounded: get has answered without it.
				ctx, cancel := context.WithTimeout(cmd.Context(), delegationWait)
				_ = a.printDelegation(ctx, a.io.Stderr, args[0])
				cancel()
			}
			return out
		},
	}
	cmd.Flags().DurationVar(&wait, "wait", 0, "wait this long for a call that is still running (0 = answer at once)")
	cmd.Flags().BoolVar(&tree, "tree", false, "print only the call's place in its delegation chain: ancestors and children")
	return cmd
}

// readArgs returns the arguments of call and submit: none, the JSON
// argument, or stdin for "-". It refuses text that is not JSON, so that a
// typo is a usage error rather than a VALIDATION answer.
func readArgs(stdin io.Reader, args []string) (json.RawMessage, error) {
	if len(args) == 0 {
		return nil, nil
	}
	b := []byte(args[0])
	if args[0] == "-" {
		var err error
		if b, err = io.ReadAll(stdin); err != nil {
			return nil, fmt.Errorf("read arguments from stdin: %w", err)
		}
		b = bytes.TrimSpace(b)
	}
	var check json.RawMessage
	if err := json.Unmarshal(b, &check); err != nil {
		return nil, fmt.Errorf("the arguments are not valid JSON: %w", err)
	}
	return b, nil
}

// printOutcome prints the answer of call or get and returns its exit code
// as an error (nil for success).
func (a *app) printOutcome(res *client.Result, err error) error {
	var se *client.StateError
	var ask *client.ApprovalRequiredError
	switch {
	case errors.As(err, &ask):
		if a.json() {
			if err := a.printProto(&toolwirev1.GetResultResponse{CallId: ask.CallID, State: toolwirev1.CallState_CALL_STATE_AWAITING_APPROVAL,
				Response: awaitingProto(ask)}); err != nil {
				return err
			}
			return exitCode(ExitPending)
		}
		a.printAwaiting(ask)
		return exitCode(ExitPending)
	case errors.As(err, &se):
		if a.json() {
			if err := a.printProto(&toolwirev1.GetResultResponse{CallId: se.CallID, State: se.State}); err != nil {
				return err
			}
		} else if errors.Is(err, client.ErrPending) {
			fmt.Fprintln(a.io.Stdout, se.CallID)
			fmt.Fprintf(a.io.Stderr, "pending: call %s has no result yet; fetch it with: toolctl get %s --wait 1m\n", se.CallID, se.CallID)
		} else {
			fmt.Fprintf(a.io.Stderr, "error: NOT_FOUND: no call %q is known\n", se.CallID)
		}
		if errors.Is(err, client.ErrPending) {
			return exitCode(ExitPending)
		}
		return exitCode(ExitToolError)
	case err != nil:
		return &requestError{err}
	}
	if a.json() {
		if err := a.printProto(&toolwirev1.GetResultResponse{CallId: res.CallID, State: toolwirev1.CallState_CALL_STATE_DONE, Response: res.Response}); err != nil {
			return err
		}
		return exitFor(res)
	}
	defer a.printOverBudget(res)
	if !res.OK() {
		a.printToolError(res)
		return exitCode(ExitToolError)
	}
	a.printContent(res)
	return nil
}

// printOverBudget notes on stderr that the call took longer than its soft
// latency budget (never a failure), when it did.
func (a *app) printOverBudget(res *client.Result) {
	o := res.OverBudget()
	if o == nil {
		return
	}
	by := o.GetSource()
	if o.GetEntry() != "" {
		by += " " + o.GetEntry()
	}
	fmt.Fprintf(a.io.Stderr, "note: took %s, over its soft latency budget of %s (%s)\n",
		o.GetElapsed().AsDuration().Round(time.Millisecond), o.GetBudget().AsDuration(), by)
}

// exitFor returns the exit code of a terminal result as an error; nil
// for none or a success.
func exitFor(res *client.Result) error {
	if res != nil && !res.OK() {
		return exitCode(ExitToolError)
	}
	return nil
}

// printAwaiting prints a parked call: its id on stdout (the approval id,
// for get, watch and approvals), and on stderr why, until when, and the
// commands that approve or deny it; a token when one was issued.
func (a *app) printAwaiting(ask *client.ApprovalRequiredError) {
	fmt.Fprintln(a.io.Stdout, ask.CallID)
	w := a.io.Stderr
	fmt.Fprintf(w, "awaiting approval: %s\n", ask.Reason)
	if !ask.ExpiresAt.IsZero() {
		fmt.Fprintf(w, "expires: %s\n", stamp(ask.ExpiresAt))
	}
	fmt.Fprintf(w, "approve it with: toolctl approvals approve %s\n", ask.ApprovalID)
	fmt.Fprintf(w, "deny it with:    toolctl approvals deny %s --reason '...'\n", ask.ApprovalID)
	fmt.Fprintf(w, "its result:      toolctl get %s --wait 1m\n", ask.CallID)
	if ask.Token != "" {
		fmt.Fprintf(w, "or, once your user confirmed, call again with --approval-token %s\n", ask.Token)
	}
}

// awaitingProto is the CONFIRMATION_REQUIRED answer of a parked call, for
// -o json.
func awaitingProto(ask *client.ApprovalRequiredError) *toolwirev1.ToolResponse {
	te := &toolwirev1.ToolError{Type: toolwirev1.ErrorType_ERROR_TYPE_CONFIRMATION_REQUIRED, Message: ask.Reason,
		PartialSideEffects: toolwirev1.PartialSideEffects_PARTIAL_SIDE_EFFECTS_NONE,
		Approval:           &toolwirev1.ApprovalRequired{ApprovalId: ask.ApprovalID, Token: ask.Token}}
	if ask.Err != nil {
		te.Suggestion = ask.Err.Suggestion
	}
	if !ask.ExpiresAt.IsZero() {
		te.Approval.ExpiresAt = timestamppb.New(ask.ExpiresAt)
	}
	return &toolwirev1.ToolResponse{CallId: ask.CallID, Error: te}
}
