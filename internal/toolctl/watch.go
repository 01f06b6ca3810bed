package toolctl

import (
	"fmt"
	"strings"
	"time"

	"github.com/spf13/cobra"

	"github.com/toolwire/toolwire/pkg/client"
	toolwirev1 "github.com/toolwire/toolwire/pkg/toolproto/toolwire/v1"
)

func (a *app) watchCommand() *cobra.Command {
	return &cobra.Command{
		Use:   "watch CALL_ID",
		Short: "Print the events of a call until it finishes",
		Long: `Print the lifecycle and progress events of a call, through any dispatcher
replica: those already recorded, then the new ones as they happen, until the
call finishes.

With -o text each event is one line on stdout — time, type, attempt, worker
and the event's detail (progress percent and message, the error of a failed
attempt and the retry delay, a cancel's reason, an approval's id, approver and
reason; a LATENCY_BUDGET_EXCEEDED event says how long the call took
against its soft latency budget) — and the call's result follows as 'get'
prints it. With -o json each event is one CallEvent as
protobuf JSON per line, the last one FINISHED with the response (or
REJECTED). The exit status is that of 'get' for the result.`,
		Example: `  id=$(toolctl submit sleep '{"duration":"5s"}') && toolctl watch "$id"`,
		Args:    cobra.ExactArgs(1),
		RunE: func(cmd *cobra.Command, args []string) error {
			var final *client.Result
			err := a.client.Watch(cmd.Context(), args[0], func(ev *toolwirev1.CallEvent) error {
				if r := client.Final(ev); r != nil {
					final = r
				}
				if a.json() {
					return a.printProtoLine(ev)
				}
				_, err := fmt.Fprintln(a.io.Stdout, eventLine(ev))
				return err
			})
			switch {
			case err != nil:
				return a.printOutcome(nil, err)
			case final == nil: // a FINISHED event without its response
				return &requestError{fmt.Errorf("the watch of %s ended without a result", args[0])}
			case a.json():
				return exitFor(final)
			}
			return a.printOutcome(final, nil)
		},
	}
}

// eventLine renders an event as one line: time, type, then the fields
// the event has.
func eventLine(ev *toolwirev1.CallEvent) string {
	var b strings.Builder
	t := ev.GetTime().AsTime()
	if ev.GetTime() == nil {
		t = time.Now()
	}
	b.WriteString(t.Local().Format("2006-01-02T15:04:05.000Z07:00"))
	b.WriteByte(' ')
	b.WriteString(strings.TrimPrefix(ev.GetType().String(), "CALL_EVENT_TYPE_"))
	if n := ev.GetAttempt(); n > 0 {
		fmt.Fprintf(&b, " attempt=%d", n)
	}
	if w := ev.GetWorker(); w != "" {
		fmt.Fprintf(&b, " worker=%s", w)
	}
	if ev.Percent != nil {
		fmt.Fprintf(&b, " %.4g%%", ev.GetPercent())
	}
	if te := ev.GetError(); te != nil {
		fmt.Fprintf(&b, " error=%s", client.TypeName(te.GetType()))
	}
	if d := ev.GetRetryDelay(); d != nil {
		fmt.Fprintf(&b, " retry_in=%s", d.AsDuration())
	}
	if ap := ev.GetApproval(); ap != nil {
		switch ev.GetType() {
		case toolwirev1.CallEventType_CALL_EVENT_TYPE_AWAITING_APPROVAL:
			fmt.Fprintf(&b, " approval=%s expires=%s", ap.GetId(), stamp(ap.GetExpiresAt().AsTime()))
		default:
			if by := ap.GetApprover(); by != "" {
				fmt.Fprintf(&b, " by=%s", by)
			}
			if s := ap.GetScope(); s > toolwirev1.ApprovalScope_APPROVAL_SCOPE_ONCE {
				fmt.Fprintf(&b, " for=%s grant=%s", strings.ToLower(strings.TrimPrefix(s.String(), "APPROVAL_SCOPE_")), ap.GetGrantId())
			}
		}
	}
	if r := ev.GetResponse(); r != nil {
		if r.GetOk() {
			b.WriteString(" ok")
		} else {
			fmt.Fprintf(&b, " error=%s", client.TypeName(r.GetError().GetType()))
		}
	}
	msg := ev.GetMessage()
	if msg == "" {
		msg = ev.GetError().GetMessage()
	}
	if msg == "" {
		msg = ev.GetApproval().GetReason() // an approver's reason, an expiry's
	}
	if msg != "" {
		b.WriteString(": ")
		b.WriteString(strings.Join(strings.Fields(msg), " "))
	}
	return b.String()
}
