package dashboard

import (
	"errors"
	"fmt"
	"net/http"
	"net/url"
	"slices"
	"strconv"
	"strings"
	"testing"

	"github.com/oklog/ulid/v2"
	"github.com/stretchr/testify/require"
	"google.golang.org/protobuf/proto"
	"google.golang.org/protobuf/types/known/timestamppb"

	"github.com/toolwire/toolwire/internal/audit"
	"github.com/toolwire/toolwire/internal/dispatch"
	"github.com/toolwire/toolwire/internal/dlq"
	toolwirev1 "github.com/toolwire/toolwire/pkg/toolproto/toolwire/v1"
)

// letterGone says whether the DLQ no longer holds a letter at seq.
func letterGone(t *testing.T, u *uiStack, seq uint64) bool {
	t.Helper()
	_, err := u.UI.dlq.Get(t.Context(), seq)
	require.True(t, err == nil || errors.Is(err, dlq.ErrNotFound), "%v", err)
	return err != nil
}

// A purge's dry run names the exact letters the filter selects and their
// count; a confirmation that does not repeat them (another count, a
// letter added, another session's) purges nothing; the confirmation
// purges exactly the listed letters (not one that matched since) from the
// DLQ, and each call's record stays: the audit still reads the call,
// dead-lettered, with its arguments, and its page shows the purge and
// who asked, and offers no retry.
func TestPurgeConfirmsExactlyTheListedLetters(t *testing.T) {
	t.Parallel()
	u := startUI(t, pageTools(), dispatch.Config{})
	dead := map[uint64]string{}
	for i := range 3 {
		id, seq := deadLetter(t, u, acmeBot, i)
		dead[seq] = id
	}
	admin := u.signIn(t, adminKey)
	_, page := admin.get("/ui/dlq")
	require.Contains(t, page, `data-testid="bulk-purge"`)

	res, body := admin.act("/ui/dlq/purge", url.Values{"tool": {"flaky"}})
	require.Equal(t, http.StatusOK, res.StatusCode, body)
	require.Contains(t, body, `data-testid="count">3<`, "the exact count")
	dry := confirmOf(t, body)
	var want []string
	for seq := range dead {
		want = append(want, strconv.FormatUint(seq, 10))
	}
	require.ElementsMatch(t, want, dry.items)

	_, lateSeq := deadLetter(t, u, acmeBot, 99) // matches the filter, after the dry run
	late := strconv.FormatUint(lateSeq, 10)
	for name, f := range map[string]url.Values{
		"another count":    dry.form(url.Values{"count": {"2"}}),
		"a letter added":   dry.form(url.Values{"item": append(slices.Clone(dry.items), late), "count": {"4"}}),
		"a cancel's token": dry.form(url.Values{"token": {u.UI.keys.confirmToken(&viewer{CSRF: admin.csrf()}, bulkCancelKind.action, dry.items)}}),
		"not a sequence":   dry.form(url.Values{"item": {"07"}, "count": {"1"}}),
	} {
		res, body := admin.act("/ui/dlq/purge", f)
		require.Equal(t, http.StatusBadRequest, res.StatusCode, "%s: %s", name, body)
	}
	res, _ = u.signIn(t, adminKey).act("/ui/dlq/purge", dry.form(nil))
	require.Equal(t, http.StatusBadRequest, res.StatusCode, "another session's confirmation")
	for seq := range dead {
		require.False(t, letterGone(t, u, seq), "a refused confirmation purges nothing")
	}

	res, body = admin.act("/ui/dlq/purge", dry.form(url.Values{"tool": {"flaky"}}))
	require.Equal(t, http.StatusOK, res.StatusCode, body)
	require.Contains(t, body, `data-testid="purged-count">3<`, body)
	require.NotContains(t, body, `data-testid="failed-count"`)
	for seq, id := range dead {
		require.True(t, letterGone(t, u, seq), "a listed letter is purged")
		e, ok := u.UI.index.Get(id)
		require.True(t, ok)
		rec, err := u.UI.audit.One(t.Context(), e.Seq)
		require.NoError(t, err, "the call's record stays")
		require.Equal(t, id, rec.CallID)
		require.Equal(t, audit.OutcomeDeadLettered, rec.Outcome)
		require.Contains(t, string(rec.Arguments), `"n":`, "its arguments stay (for replay)")
		waitFor(t, "the call's page shows the purge and who asked", func() bool {
			_, page := admin.get("/ui/calls/" + id)
			return strings.Contains(page, fmt.Sprintf("dead letter %d purged from the DLQ by acme/ops (dashboard)", seq)) &&
				strings.Contains(page, "dead letter purged")
		})
		_, page := admin.get("/ui/calls/" + id)
		require.NotContains(t, page, "Retry from dead letter", "a purged letter is not offered for retry")
	}
	require.False(t, letterGone(t, u, lateSeq), "a letter not listed is never purged")
}

// A letter whose call's record cannot be confirmed in the calls stream
// (its call is not one the index holds: a letter a worker wrote about a
// call no dispatcher stored) and a letter without a decodable call are
// kept: the dry run lists them apart, and a confirmation naming them
// (a token minted for them) purges neither. Another tenant's letter is
// answered as no letter.
func TestPurgeKeepsLettersThatAreTheLastRecord(t *testing.T) {
	t.Parallel()
	u := startUI(t, pageTools(), dispatch.Config{})
	subj := u.Env.Bus.Subjects
	publish := func(dl *toolwirev1.DeadLetter, tenant string) uint64 {
		data, err := proto.Marshal(dl)
		require.NoError(t, err)
		ack, err := u.Env.Bus.JS.Publish(t.Context(), subj.DLQ(toolwirev1.ExecutorType_EXECUTOR_TYPE_NATIVE, tenant, "builtin", "ghost"), data)
		require.NoError(t, err)
		return ack.Sequence
	}
	ghostCall := func(tenant string) *toolwirev1.ToolCall {
		return &toolwirev1.ToolCall{CallId: ulid.Make().String(), Tool: "ghost", Arguments: []byte(`{}`), Provider: "builtin",
			Executor: toolwirev1.ExecutorType_EXECUTOR_TYPE_NATIVE, Caller: &toolwirev1.Caller{Tenant: tenant, Agent: "bot"}}
	}
	unstored := publish(&toolwirev1.DeadLetter{Call: ghostCall("acme"), Reason: "never stored", Attempts: 1, Time: timestamppb.Now()}, "acme")
	theirs := publish(&toolwirev1.DeadLetter{Call: ghostCall("globex"), Reason: "not yours", Attempts: 1, Time: timestamppb.Now()}, "globex")
	_, stored := deadLetter(t, u, acmeBot, 1)

	root := u.signIn(t, installKey)
	_, body := root.act("/ui/dlq/purge", nil)
	require.Equal(t, []string{strconv.FormatUint(stored, 10)}, confirmOf(t, body).items, "only the letter whose call's record is confirmed")
	require.Contains(t, body, fmt.Sprintf(`<a href="/ui/dlq/%d">%d</a>: its call is not among the calls`, unstored, unstored))

	admin := u.signIn(t, adminKey)
	items := []string{strconv.FormatUint(unstored, 10), strconv.FormatUint(theirs, 10)}
	forged := confirmForm{items: items, count: "2", token: u.UI.keys.confirmToken(&viewer{CSRF: admin.csrf()}, bulkPurgeKind.action, items)}
	res, body := admin.act("/ui/dlq/purge", forged.form(nil))
	require.Equal(t, http.StatusOK, res.StatusCode, body)
	require.Contains(t, body, `data-testid="purged-count">0<`)
	require.Contains(t, body, `data-testid="failed-count">2<`)
	require.Contains(t, body, "the letter is kept")
	require.Contains(t, body, fmt.Sprintf("no such dead letter at sequence %d", theirs), "another tenant's letter is no letter")
	require.False(t, letterGone(t, u, unstored))
	require.False(t, letterGone(t, u, theirs))

	// The DLQ itself refuses a purge whose call record is not where the
	// caller says.
	other := call(t, u, acmeBot, "echo", `{"text":"another call"}`)
	waitFor(t, "the index has "+other.CallId, func() bool { _, ok := u.UI.index.Get(other.CallId); return ok })
	e, _ := u.UI.index.Get(other.CallId)
	for _, callSeq := range []uint64{0, e.Seq, e.Seq + 1000} {
		_, err := u.UI.dlq.Purge(t.Context(), dlq.PurgeRequest{Seq: stored, CallSeq: callSeq, By: "test"})
		require.ErrorIs(t, err, dlq.ErrNotPurgeable, "call record at %d", callSeq)
		require.False(t, letterGone(t, u, stored))
	}
}
