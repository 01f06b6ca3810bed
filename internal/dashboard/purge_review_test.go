package dashboard

import (
	"net/url"
	"strconv"
	"testing"

	"github.com/nats-io/nats.go"
	"github.com/oklog/ulid/v2"
	"github.com/stretchr/testify/require"
	"google.golang.org/protobuf/proto"
	"google.golang.org/protobuf/types/known/timestamppb"

	"github.com/toolwire/toolwire/internal/believed"
	"github.com/toolwire/toolwire/internal/dispatch"
	"github.com/toolwire/toolwire/internal/dlq"
	toolwirev1 "github.com/toolwire/toolwire/pkg/toolproto/toolwire/v1"
)

// copyLetter publishes a copy of the letter at seq, changed by edit, as
// a worker could write it, and returns its sequence.
func copyLetter(t *testing.T, u *uiStack, seq uint64, edit func(*toolwirev1.DeadLetter)) uint64 {
	t.Helper()
	l, err := u.UI.dlq.Get(t.Context(), seq)
	require.NoError(t, err)
	dl := proto.Clone(l.Record).(*toolwirev1.DeadLetter)
	edit(dl)
	data, err := proto.Marshal(dl)
	require.NoError(t, err)
	c := dl.GetCall()
	ack, err := u.Env.Bus.JS.Publish(t.Context(), u.Env.Bus.Subjects.DLQ(c.Executor, c.GetCaller().GetTenant(), c.Provider, c.Tool), data)
	require.NoError(t, err)
	return ack.Sequence
}

// A purge believes the calls stream's record of the call, never the
// letter's worker-written copy: a letter naming a real call with another
// tool or tenant is kept (ErrNotPurgeable); a letter whose caller or spec
// version was changed is purged, but its DEAD_LETTER_PURGED event names
// the stored call's caller and spec version, is believed, and carries
// the message id purge-<seq>, so that a second record of it is a
// duplicate the events stream does not store.
func TestPurgeRecordIsTheStoredCalls(t *testing.T) {
	t.Parallel()
	u := startUI(t, pageTools(), dispatch.Config{})
	id, genuine := deadLetter(t, u, acmeBot, 1)
	e, ok := u.UI.index.Get(id)
	require.True(t, ok)
	l, err := u.UI.dlq.Get(t.Context(), genuine)
	require.NoError(t, err)
	orig := l.Record.GetCall()

	for name, edit := range map[string]func(*toolwirev1.DeadLetter){
		"another tool":   func(dl *toolwirev1.DeadLetter) { dl.Call.Tool = "echo" },
		"another tenant": func(dl *toolwirev1.DeadLetter) { dl.Call.Caller.Tenant = "globex" },
	} {
		seq := copyLetter(t, u, genuine, edit)
		_, err := u.UI.dlq.Purge(t.Context(), dlq.PurgeRequest{Seq: seq, CallSeq: e.Seq, By: "test", Keys: u.UI.signers})
		require.ErrorIs(t, err, dlq.ErrNotPurgeable, name)
		require.False(t, letterGone(t, u, seq), name)
	}

	forged := copyLetter(t, u, genuine, func(dl *toolwirev1.DeadLetter) {
		dl.Call.Caller.Agent, dl.Call.SpecVersion = "mallory", "forged-version"
	})
	_, err = u.UI.dlq.Purge(t.Context(), dlq.PurgeRequest{Seq: forged, CallSeq: e.Seq, By: "test", Keys: u.UI.signers})
	require.NoError(t, err)
	require.True(t, letterGone(t, u, forged))
	subject := u.Env.Bus.Subjects.Event("acme", orig.Dispatcher, id)
	m, err := u.Env.Bus.Events.GetLastMsgForSubject(t.Context(), subject)
	require.NoError(t, err)
	ev, _, err := believed.CheckEvent(t.Context(), u.UI.signers, id, "flaky", m.Header, m.Data)
	require.NoError(t, err, "the purge record is believed")
	require.Equal(t, toolwirev1.CallEventType_CALL_EVENT_TYPE_DEAD_LETTER_PURGED, ev.Type)
	require.Equal(t, "bot", ev.GetCaller().GetAgent(), "the stored call's caller, not the letter's")
	require.Equal(t, orig.SpecVersion, ev.SpecVersion, "the stored call's spec version, not the letter's")
	require.Equal(t, dlq.PurgeMsgID(forged), m.Header.Get(nats.MsgIdHdr))

	again := &nats.Msg{Subject: subject, Header: m.Header, Data: m.Data}
	ack, err := u.Env.Bus.JS.PublishMsg(t.Context(), again)
	require.NoError(t, err)
	require.True(t, ack.Duplicate, "a second record of the same purge is not stored")
}

// A letter whose call has no result stored yet (the letter may be the
// only record of why it died) is kept: the dry run lists it apart with
// why, and dlq.Purge refuses it.
func TestPurgeKeepsALetterWhoseResultIsNotStored(t *testing.T) {
	t.Parallel()
	u := startUI(t, pageTools(), dispatch.Config{})
	held := hold(t, u, acmeBot)
	e, ok := u.UI.index.Get(held)
	require.True(t, ok)
	m, err := u.Env.Bus.Calls.GetMsg(t.Context(), e.Seq)
	require.NoError(t, err)
	c := &toolwirev1.ToolCall{}
	require.NoError(t, proto.Unmarshal(m.Data, c))
	data, err := proto.Marshal(&toolwirev1.DeadLetter{Call: c, Reason: "worker lost", Attempts: 1})
	require.NoError(t, err)
	ack, err := u.Env.Bus.JS.Publish(t.Context(), u.Env.Bus.Subjects.DLQ(c.Executor, "acme", c.Provider, c.Tool), data)
	require.NoError(t, err)

	admin := u.signIn(t, adminKey)
	_, body := admin.act("/ui/dlq/purge", url.Values{"tool": {"hold"}})
	require.Contains(t, body, strconv.FormatUint(ack.Sequence, 10)+`</a>: its call&#39;s result is not stored yet`, body)
	require.NotContains(t, body, `data-testid="confirm-form"`)

	_, err = u.UI.dlq.Purge(t.Context(), dlq.PurgeRequest{Seq: ack.Sequence, CallSeq: e.Seq, By: "test", Keys: u.UI.signers})
	require.ErrorIs(t, err, dlq.ErrNotPurgeable)
	require.ErrorContains(t, err, "result is not stored yet")
	require.False(t, letterGone(t, u, ack.Sequence))
}

// Letters the purge keeps do not take the dry run's maxBulk places: with
// more than maxBulk letters of calls the index does not hold newer than
// a purgeable one, the dry run still lists the purgeable one.
func TestPurgeDryRunKeptLettersDoNotTakeTheCap(t *testing.T) {
	t.Parallel()
	u := startUI(t, pageTools(), dispatch.Config{})
	_, old := deadLetter(t, u, acmeBot, 1)
	subject := u.Env.Bus.Subjects.DLQ(toolwirev1.ExecutorType_EXECUTOR_TYPE_NATIVE, "acme", "builtin", "flaky")
	for range maxBulk + 1 {
		data, err := proto.Marshal(&toolwirev1.DeadLetter{Reason: "never stored", Attempts: 1, Time: timestamppb.Now(),
			Call: &toolwirev1.ToolCall{CallId: ulid.Make().String(), Tool: "flaky", Arguments: []byte(`{}`), Provider: "builtin",
				Executor: toolwirev1.ExecutorType_EXECUTOR_TYPE_NATIVE, Caller: &toolwirev1.Caller{Tenant: "acme", Agent: "bot"}}})
		require.NoError(t, err)
		_, err = u.Env.Bus.JS.Publish(t.Context(), subject, data)
		require.NoError(t, err)
	}
	admin := u.signIn(t, adminKey)
	_, body := admin.act("/ui/dlq/purge", nil)
	require.Equal(t, []string{strconv.FormatUint(old, 10)}, confirmOf(t, body).items, "the older purgeable letter is listed")
	require.Contains(t, body, strconv.Itoa(maxBulk+1)+" more match but are kept (the newest 500 listed)")
}
