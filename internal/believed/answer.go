package believed

import (
	"context"
	"errors"
	"fmt"
	"strings"

	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"
	"github.com/toolwire/toolwire/internal/bus"
	"github.com/toolwire/toolwire/internal/signing"
	toolwirev1 "github.com/toolwire/toolwire/pkg/toolproto/toolwire/v1"
	"google.golang.org/protobuf/proto"
)

// Check decides whether data, stored on the result subject subject with
// headers h, is believed as the answer of its call; tool, when not
// empty, is the call's tool as the reader knows it. It returns the
// decoded result and the signer's verdict, a *signing.Error for a
// result that is not believed, or another error when a lookup failed
// (nothing is decided).
func Check(ctx context.Context, keys *signing.Keyring, subject string, h nats.Header, data []byte, tool string) (*toolwirev1.ToolResponse, signing.Verdict, error) {
	callID := subject[strings.LastIndexByte(subject, '.')+1:]
	resp := &toolwirev1.ToolResponse{}
	if err := proto.Unmarshal(data, resp); err != nil {
		return nil, signing.Verdict{}, &signing.Error{Problem: signing.WrongCall, Signer: h.Get(signing.HeaderSigner), Detail: "the result does not decode"}
	}
	if resp.CallId != callID || (tool != "" && resp.Tool != tool) {
		return nil, signing.Verdict{}, &signing.Error{Problem: signing.WrongCall, Signer: h.Get(signing.HeaderSigner),
			Detail: fmt.Sprintf("stored for call %s, names call %q tool %q", limit(callID), limit(resp.CallId), limit(resp.Tool))}
	}
	v, err := keys.Check(ctx, h, signing.KindResult, callID, resp.GetMeta().GetAttempt(), data, resp.Tool)
	if err != nil {
		return nil, v, err
	}
	return resp, v, nil
}

// Stored is a call's believed result as a reader found it.
type Stored struct {
	Msg     *jetstream.RawStreamMsg
	Resp    *toolwirev1.ToolResponse
	Verdict signing.Verdict
}

// GetResp is s's result; nil for a nil s.
func (s *Stored) GetResp() *toolwirev1.ToolResponse {
	if s == nil {
		return nil
	}
	return s.Resp
}

// Refused is a result found on a call's subject and not believed.
type Refused struct {
	Subject  string
	Sequence uint64
	Err      *signing.Error
}

// Reader reads calls' believed results from the results stream.
type Reader struct {
	JS     jetstream.JetStream
	Stream jetstream.Stream
	Keys   *signing.Keyring
	// FromLeader reads only the stream leader's answers (bus.LastMsgFromLeader).
	FromLeader bool
	// OnRefused, when set, hears every result found and not believed.
	OnRefused func(Refused)
}

// Read returns the believed result stored on filter (a call's result
// subject, the dispatcher token a wildcard or not), nil when there is
// none. The last message is looked at first: the call's one result in
// all but a forgery's case. When it is not believed, every message on
// the subject is, in order, and the first believed one is the answer:
// the publishers (Publish) store a result only while none is believed,
// so there is at most one. tool is as for Check.
func (r Reader) Read(ctx context.Context, filter, tool string) (*Stored, error) {
	var m *jetstream.RawStreamMsg
	var err error
	if r.FromLeader {
		m, err = bus.LastMsgFromLeader(ctx, r.JS, r.Stream, filter)
	} else {
		m, err = bus.LastMsg(ctx, r.Stream, filter)
	}
	if errors.Is(err, jetstream.ErrMsgNotFound) {
		return nil, nil
	}
	if err != nil {
		return nil, err
	}
	if s, err := r.check(ctx, m, tool); s != nil || signing.AsError(err) == nil {
		return s, err
	}
	all, err := bus.AllMsgsFromLeader(ctx, r.JS, r.Stream, filter)
	if err != nil {
		return nil, err
	}
	for _, m := range all {
		if s, err := r.check(ctx, m, tool); s != nil || signing.AsError(err) == nil {
			return s, err
		}
	}
	return nil, nil
}

// check is Check of a stored message, telling OnRefused of a refusal.
func (r Reader) check(ctx context.Context, m *jetstream.RawStreamMsg, tool string) (*Stored, error) {
	resp, v, err := Check(ctx, r.Keys, m.Subject, m.Header, m.Data, tool)
	if err == nil {
		return &Stored{Msg: m, Resp: resp, Verdict: v}, nil
	}
	if se := signing.AsError(err); se != nil && r.OnRefused != nil {
		r.OnRefused(Refused{Subject: m.Subject, Sequence: m.Sequence, Err: se})
	}
	return nil, err
}

// Publish stores msg, a signed result, as its call's result unless a
// believed one is stored already; then it returns an error that
// bus.IsWrongLastSequence matches, as a publish that found its subject
// taken did before results were signed. A subject holding only results
// that are not believed (forgeries) does not stop it: msg is stored
// after the last of them (ExpectLastSequencePerSubject, tried again
// while others are stored meanwhile, at most publishTries times).
func (r Reader) Publish(ctx context.Context, msg *nats.Msg) (*jetstream.PubAck, error) {
	expect := uint64(0)
	for try := 1; ; try++ {
		msg.Header.Set(jetstream.ExpectedLastSubjSeqHeader, fmt.Sprint(expect))
		ack, err := r.JS.PublishMsg(ctx, msg)
		if err == nil || !bus.IsWrongLastSequence(err) || try >= publishTries {
			return ack, err
		}
		all, rerr := bus.AllMsgsFromLeader(ctx, r.JS, r.Stream, msg.Subject)
		if rerr != nil {
			return nil, errors.Join(err, rerr)
		}
		for _, m := range all {
			if s, cerr := r.check(ctx, m, ""); s != nil {
				return nil, err // a believed result: keep it
			} else if signing.AsError(cerr) == nil {
				return nil, errors.Join(err, cerr)
			}
		}
		if len(all) == 0 {
			continue
		}
		expect = all[len(all)-1].Sequence
	}
}

// publishTries bounds Publish's tries past forgeries stored meanwhile.
const publishTries = 5

func limit(s string) string {
	if len(s) > 64 {
		return s[:64] + "…"
	}
	return s
}

// CheckEvent decides whether data, an event of call callID stored with
// headers h, is believed (internal/signing): signed by a dispatcher's key
// or by a key enrolled for the pool of the tool it names, about callID.
// Errors are as Check's.
func CheckEvent(ctx context.Context, keys *signing.Keyring, callID string, h nats.Header, data []byte) (*toolwirev1.CallEvent, signing.Verdict, error) {
	ev := &toolwirev1.CallEvent{}
	if err := proto.Unmarshal(data, ev); err != nil {
		return nil, signing.Verdict{}, &signing.Error{Problem: signing.WrongCall, Signer: h.Get(signing.HeaderSigner), Detail: "the event does not decode"}
	}
	if ev.CallId != callID {
		return nil, signing.Verdict{}, &signing.Error{Problem: signing.WrongCall, Signer: h.Get(signing.HeaderSigner),
			Detail: fmt.Sprintf("stored for call %s, names call %q", limit(callID), limit(ev.CallId))}
	}
	v, err := keys.Check(ctx, h, signing.KindEvent, callID, ev.Attempt, data, ev.Tool)
	if err != nil {
		return nil, v, err
	}
	return ev, v, nil
}
