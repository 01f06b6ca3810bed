package toolctl

import (
	"context"
	"errors"
	"fmt"
	"io"
	"strings"
	"time"

	"github.com/toolwire/toolwire/pkg/client"
	toolwirev1 "github.com/toolwire/toolwire/pkg/toolproto/toolwire/v1"
)

// printDelegation prints call callID's place in its delegation chain
// (GetDelegation) on w: its ancestors, root first, down to the call, then
// its direct children. A call outside any chain prints nothing. Errors
// are returned for --tree, and ignored by a plain get (a dispatcher too
// old for GetDelegation still answers get).
func (a *app) printDelegation(ctx context.Context, w io.Writer, callID string) error {
	dg, err := a.client.GetDelegation(ctx, callID)
	if err != nil {
		return err
	}
	if a.json() {
		return a.printProto(dg)
	}
	if len(dg.GetAncestors()) == 0 && len(dg.GetChildren()) == 0 && dg.GetMoreChildren() == 0 {
		return nil
	}
	fmt.Fprintln(w, "delegation:")
	anc := dg.GetAncestors()
	for i := len(anc) - 1; i >= 0; i-- {
		role := "ancestor"
		switch {
		case i == 0:
			role = "parent"
		case i == len(anc)-1:
			role = "root"
		}
		fmt.Fprintf(w, "  %-8s %s\n", role, delegatedLine(anc[i]))
	}
	fmt.Fprintf(w, "  %-8s %s\n", "this", callID)
	for _, c := range dg.GetChildren() {
		fmt.Fprintf(w, "  %-8s %s\n", "child", delegatedLine(c))
	}
	if n := dg.GetMoreChildren(); n > 0 {
		fmt.Fprintf(w, "  and %d more children\n", n)
	}
	return nil
}

// delegatedLine is one call of a chain: its id, tool and state.
func delegatedLine(c *toolwirev1.DelegatedCall) string {
	return fmt.Sprintf("%s %s %s", c.GetCallId(), orDash(c.GetTool()), delegatedState(c))
}

// delegatedState is a chain call's state in words: ok, the error's type,
// running or awaiting approval.
func delegatedState(c *toolwirev1.DelegatedCall) string {
	switch c.GetState() {
	case toolwirev1.CallState_CALL_STATE_DONE:
		if c.GetOk() {
			return "ok"
		}
		return strings.TrimPrefix(c.GetErrorType().String(), "ERROR_TYPE_")
	case toolwirev1.CallState_CALL_STATE_AWAITING_APPROVAL:
		return "awaiting-approval"
	case toolwirev1.CallState_CALL_STATE_PENDING:
		return "running"
	}
	return "unknown"
}

func orDash(s string) string {
	if s == "" {
		return "-"
	}
	return s
}

// delegationWait bounds the chain plain get prints after the result.
const delegationWait = 5 * time.Second

// treeOutcome is get --tree: the chain on stdout; an unknown call exits
// as get's does.
func (a *app) treeOutcome(ctx context.Context, callID string) error {
	err := a.printDelegation(ctx, a.io.Stdout, callID)
	var se *client.StateError
	switch {
	case errors.As(err, &se):
		fmt.Fprintf(a.io.Stderr, "error: NOT_FOUND: no call %q is known\n", se.CallID)
		return exitCode(ExitToolError)
	case err != nil:
		return &requestError{err}
	}
	return nil
}

// knownCall tells whether get's answer was about a call that exists:
// a result, a pending or a parked call (not unknown, not a failed
// request).
func knownCall(err error) bool {
	var se *client.StateError
	var ask *client.ApprovalRequiredError
	return err == nil || errors.As(err, &ask) || (errors.As(err, &se) && !errors.Is(err, client.ErrUnknownCall))
}
