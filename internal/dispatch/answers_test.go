package dispatch_test

import (
	"context"
	"log/slog"
	"os"
	"path/filepath"
	"testing"
	"time"

	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"
	"github.com/stretchr/testify/require"
	"google.golang.org/protobuf/proto"

	"github.com/toolwire/toolwire/internal/audit"
	"github.com/toolwire/toolwire/internal/believed"
	"github.com/toolwire/toolwire/internal/builtin"
	"github.com/toolwire/toolwire/internal/bus"
	"github.com/toolwire/toolwire/internal/bus/bustest"
	"github.com/toolwire/toolwire/internal/dispatch"
	"github.com/toolwire/toolwire/internal/envelope"
	"github.com/toolwire/toolwire/internal/identity"
	"github.com/toolwire/toolwire/internal/registry"
	"github.com/toolwire/toolwire/internal/signing"
	"github.com/toolwire/toolwire/internal/workerconfig"
	"github.com/toolwire/toolwire/pkg/tool"
	toolwirev1 "github.com/toolwire/toolwire/pkg/toolproto/toolwire/v1"
)

// signedStack is a dispatcher and a worker process's worth of parts on a
// server that takes the role credentials: the worker dials with the
// worker credential and signs with a key of its own, which the
// dispatcher's --worker-keys directory holds for the pool "native".
type signedStack struct {
	env  *bustest.RoleEnv
	d    *dispatch.Dispatcher
	key  *signing.Key // the worker's
	conn func(t *testing.T, role string) *nats.Conn
}

func startSigned(t *testing.T, extra ...*tool.Tool) *signedStack {
	t.Helper()
	ctx := t.Context()
	log := slog.New(slog.DiscardHandler)
	env := bustest.StartWithRoles(t)
	s := &signedStack{env: env}
	s.conn = func(t *testing.T, role string) *nats.Conn {
		nc, err := bus.Dial(bus.ConnConfig{URL: env.Server.ClientURL(), Name: role, CredsFile: bus.CredentialsFile(env.Creds.Dir, role),
			InboxPrefix: bus.InboxPrefix(env.Bus.Config, role)}, nats.MaxReconnects(0))
		require.NoError(t, err)
		t.Cleanup(nc.Close)
		return nc
	}
	var err error
	s.key, err = signing.NewKey()
	require.NoError(t, err)
	keys := t.TempDir()
	require.NoError(t, os.WriteFile(filepath.Join(keys, "native.pub"), []byte(s.key.Public()+"\n"), 0o600))
	trust, err := signing.NewTrust(keys)
	require.NoError(t, err)

	reg := registry.NewStore(env.Bus.Registry, log)
	require.NoError(t, reg.Start(ctx))
	t.Cleanup(func() { _ = reg.Stop(context.Background()) })
	s.d, err = dispatch.New(env.Bus, reg, dispatch.Config{Logger: log, WorkerKeys: trust, MaxQueueWait: time.Minute})
	require.NoError(t, err)
	require.NoError(t, s.d.Start(ctx))
	t.Cleanup(func() {
		ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
		defer cancel()
		_ = s.d.Stop(ctx)
	})

	wb, err := bus.Open(ctx, s.conn(t, bus.RoleWorker), env.Bus.Config, bus.Options{Bind: true, Signer: s.key, Logger: log})
	require.NoError(t, err)
	w, err := workerconfig.NewWorker(ctx, wb, nil, workerconfig.Options{Tools: append(builtin.Tools(), extra...), Logger: log, Name: "real-worker"})
	require.NoError(t, err)
	require.NoError(t, w.Start(ctx))
	t.Cleanup(func() {
		ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
		defer cancel()
		_ = w.Stop(ctx)
	})
	names := []string{"sleep"}
	for _, tl := range extra {
		names = append(names, tl.Spec().GetName())
	}
	deadline := time.Now().Add(30 * time.Second)
	for _, name := range names {
		for _, err := reg.Get(name); err != nil; _, err = reg.Get(name) {
			require.True(t, time.Now().Before(deadline), "%s never registered", name)
			time.Sleep(5 * time.Millisecond) // polling with a deadline
		}
	}
	return s
}

// callInFlight makes req's call in the background as the default
// identity and returns it as published to its pool, and where its answer
// comes (an error as a response with its message).
func (s *signedStack) callInFlight(t *testing.T, req *toolwirev1.CallRequest) (*toolwirev1.ToolCall, <-chan *toolwirev1.CallResponse) {
	t.Helper()
	calls := make(chan *nats.Msg, 4)
	sub, err := s.env.Bus.NC.ChanSubscribe(s.env.Bus.Subjects.CallsOf(identity.Default.Tenant, req.Tool), calls)
	require.NoError(t, err)
	defer func() { _ = sub.Unsubscribe() }()
	answered := make(chan *toolwirev1.CallResponse, 1)
	go func() {
		r, err := s.d.Call(t.Context(), identity.Default, req, time.Minute)
		if err != nil {
			r = &toolwirev1.CallResponse{Response: &toolwirev1.ToolResponse{Error: &toolwirev1.ToolError{Message: err.Error()}}}
		}
		answered <- r
	}()
	var call toolwirev1.ToolCall
	select {
	case m := <-calls:
		require.NoError(t, proto.Unmarshal(m.Data, &call))
	case <-time.After(30 * time.Second):
		t.Fatal("the call was never published")
	}
	return &call, answered
}

// Finding 1 of issue 27 (and the review of its fix): a result published with the worker credential
// for a call the worker was never given took the call over. Now a result
// that is not signed by a key enrolled for the pool serving the call's
// tool is never the call's answer, whether stored before the real one or
// after it: unsigned, signed with an unenrolled key or another pool's,
// a signature replayed from another call, and a signature over another
// attempt. The caller waiting in Call, GetResult and the audit all get
// the real worker's result; audit --verify names each forgery.
func TestForgedResultsAreNeverTheAnswer(t *testing.T) {
	t.Parallel()
	s := startSigned(t)
	ctx, id := t.Context(), identity.Default

	// A finished call whose signed result the forger replays.
	other, err := s.d.Call(ctx, id, &toolwirev1.CallRequest{Tool: "echo", ArgumentsJson: `{"text":"b"}`}, 30*time.Second)
	require.NoError(t, err)
	require.True(t, other.Response.GetOk(), "%v", other.Response.GetError())
	stored, err := s.env.Bus.Results.GetLastMsgForSubject(ctx, s.env.Bus.Subjects.Result(id.Tenant, s.d.Config().Name, other.CallId))
	require.NoError(t, err)
	require.Equal(t, s.key.Public(), stored.Header.Get(signing.HeaderSigner), "the worker signs its results")

	// The victim: a call the real worker takes 2s over.
	victim, answered := s.callInFlight(t, &toolwirev1.CallRequest{Tool: "sleep", ArgumentsJson: `{"duration":"2s"}`})

	// The forgeries, with the worker credential, before the real result.
	forger := s.conn(t, bus.RoleWorker)
	subject := s.env.Bus.Subjects.Result(id.Tenant, victim.Dispatcher, victim.CallId)
	forgedAs := func(toolName string, attempt int32) []byte {
		resp := envelope.OK(victim.CallId, toolName, &tool.Result{Content: []*toolwirev1.Content{tool.Text("forged")}}, &toolwirev1.ResponseMeta{Worker: "real-worker", Attempt: attempt})
		b, err := proto.Marshal(resp)
		require.NoError(t, err)
		return b
	}
	forged := func(attempt int32) []byte { return forgedAs("sleep", attempt) }
	stranger, err := signing.NewKey()
	require.NoError(t, err)
	otherPool, err := signing.NewKey()
	require.NoError(t, err)
	_, err = s.env.Bus.Registry.Create(ctx, signing.PoolKey(otherPool.Public(), "sandbox"), []byte(`{}`))
	require.NoError(t, err)
	_, err = s.env.Bus.Registry.Create(ctx, registry.SourceKey("shell"), []byte(`{"pool":"sandbox"}`))
	require.NoError(t, err)
	replayed := nats.Header{signing.HeaderSigner: stored.Header.Values(signing.HeaderSigner), signing.HeaderSignature: stored.Header.Values(signing.HeaderSignature)}
	msgs := map[signing.Problem][]*nats.Msg{
		signing.Unsigned:  {{Subject: subject, Data: forged(1)}},
		signing.WrongPool: {stranger.SignedMsg(subject, signing.KindResult, victim.CallId, 1, forged(1), nil), otherPool.SignedMsg(subject, signing.KindResult, victim.CallId, 1, forged(1), nil)},
		signing.Forged: {
			{Subject: subject, Data: forged(1), Header: replayed},                                                          // another call's signature
			{Subject: subject, Data: forged(99), Header: s.key.Sign(nil, signing.KindResult, victim.CallId, 1, forged(1))}, // another attempt's
		},
		signing.WrongCall: {
			{Subject: subject, Data: stored.Data, Header: replayed},                                       // another call's result, whole
			otherPool.SignedMsg(subject, signing.KindResult, victim.CallId, 1, forgedAs("shell", 1), nil), // its own pool's tool named
		},
	}
	fjs, err := jetstream.New(forger)
	require.NoError(t, err)
	want := 0
	for _, ms := range msgs {
		for _, m := range ms {
			_, err := fjs.PublishMsg(ctx, m) // stored: the worker credential may publish results
			require.NoError(t, err)
			want++
		}
	}

	// A signature verified once for a key nobody enrolled, then sent again
	// naming a dispatcher's key as its signer.
	pair := stranger.SignedMsg(subject, signing.KindResult, victim.CallId, 1, forged(1), nil)
	_, err = fjs.PublishMsg(ctx, pair)
	require.NoError(t, err)
	pair.Header.Set(signing.HeaderSigner, s.env.Bus.Signer.Public())
	_, err = fjs.PublishMsg(ctx, pair)
	require.NoError(t, err)
	want += 2
	// A rejection of the call, as a dispatcher would record it.
	rejected, err := proto.Marshal(&toolwirev1.CallEvent{CallId: victim.CallId, Tool: "sleep", Type: toolwirev1.CallEventType_CALL_EVENT_TYPE_REJECTED,
		Error: &toolwirev1.ToolError{Message: "forged rejection"}})
	require.NoError(t, err)
	_, err = fjs.Publish(ctx, s.env.Bus.Subjects.Event(id.Tenant, victim.Dispatcher, victim.CallId), rejected)
	require.NoError(t, err)
	want++

	var r *toolwirev1.CallResponse
	select {
	case r = <-answered:
	case <-time.After(time.Minute):
		t.Fatal("the caller was never answered")
	}
	require.True(t, r.Response.GetOk(), "the caller got %v", r.Response)
	require.NotContains(t, r.Response.String(), "forged")
	require.Equal(t, victim.CallId, r.CallId)

	got, err := s.d.GetResult(ctx, id, victim.CallId, 0)
	require.NoError(t, err)
	require.True(t, proto.Equal(r.Response, got.Response), "GetResult: %v", got.Response)

	// A forgery stored after the real result is not the answer either.
	_, err = fjs.Publish(ctx, subject, forged(1))
	require.NoError(t, err)
	want++
	got, err = s.d.GetResult(ctx, id, victim.CallId, 0)
	require.NoError(t, err)
	require.True(t, proto.Equal(r.Response, got.Response), "GetResult after a later forgery: %v", got.Response)

	cancelled, err := s.d.Cancel(ctx, id, victim.CallId, "late")
	require.NoError(t, err)
	require.Equal(t, toolwirev1.CancelOutcome_CANCEL_OUTCOME_ALREADY_FINISHED, cancelled)

	src, err := audit.Open(ctx, s.conn(t, bus.RoleOperator), "")
	require.NoError(t, err)
	var rec *audit.Record
	sum, err := src.Run(ctx, audit.Filter{CallID: victim.CallId}, audit.Options{Verify: true}, func(x *audit.Record) error { rec = x; return nil })
	require.NoError(t, err)
	require.NotNil(t, rec)
	require.Equal(t, audit.OutcomeOK, rec.Outcome)
	require.True(t, proto.Equal(r.Response, rec.Result), "audit: %v", rec.Result)
	require.NotNil(t, rec.Signature)
	require.Equal(t, s.key.Public(), rec.Signature.Signer)
	require.Equal(t, "native", rec.Signature.Pool)
	require.NoError(t, rec.Signature.Check(), "the signature checks offline")
	problems := map[string]int{}
	for _, x := range rec.Refused {
		problems[x.Problem]++
	}
	require.Equal(t, map[string]int{"unsigned": 2, "wrong pool": 3, "forged": 3, "wrong call": 2, "event unsigned": 1}, problems)
	require.Len(t, sum.Anomalies, want, "audit --verify names every forgery: %+v", sum.Anomalies)
	for _, a := range sum.Anomalies {
		require.Equal(t, "unbelieved_result", a.Kind)
	}

	// The export carries the signature, which verify-export checks
	// offline; a signature over another attempt does not verify.
	dir := filepath.Join(t.TempDir(), "export")
	exp, err := audit.NewExporter(dir)
	require.NoError(t, err)
	require.NoError(t, exp.Write(rec))
	m, err := exp.Close(audit.Filter{CallID: victim.CallId}, sum)
	require.NoError(t, err)
	require.Equal(t, []audit.Signer{{Key: s.key.Public(), Pool: "native"}}, m.Signers)
	_, err = audit.VerifyExport(dir)
	require.NoError(t, err)
	other2 := *rec.Signature
	other2.Attempt = 2
	require.Error(t, other2.Check())
}

// A publisher of a call's result stores it only while no believed result
// is stored, however far down the subject that one is: past MaxScan
// forgeries, a believed result is the newest message, and Publish reads
// it before storing after it. The same path stored a second answer in a
// partition fault test: a worker's own first publish, sent again by
// nats.go on reconnect, was being replicated when the worker's retry
// scanned the subject, found nothing, then read the newest message and
// stored its retry after it unchecked.
func TestPublishStoresNoSecondAnswerPastTheScan(t *testing.T) {
	t.Parallel()
	s := startSigned(t)
	ctx, tenant := t.Context(), identity.Default.Tenant
	callID := "01M8NGTEST0000000000000001"
	subject := s.env.Bus.Subjects.Result(tenant, s.d.Config().Name, callID)
	answer := func(text string) []byte {
		b, err := proto.Marshal(envelope.OK(callID, "echo", &tool.Result{Content: []*toolwirev1.Content{tool.Text(text)}},
			&toolwirev1.ResponseMeta{Worker: "real-worker", Attempt: 1}))
		require.NoError(t, err)
		return b
	}
	fjs, err := jetstream.New(s.conn(t, bus.RoleWorker))
	require.NoError(t, err)
	for range believed.MaxScan {
		_, err := fjs.Publish(ctx, subject, answer("forged")) // unsigned: never believed
		require.NoError(t, err)
	}
	first := s.key.SignedMsg(subject, signing.KindResult, callID, 1, answer("first"), nil)
	_, err = fjs.PublishMsg(ctx, first)
	require.NoError(t, err)

	answers := believed.Reader{JS: s.env.Bus.JS, Stream: s.env.Bus.Results, Keys: s.env.Bus.Keys}
	_, err = answers.Publish(ctx, s.key.SignedMsg(subject, signing.KindResult, callID, 1, answer("second"), nil), "echo")
	require.ErrorIs(t, err, believed.ErrAnswered)
	info, err := s.env.Bus.Results.Info(ctx, jetstream.WithSubjectFilter(subject))
	require.NoError(t, err)
	require.EqualValues(t, believed.MaxScan+1, info.State.Subjects[subject], "messages on the call's subject")
	got, err := answers.Read(ctx, subject, "echo")
	require.NoError(t, err)
	require.NotNil(t, got, "the first answer is believed past the forgeries")
	require.Contains(t, got.Resp.String(), "first")
}

// With a key per worker, two keys are enrolled for one pool. A result one
// signs for an attempt whose STARTED claim the other stored is not the
// call's answer (it was, to the dispatchers, until 2026-12-02; only audit
// --verify named it): the caller, GetResult and the audit get the
// claimant's result, stored after it, and audit --verify names the
// other: a "wrong attempt" anomaly naming its signer and the claim's.
// The same when the result is stored under another dispatcher's token
// (one that sorts first, which every reader of any dispatcher's result
// subject looks at first): the claim is read on every dispatcher's
// events subject of the call, not only on the one the result names.
func TestAResultOfAnAttemptAnotherKeyClaimedIsRefused(t *testing.T) {
	t.Parallel()
	for _, name := range []string{"the call's dispatcher", "another dispatcher"} {
		t.Run(name, func(t *testing.T) {
			t.Parallel()
			resultOfAnAttemptAnotherKeyClaimed(t, name == "another dispatcher")
		})
	}
}

func resultOfAnAttemptAnotherKeyClaimed(t *testing.T, otherToken bool) {
	release := make(chan struct{})
	gate := releasedTool("gate", release)
	s := startSigned(t, gate)
	ctx, id := t.Context(), identity.Default
	second, err := signing.NewKey()
	require.NoError(t, err)
	_, err = s.env.Bus.Registry.Create(ctx, signing.PoolKey(second.Public(), "native"), []byte(`{}`))
	require.NoError(t, err)

	victim, answered := s.callInFlight(t, &toolwirev1.CallRequest{Tool: "gate", ArgumentsJson: `{}`})

	// The worker's claim: its STARTED, signed with its key.
	events := s.env.Bus.Subjects.Event(id.Tenant, victim.Dispatcher, victim.CallId)
	deadline := time.Now().Add(30 * time.Second)
	var attempt int32 // the delivery's: the stored call says none
	for attempt == 0 {
		msgs, err := bus.AllMsgsFromLeader(ctx, s.env.Bus.JS, s.env.Bus.Events, events)
		require.NoError(t, err)
		for _, m := range msgs {
			var ev toolwirev1.CallEvent
			require.NoError(t, proto.Unmarshal(m.Data, &ev))
			if ev.Type == toolwirev1.CallEventType_CALL_EVENT_TYPE_STARTED {
				require.Equal(t, s.key.Public(), m.Header.Get(signing.HeaderSigner))
				attempt = ev.Attempt
			}
		}
		if attempt == 0 {
			require.True(t, time.Now().Before(deadline), "the worker never claimed the attempt")
			time.Sleep(10 * time.Millisecond) // polling with a deadline
		}
	}

	resp := envelope.OK(victim.CallId, "gate", &tool.Result{Content: []*toolwirev1.Content{tool.Text("other key")}},
		&toolwirev1.ResponseMeta{Worker: "other-worker", Attempt: attempt})
	data, err := proto.Marshal(resp)
	require.NoError(t, err)
	fjs, err := jetstream.New(s.conn(t, bus.RoleWorker))
	require.NoError(t, err)
	token := victim.Dispatcher
	if otherToken {
		token = "0" // sorts before any dispatcher's name
	}
	subject := s.env.Bus.Subjects.Result(id.Tenant, token, victim.CallId)
	_, err = fjs.PublishMsg(ctx, second.SignedMsg(subject, signing.KindResult, victim.CallId, attempt, data, nil))
	require.NoError(t, err)
	close(release) // the worker's own result is stored after the other key's
	select {
	case r := <-answered:
		require.Contains(t, r.GetResponse().String(), "released", "the claimant's result answers the caller: %v", r)
	case <-time.After(time.Minute):
		t.Fatal("the caller was never answered")
	}
	got, err := s.d.GetResult(ctx, id, victim.CallId, 0)
	require.NoError(t, err)
	require.Contains(t, got.String(), "released")
	require.NotContains(t, got.String(), "other key")

	src, err := audit.Open(ctx, s.conn(t, bus.RoleOperator), "")
	require.NoError(t, err)
	var rec *audit.Record
	sum, err := src.Run(ctx, audit.Filter{CallID: victim.CallId}, audit.Options{Verify: true}, func(x *audit.Record) error { rec = x; return nil })
	require.NoError(t, err)
	require.NotNil(t, rec)
	require.NotNil(t, rec.Signature)
	require.Equal(t, s.key.Public(), rec.Signature.Signer, "the audit's answer is the claimant's")
	if otherToken {
		// The audit reads the results on the call's own dispatcher's
		// subject (the stored call names it): one stored elsewhere is no
		// part of its record.
		return
	}
	var named []audit.RefusedResult
	for _, x := range rec.Refused {
		if x.Problem == string(signing.WrongAttempt) {
			named = append(named, x)
		}
	}
	require.Len(t, named, 1, "%+v", rec.Refused)
	require.Equal(t, second.Public(), named[0].Signer)
	require.Contains(t, named[0].Detail, s.key.Public(), "the anomaly names the key that claimed the attempt")
	require.False(t, sum.OK(), "audit --verify reports the anomaly")
}
