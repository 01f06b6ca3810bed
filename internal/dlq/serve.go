package dlq

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"log/slog"
	"strings"
	"time"

	"github.com/nats-io/nats.go"

	"github.com/toolwire/toolwire/internal/bus"
)

// retryRequest asks a dispatcher to retry the dead letter at Seq.
type retryRequest struct {
	Seq uint64 `json:"seq"`
}

// retryReply answers a retryRequest: the new call's id, or an error with
// a code RequestRetry maps back onto this package's errors.
type retryReply struct {
	CallID string `json:"call_id,omitempty"`
	Code   string `json:"code,omitempty"`
	Error  string `json:"error,omitempty"`
}

// Codes of retryReply.
const (
	codeNotFound          = "not_found"
	codeNotRetryable      = "not_retryable"
	codeNoAdmissionRecord = "no_admission_record"
	codeBadRequest        = "bad_request"
	codeSessionInactive   = "session_inactive"
	codeModeRestricted    = "mode_restricted"
	codePolicyDenies      = "policy_denies"
	codeFailed            = "failed"
)

// retryQueueGroup shares the retry requests among the dispatchers of an
// installation: one of them answers each.
const retryQueueGroup = "dispatchers"

// retryTimeout bounds one served retry.
const retryTimeout = 10 * time.Second

// ServeRetries answers the retry requests of RequestRetry on
// bus.DLQRetrySubject with q.Retry, until the returned subscription is
// unsubscribed. Dispatchers serve it: an operator's credentials may not
// publish calls (bus.RoleOperator), a dispatcher's may. Every replica
// subscribes in one queue group, so each request is served once.
func ServeRetries(nc *nats.Conn, q *Queue, log *slog.Logger) (*nats.Subscription, error) {
	operatorInboxes := bus.InboxPrefix(q.cfg, bus.RoleOperator) + "."
	sub, err := nc.QueueSubscribe(bus.DLQRetrySubject(q.cfg), retryQueueGroup, func(m *nats.Msg) {
		// Only an operator's request (its replies go to the operator
		// inboxes) or a dispatcher's own (_INBOX.): a message the server
		// delivers from a push consumer that someone pointed here carries
		// a $JS.ACK reply, and is no request of anyone allowed to ask.
		if !strings.HasPrefix(m.Reply, operatorInboxes) && !strings.HasPrefix(m.Reply, nats.InboxPrefix) {
			log.Warn("dead letter retry request refused: not from an operator", "reply", m.Reply)
			return
		}
		reply := q.serveRetry(m.Data)
		if reply.Error != "" {
			log.Warn("dead letter retry refused", "code", reply.Code, "err", reply.Error)
		} else {
			log.Info("dead letter retried", "call_id", reply.CallID)
		}
		data, err := json.Marshal(reply)
		if err == nil {
			err = m.Respond(data)
		}
		if err != nil {
			log.Warn("dead letter retry: reply failed", "err", err)
		}
	})
	if err != nil {
		return nil, fmt.Errorf("dlq: serve retries: %w", err)
	}
	return sub, nil
}

func (q *Queue) serveRetry(data []byte) retryReply {
	var req retryRequest
	if err := json.Unmarshal(data, &req); err != nil || req.Seq == 0 {
		return retryReply{Code: codeBadRequest, Error: "want {\"seq\": <positive stream sequence>}"}
	}
	ctx, cancel := context.WithTimeout(context.Background(), retryTimeout)
	defer cancel()
	call, err := q.Retry(ctx, req.Seq)
	reply := retryReply{}
	if call != nil {
		reply.CallID = call.CallId
	}
	if err != nil {
		reply.Error = err.Error()
		switch {
		case errors.Is(err, ErrNotFound):
			reply.Code = codeNotFound
		case errors.Is(err, ErrNotRetryable):
			reply.Code = codeNotRetryable
		case errors.Is(err, ErrNoAdmissionRecord):
			reply.Code = codeNoAdmissionRecord
		case errors.Is(err, ErrSessionInactive):
			reply.Code = codeSessionInactive
		case errors.Is(err, ErrModeRestricted):
			reply.Code = codeModeRestricted
		case errors.Is(err, ErrPolicyDenies):
			reply.Code = codePolicyDenies
		default:
			reply.Code = codeFailed
		}
	}
	return reply
}

// ErrNoDispatcher is returned by RequestRetry when no dispatcher of the
// installation answers.
var ErrNoDispatcher = errors.New("dlq: no dispatcher answered the retry request (a dispatcher of the installation retries dead letters: is one running?)")

// RequestRetry asks a dispatcher of the installation to retry the dead
// letter at seq (Retry, run by the dispatcher) and returns the new call's
// id. Errors match what Retry returns (ErrNotFound, ErrNotRetryable,
// ErrSessionInactive, ErrModeRestricted, ErrPolicyDenies; with an id,
// ErrNoAdmissionRecord), ErrNoDispatcher, or the transport's.
func (q *Queue) RequestRetry(ctx context.Context, seq uint64) (string, error) {
	data, err := json.Marshal(retryRequest{Seq: seq})
	if err != nil {
		return "", fmt.Errorf("dlq: encode retry request: %w", err)
	}
	if _, ok := ctx.Deadline(); !ok {
		var cancel context.CancelFunc
		ctx, cancel = context.WithTimeout(ctx, retryTimeout+5*time.Second)
		defer cancel()
	}
	m, err := q.js.Conn().RequestWithContext(ctx, bus.DLQRetrySubject(q.cfg), data)
	if errors.Is(err, nats.ErrNoResponders) {
		return "", ErrNoDispatcher
	}
	if err != nil {
		return "", fmt.Errorf("dlq: retry request: %w", err)
	}
	var reply retryReply
	if err := json.Unmarshal(m.Data, &reply); err != nil {
		return "", fmt.Errorf("dlq: undecodable retry reply: %w", err)
	}
	switch reply.Code {
	case "":
		return reply.CallID, nil
	case codeNotFound:
		return "", &remoteError{reply.Error, ErrNotFound}
	case codeNotRetryable:
		return "", &remoteError{reply.Error, ErrNotRetryable}
	case codeNoAdmissionRecord:
		return reply.CallID, &remoteError{reply.Error, ErrNoAdmissionRecord}
	case codeSessionInactive:
		return "", &remoteError{reply.Error, ErrSessionInactive}
	case codeModeRestricted:
		return "", &remoteError{reply.Error, ErrModeRestricted}
	case codePolicyDenies:
		return "", &remoteError{reply.Error, ErrPolicyDenies}
	}
	return "", fmt.Errorf("dlq: the dispatcher could not retry: %s", reply.Error)
}

// remoteError is an error a dispatcher reported: its message as the
// dispatcher wrote it, matching the sentinel it had.
type remoteError struct {
	msg string
	is  error
}

func (e *remoteError) Error() string { return e.msg }
func (e *remoteError) Unwrap() error { return e.is }
