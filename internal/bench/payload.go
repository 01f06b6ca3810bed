package bench

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"time"

	"github.com/nats-io/nats.go/jetstream"
	"google.golang.org/protobuf/proto"

	"github.com/toolwire/toolwire/internal/bus"
	"github.com/toolwire/toolwire/internal/identity"
	toolwirev1 "github.com/toolwire/toolwire/pkg/toolproto/toolwire/v1"
)

// idLen is the length of a call id (a ULID).
const idLen = 26

// template is the stored bytes of one real message with the places of its
// call id marked, so another id of the same length can be put in.
type template struct {
	data    []byte
	offsets []int
}

// with returns a copy of the template carrying id, which has idLen bytes.
func (t template) with(id string) []byte {
	b := make([]byte, len(t.data))
	copy(b, t.data)
	for _, o := range t.offsets {
		copy(b[o:o+idLen], id)
	}
	return b
}

func newTemplate(data []byte, callID string) (template, error) {
	t := template{data: data}
	for i := 0; ; {
		j := bytes.Index(data[i:], []byte(callID))
		if j < 0 {
			break
		}
		t.offsets = append(t.offsets, i+j)
		i += j + idLen
	}
	if len(t.offsets) == 0 {
		return template{}, fmt.Errorf("bench: call id %s not found in a captured message", callID)
	}
	return t, nil
}

// payloads are the stored bytes of one real echo round trip.
type payloads struct {
	call     template // the ToolCall on the calls stream
	result   template // the ToolResponse on the results stream
	accepted []byte   // the ACCEPTED CallEvent (for the memory control)
}

// capturePayloads makes one echo call on a throwaway toolwire and returns
// the exact bytes it stored.
func capturePayloads(ctx context.Context, cfg Config) (p payloads, err error) {
	e, err := startEnv(ctx, cfg)
	if err != nil {
		return p, err
	}
	defer func() { err = errors.Join(err, e.close()) }()
	s, err := startStack(ctx, e, stackOptions{worker: 1})
	if err != nil {
		return p, err
	}
	defer func() { err = errors.Join(err, s.stop()) }()

	// Submitted, not called: a call waited on with Call leaves no admission
	// record when it is fast, and the memory control needs one.
	sub, err := s.d.Submit(ctx, identity.Default, &toolwirev1.CallRequest{Tool: "echo", ArgumentsJson: echoArgs})
	if err != nil {
		return p, err
	}
	got, err := s.d.GetResult(ctx, identity.Default, sub.CallID, callWait)
	if err != nil {
		return p, err
	}
	if err := checkEcho(&toolwirev1.CallResponse{CallId: got.CallId, State: got.State, Response: got.Response}); err != nil {
		return p, err
	}
	id := sub.CallID
	call, err := s.bus.Calls.GetLastMsgForSubject(ctx, s.bus.Subjects.AllCalls())
	if err != nil {
		return p, fmt.Errorf("bench: captured call: %w", err)
	}
	// A JetStream publish reaches core subscribers before the stream has
	// stored it.
	if err := waitMsgs(ctx, s.bus.Results, 1); err != nil {
		return p, err
	}
	result, err := bus.LastMsg(ctx, s.bus.Results, s.bus.Subjects.ResultAnyDispatcher(identity.Default.Tenant, id))
	if err != nil {
		return p, fmt.Errorf("bench: captured result: %w", err)
	}
	if p.call, err = newTemplate(call.Data, id); err != nil {
		return p, err
	}
	if p.result, err = newTemplate(result.Data, id); err != nil {
		return p, err
	}
	// The ACCEPTED record is stored before Call returns; a fast call of a
	// safe tool stores no STARTED event.
	if err := waitMsgs(ctx, s.bus.Events, 1); err != nil {
		return p, err
	}
	for seq := uint64(1); seq <= 2 && p.accepted == nil; seq++ {
		m, err := s.bus.Events.GetMsg(ctx, seq)
		if errors.Is(err, jetstream.ErrMsgNotFound) {
			break
		}
		if err != nil {
			return p, fmt.Errorf("bench: captured event: %w", err)
		}
		var ev toolwirev1.CallEvent
		if proto.Unmarshal(m.Data, &ev) == nil && ev.Type == toolwirev1.CallEventType_CALL_EVENT_TYPE_ACCEPTED {
			p.accepted = m.Data
		}
	}
	if p.accepted == nil {
		return p, errors.New("bench: no ACCEPTED event was stored")
	}
	return p, nil
}

// waitMsgs polls until stream holds at least n messages.
func waitMsgs(ctx context.Context, stream jetstream.Stream, n uint64) error {
	ctx, cancel := context.WithTimeout(ctx, 30*time.Second)
	defer cancel()
	tick := time.NewTicker(5 * time.Millisecond)
	defer tick.Stop()
	for {
		info, err := stream.Info(ctx)
		if err == nil && info.State.Msgs >= n {
			return nil
		}
		select {
		case <-ctx.Done():
			return fmt.Errorf("bench: waiting for %d messages in a stream: %w", n, errors.Join(ctx.Err(), err))
		case <-tick.C:
		}
	}
}
