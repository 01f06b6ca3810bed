package worker_test

import (
	"errors"
	"testing"

	"github.com/toolwire/toolwire/internal/bus"
	"github.com/toolwire/toolwire/internal/registry"
	"github.com/toolwire/toolwire/internal/worker"
	toolwirev1 "github.com/toolwire/toolwire/pkg/toolproto/toolwire/v1"
	"google.golang.org/protobuf/proto"
)

// FuzzDecodeCall: no input crashes decoding, and a call accepted by
// DecodeCall always names itself and a caller with a valid tenant name,
// and matches its subject.
func FuzzDecodeCall(f *testing.F) {
	subj := bus.Subjects{Prefix: "toolwire"}
	native := toolwirev1.ExecutorType_EXECUTOR_TYPE_NATIVE
	good, _ := proto.Marshal(&toolwirev1.ToolCall{CallId: "01J0", Tool: "echo", Caller: &toolwirev1.Caller{Tenant: "acme"},
		Executor: native, Provider: "builtin", Arguments: []byte(`{"text":"x"}`)})
	f.Add(subj.Call(native, "acme", "builtin", "echo"), good)
	f.Add(subj.Call(native, "evil", "builtin", "echo"), good)
	dotted, _ := proto.Marshal(&toolwirev1.ToolCall{CallId: "01J0", Tool: "echo", Caller: &toolwirev1.Caller{Tenant: "a.b"},
		Executor: native, Provider: "builtin", Arguments: []byte(`{"text":"x"}`)})
	f.Add(subj.Call(native, "a_b", "builtin", "echo"), dotted)
	f.Add("toolwire.call.native.acme.builtin.echo", []byte{})
	f.Add("toolwire.call.native.acme.builtin.echo", []byte("\xff\xff\xff"))
	f.Add("x", []byte{0x0a, 0x80})
	f.Fuzz(func(t *testing.T, subject string, data []byte) {
		call, err := worker.DecodeCall(subj, native, subject, data)
		var bad *worker.BadCallError
		if err != nil {
			if !errors.As(err, &bad) || bad.Reason == "" {
				t.Fatalf("error without a reason: %v", err)
			}
			return
		}
		if call.CallId == "" || call.Caller == nil {
			t.Fatal("accepted a call without id or caller")
		}
		if !bus.ValidTenant(call.Caller.Tenant) {
			t.Fatalf("accepted tenant %q, which is no valid tenant name", call.Caller.Tenant)
		}
		if subject != subj.Call(call.Executor, call.Caller.Tenant, call.Provider, call.Tool) {
			t.Fatal("accepted a call whose subject disagrees")
		}
	})
}

// FuzzJSONDepth: the depth scanner never crashes and never reports more
// than limit+1 levels once it stops early.
func FuzzJSONDepth(f *testing.F) {
	for _, s := range []string{`{}`, `{"a":[1,{"b":"}"}]}`, `"\"{{{"`, `[[[[[[`, `]]]]`, ``} {
		f.Add([]byte(s), 4)
	}
	f.Fuzz(func(t *testing.T, b []byte, limit int) {
		if limit < 0 || limit > 1000 {
			return
		}
		if d := registry.JSONDepth(b, limit); d > limit+1 {
			t.Fatalf("depth %d past limit %d", d, limit)
		}
	})
}
