package api_test

import (
	"errors"
	"strings"
	"testing"
	"time"

	"connectrpc.com/connect"
	"github.com/oklog/ulid/v2"
	"github.com/stretchr/testify/require"
	"google.golang.org/protobuf/types/known/durationpb"

	"github.com/toolwire/toolwire/internal/dispatch/dispatchtest"
	toolwirev1 "github.com/toolwire/toolwire/pkg/toolproto/toolwire/v1"
)

// Another tenant's call id answers exactly as an id nobody minted does —
// NOT_FOUND from GetResult (with and without a wait), GetOutput,
// GetDelegation and Watch, UNKNOWN_CALL from Cancel — and neither answers "pending", so a
// client never polls without end (issue 28, finding 5). The owner still
// sees its calls.
func TestAnotherTenantsCallAnswersAsAMadeUpID(t *testing.T) {
	t.Parallel()
	s := dispatchtest.Start(t, dispatchtest.Options{Auth: policyKeys})
	ctx := t.Context()
	done, err := s.Client.Call(ctx, as("acme-bot", &toolwirev1.CallRequest{Tool: "echo", ArgumentsJson: `{"text":"hi"}`}))
	require.NoError(t, err)
	require.Equal(t, toolwirev1.CallState_CALL_STATE_DONE, done.Msg.State)
	running, err := s.Client.Submit(ctx, as("acme-bot", &toolwirev1.SubmitRequest{Tool: "sleep", ArgumentsJson: `{"duration":"20s"}`}))
	require.NoError(t, err)

	answers := func(key, callID string) []string {
		var out []string
		for _, wait := range []time.Duration{0, 2 * time.Second} {
			_, err := s.Client.GetResult(ctx, as(key, &toolwirev1.GetResultRequest{CallId: callID, Wait: durationpb.New(wait)}))
			out = append(out, connect.CodeOf(err).String()+" "+redactID(err, callID))
		}
		_, err := s.Client.GetOutput(ctx, as(key, &toolwirev1.GetOutputRequest{CallId: callID}))
		out = append(out, connect.CodeOf(err).String()+" "+redactID(err, callID))
		_, err = s.Client.GetDelegation(ctx, as(key, &toolwirev1.GetDelegationRequest{CallId: callID}))
		out = append(out, connect.CodeOf(err).String()+" "+redactID(err, callID))
		stream, err := s.Client.Watch(ctx, as(key, &toolwirev1.WatchRequest{CallId: callID}))
		require.NoError(t, err)
		for stream.Receive() {
		}
		out = append(out, connect.CodeOf(stream.Err()).String()+" "+redactID(stream.Err(), callID))
		c, err := s.Client.Cancel(ctx, as(key, &toolwirev1.CancelRequest{CallId: callID}))
		require.NoError(t, err)
		return append(out, c.Msg.Outcome.String())
	}
	madeUp := answers("beta-bot", ulid.Make().String())
	require.Equal(t, []string{"not_found unknown call ID", "not_found unknown call ID", "not_found unknown call ID",
		"not_found unknown call ID", "not_found unknown call ID", "CANCEL_OUTCOME_UNKNOWN_CALL"}, madeUp)
	require.Equal(t, madeUp, answers("beta-bot", done.Msg.CallId), "a finished call of another tenant")
	require.Equal(t, madeUp, answers("beta-admin", running.Msg.CallId), "a running call of another tenant, asked by its admin")

	g, err := s.Client.GetResult(ctx, as("acme-bot", &toolwirev1.GetResultRequest{CallId: done.Msg.CallId}))
	require.NoError(t, err)
	require.Equal(t, toolwirev1.CallState_CALL_STATE_DONE, g.Msg.State, "the owner sees its call")
	dg, err := s.Client.GetDelegation(ctx, as("acme-bot", &toolwirev1.GetDelegationRequest{CallId: done.Msg.CallId}))
	require.NoError(t, err)
	require.Equal(t, toolwirev1.CallState_CALL_STATE_DONE, dg.Msg.State, "and its (empty) chain")
	c, err := s.Client.Cancel(ctx, as("acme-bot", &toolwirev1.CancelRequest{CallId: running.Msg.CallId}))
	require.NoError(t, err)
	require.Equal(t, toolwirev1.CancelOutcome_CANCEL_OUTCOME_REQUESTED, c.Msg.Outcome, "its own running call is cancelled, and only by it")
}

// redactID is err's message with callID replaced, "" for none: answers
// about two ids compare equal when they say the same.
func redactID(err error, callID string) string {
	if err == nil {
		return ""
	}
	ce := new(connect.Error)
	if !errors.As(err, &ce) {
		return err.Error()
	}
	return strings.ReplaceAll(strings.TrimPrefix(ce.Message(), "dispatch: "), `"`+callID+`"`, "ID")
}
