package maintenance

import (
	"context"
	"errors"
	"fmt"
	"strings"

	"github.com/nats-io/nats.go/jetstream"
	"google.golang.org/protobuf/proto"

	"github.com/toolwire/toolwire/internal/believed"
	"github.com/toolwire/toolwire/internal/bus"
	"github.com/toolwire/toolwire/internal/signing"
	toolwirev1 "github.com/toolwire/toolwire/pkg/toolproto/toolwire/v1"
)

// deadLetter publishes dl under msgID (idempotent within the DLQ stream's
// duplicate window): on the dead-letter subject of its call, or, with no
// call (a message that cannot be answered safely: no executor type,
// tenant, provider or tool is taken from it), under tenant _unknown.
func deadLetter(ctx context.Context, b *bus.Bus, dl *toolwirev1.DeadLetter, msgID string) error {
	subject := b.Subjects.DLQ(toolwirev1.ExecutorType_EXECUTOR_TYPE_UNSPECIFIED, "_unknown", "_unknown", "_unknown")
	if c := dl.Call; c != nil {
		subject = b.Subjects.DLQ(c.Executor, c.GetCaller().GetTenant(), c.Provider, c.Tool)
	}
	return publishDeadLetter(ctx, b, dl, letterAddress{subject: subject, msgID: msgID})
}

// letterAddress is where a dead letter goes and the message id it is
// published under.
type letterAddress struct{ subject, msgID string }

// publishDeadLetter publishes dl as to says.
func publishDeadLetter(ctx context.Context, b *bus.Bus, dl *toolwirev1.DeadLetter, to letterAddress) error {
	subject, msgID := to.subject, to.msgID
	data, err := proto.Marshal(dl)
	if err != nil {
		return err
	}
	if _, err := b.JS.Publish(ctx, subject, data, jetstream.WithMsgID(msgID)); err != nil {
		return fmt.Errorf("dead letter %s: %w", msgID, err)
	}
	return nil
}

// answer publishes resp, signed with the dispatcher's key, on a call's
// result subject unless the subject holds a believed result already
// (internal/believed): a dead-letter answer never replaces a result.
func answer(ctx context.Context, b *bus.Bus, subject string, resp *toolwirev1.ToolResponse) error {
	data, err := proto.Marshal(resp)
	if err != nil {
		return err
	}
	msg := b.Signer.SignedMsg(subject, signing.KindResult, resp.GetCallId(), resp.GetMeta().GetAttempt(), data, nil)
	r := believed.Reader{JS: b.JS, Stream: b.Results, Keys: b.Keys}
	if _, err := r.Publish(ctx, msg, resp.GetTool()); err != nil && !errors.Is(err, believed.ErrAnswered) {
		return err
	}
	return nil
}

// answered reports whether a believed result of a call of tool is stored
// on subject (internal/believed), reading the stream's leader; a result
// that is not believed does not count.
func answered(ctx context.Context, b *bus.Bus, subject, tool string) (bool, error) {
	r := believed.Reader{JS: b.JS, Stream: b.Results, Keys: b.Keys}
	s, err := r.Read(ctx, subject, tool)
	return s != nil, err
}

// answerable reports whether call's tenant is a valid name and is exactly
// the tenant token of its subject, <prefix>.call.<type>.<tenant>.….
func answerable(subject string, call *toolwirev1.ToolCall) bool {
	tenant := call.GetCaller().GetTenant()
	toks := strings.Split(subject, ".")
	return len(toks) == 6 && toks[3] == tenant && bus.ValidTenant(tenant)
}
