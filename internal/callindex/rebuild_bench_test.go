package callindex

import (
	"context"
	"fmt"
	"log/slog"
	"testing"
	"time"

	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"
	"github.com/oklog/ulid/v2"
	"google.golang.org/protobuf/proto"
	"google.golang.org/protobuf/types/known/durationpb"

	"github.com/toolwire/toolwire/internal/audit"
	"github.com/toolwire/toolwire/internal/bus"
	"github.com/toolwire/toolwire/internal/bus/bustest"
	"github.com/toolwire/toolwire/internal/registry"
	"github.com/toolwire/toolwire/internal/signing"
	toolwirev1 "github.com/toolwire/toolwire/pkg/toolproto/toolwire/v1"
)

// rebuildCalls is how many calls BenchmarkIndexRebuild stores.
const rebuildCalls = 100_000

// BenchmarkIndexRebuild measures the rebuild: streams holding
// rebuildCalls calls (one in ten of a tool with a secret argument) and
// their results, stored as a dispatcher and a worker store them, are read
// into a new index each iteration; ns/op is one rebuild, up to Ready.
func BenchmarkIndexRebuild(b *testing.B) {
	env := bustest.Start(b, bus.Config{})
	ctx := context.Background()
	tools := indexTools(nil)
	var specs []*toolwirev1.ToolSpec
	for _, tl := range tools {
		if n := tl.Name(); n == "echo" || n == "signin" {
			specs = append(specs, tl.Spec())
		}
	}
	specs, err := registry.Publish(ctx, env.Bus.Registry, specs)
	if err != nil {
		b.Fatal(err)
	}
	if err := registry.EnrolDispatcher(ctx, env.Bus.Registry, env.Bus.Signer.Public(), "bench"); err != nil {
		b.Fatal(err)
	}
	js, subj := env.Bus.JS, env.Bus.Subjects
	publish := func(subject string, msg proto.Message, id string) {
		data, err := proto.Marshal(msg)
		if err != nil {
			b.Fatal(err)
		}
		m := nats.NewMsg(subject)
		m.Data = data
		if id != "" {
			m.Header.Set(jetstream.MsgIDHeader, id)
		}
		if r, ok := msg.(*toolwirev1.ToolResponse); ok { // signed, as every result is
			env.Bus.Signer.Sign(m.Header, signing.KindResult, r.CallId, r.GetMeta().GetAttempt(), data)
		}
		for {
			if _, err = js.PublishMsgAsync(m); err == nil {
				return
			}
			<-js.PublishAsyncComplete()
		}
	}
	start := time.Now()
	for k := range rebuildCalls {
		spec := specs[0]
		args := fmt.Sprintf(`{"text":"hello number %d from the rebuild benchmark"}`, k)
		text := fmt.Sprintf("hello number %d from the rebuild benchmark", k)
		if k%10 == 0 {
			spec = specs[1]
			args = fmt.Sprintf(`{"user":"user-%d","token":"tok-%d-secret"}`, k, k)
			text = fmt.Sprintf("signed in user-%d with [REDACTED]", k)
		}
		id := ulid.Make().String()
		tenant := fmt.Sprintf("tenant-%d", k%50)
		publish(subj.Call(toolwirev1.ExecutorType_EXECUTOR_TYPE_NATIVE, tenant, "builtin", spec.Name),
			&toolwirev1.ToolCall{CallId: id, Tool: spec.Name, SpecVersion: spec.Version, Arguments: []byte(args),
				Caller: &toolwirev1.Caller{Tenant: tenant, Agent: "bench", Session: fmt.Sprintf("s-%d", k%5000)}, Dispatcher: "d1"}, id)
		publish(subj.Result(tenant, "d1", id), &toolwirev1.ToolResponse{CallId: id, Tool: spec.Name, Ok: true,
			Content: []*toolwirev1.Content{{Kind: &toolwirev1.Content_Text{Text: &toolwirev1.TextContent{Text: text}}}},
			Meta:    &toolwirev1.ResponseMeta{Worker: "w1", Duration: durationpb.New(time.Millisecond)}}, "")
	}
	select {
	case <-js.PublishAsyncComplete():
	case <-time.After(time.Minute):
		b.Fatal("publishes not acknowledged")
	}
	b.Logf("stored %d calls and results in %v", rebuildCalls, time.Since(start))
	var x *Index
	for b.Loop() {
		x = mustNew(b, Config{Streams: StreamsOf(env.Bus), Specs: registry.NewStore(env.Bus.Registry, nil), Logger: slog.New(slog.DiscardHandler)})
		ctx, cancel := context.WithCancel(ctx)
		done := make(chan error, 1)
		go func() { done <- x.run(ctx) }()
		select {
		case <-x.Ready():
		case err := <-done:
			b.Fatal(err)
		}
		cancel()
		if err := <-done; err != nil {
			b.Fatal(err)
		}
	}
	st := x.Stats()
	if st.Entries != rebuildCalls {
		b.Fatalf("%d calls indexed, want %d", st.Entries, rebuildCalls)
	}
	if page, _, _ := x.Query(Query{Outcome: audit.OutcomePending}); len(page) > 0 {
		b.Fatalf("%d calls without their result", len(page))
	}
	b.ReportMetric(float64(rebuildCalls)/st.Rebuild.Seconds(), "calls/s")
	b.ReportMetric(float64(st.Bytes)/rebuildCalls, "est-B/entry")
}
