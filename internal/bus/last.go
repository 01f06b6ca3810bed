package bus

import (
	"cmp"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"reflect"
	"slices"
	"strings"
	"time"

	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"
)

// LastMsg returns the newest message of stream on any subject matching
// filter, or jetstream.ErrMsgNotFound.
//
// A filter with wildcards is resolved to literal subjects first (stream
// info with a subject filter), then each is read by a literal
// last-by-subject get: the server's wildcard last-by-subject get was seen
// to miss messages that were stored (nats-server 2.15.2, under parallel
// load), while literal gets and subject totals agree with the store.
func LastMsg(ctx context.Context, stream jetstream.Stream, filter string) (*jetstream.RawStreamMsg, error) {
	if !strings.ContainsAny(filter, "*>") {
		return stream.GetLastMsgForSubject(ctx, filter)
	}
	return lastOf(ctx, nil, stream, filter, false, func(subject string) (*jetstream.RawStreamMsg, error) {
		return stream.GetLastMsgForSubject(ctx, subject)
	})
}

// literalSubjects resolves filter to the literal subjects stream holds
// messages on (stream info with a subject filter); a literal filter is
// itself. With fromLeader only the stream's leader's answer counts: while
// a replicated stream has no leader, every member that knows it answers
// stream info from its own store, and a member that lags lists no subject
// for a message the leader stored (a redelivery took that for "no
// STARTED" and ran a tool that is not safe to rerun a second time); such
// an answer names no leader and is asked again.
func literalSubjects(ctx context.Context, nc *nats.Conn, stream jetstream.Stream, filter string, fromLeader bool) ([]string, error) {
	if !strings.ContainsAny(filter, "*>") {
		return []string{filter}, nil
	}
	var info *jetstream.StreamInfo
	api := jsAPI + "STREAM.INFO." + stream.CachedInfo().Config.Name
	err := leaderRetry(ctx, func(ctx context.Context) (err error) {
		before := lastError(nc)
		info, err = stream.Info(ctx, jetstream.WithSubjectFilter(filter))
		if err == nil && fromLeader && info.Cluster != nil && info.Cluster.Leader == "" {
			return errNoLeader
		}
		return deniedOr(nc, before, api, err)
	})
	if err != nil {
		return nil, fmt.Errorf("bus: subjects of %s: %w", filter, err)
	}
	subjects := make([]string, 0, len(info.State.Subjects))
	for subject := range info.State.Subjects {
		subjects = append(subjects, subject)
	}
	return subjects, nil
}

// lastOf returns the newest of the last messages get reads on each
// literal subject of filter, or jetstream.ErrMsgNotFound.
func lastOf(ctx context.Context, nc *nats.Conn, stream jetstream.Stream, filter string, fromLeader bool, get func(subject string) (*jetstream.RawStreamMsg, error)) (*jetstream.RawStreamMsg, error) {
	subjects, err := literalSubjects(ctx, nc, stream, filter, fromLeader)
	if err != nil {
		return nil, err
	}
	var last *jetstream.RawStreamMsg
	for _, subject := range subjects {
		m, err := get(subject)
		if errors.Is(err, jetstream.ErrMsgNotFound) {
			continue
		}
		if err != nil {
			return nil, err
		}
		if last == nil || m.Sequence > last.Sequence {
			last = m
		}
	}
	if last == nil {
		return nil, jetstream.ErrMsgNotFound
	}
	return last, nil
}

// LastMsgFromLeader is LastMsg answered by the stream's leader alone. Any
// replica of a replicated stream answers a direct get (what LastMsg
// does), also one that has not yet stored what the leader acknowledged
// (a replica serves direct gets from 90% caught up); a decision that must
// see every stored message — a redelivered call looking for its result
// or for the STARTED event of an earlier attempt — reads the leader.
func LastMsgFromLeader(ctx context.Context, js jetstream.JetStream, stream jetstream.Stream, filter string) (*jetstream.RawStreamMsg, error) {
	name := stream.CachedInfo().Config.Name
	return lastOf(ctx, js.Conn(), stream, filter, true, func(subject string) (*jetstream.RawStreamMsg, error) {
		return leaderLastMsg(ctx, js.Conn(), name, subject)
	})
}

// getRequest is a stream API get: the last message on LastFor, or the
// first at or after Seq on NextFor.
type getRequest struct {
	LastFor string `json:"last_by_subj,omitempty"`
	Seq     uint64 `json:"seq,omitempty"`
	NextFor string `json:"next_by_subj,omitempty"`
}

// leaderLastMsg is the stream API's (not the direct) get of the last
// message on subject, which only the stream's leader answers.
func leaderLastMsg(ctx context.Context, nc *nats.Conn, stream, subject string) (*jetstream.RawStreamMsg, error) {
	return leaderGet(ctx, nc, stream, subject, getRequest{LastFor: subject})
}

// leaderGet sends get to the stream API, which only the leader answers.
func leaderGet(ctx context.Context, nc *nats.Conn, stream, subject string, get getRequest) (*jetstream.RawStreamMsg, error) {
	req, err := json.Marshal(get)
	if err != nil {
		return nil, fmt.Errorf("bus: get %s: %w", subject, err)
	}
	var resp struct {
		Error   *jetstream.APIError `json:"error"`
		Message *struct {
			Subject  string    `json:"subject"`
			Sequence uint64    `json:"seq"`
			Header   []byte    `json:"hdrs"`
			Data     []byte    `json:"data"`
			Time     time.Time `json:"time"`
		} `json:"message"`
	}
	err = leaderRetry(ctx, func(ctx context.Context) error {
		api := jsAPI + "STREAM.MSG.GET." + stream
		before := lastError(nc)
		r, err := nc.RequestWithContext(ctx, api, req)
		if err != nil {
			return deniedOr(nc, before, api, err)
		}
		resp.Error, resp.Message = nil, nil
		if err := json.Unmarshal(r.Data, &resp); err != nil {
			return err
		}
		if resp.Error != nil && resp.Error.ErrorCode == jsErrClusterNotAvailable {
			return resp.Error
		}
		return nil
	})
	if err != nil {
		return nil, fmt.Errorf("bus: get %s from the leader of %s: %w", subject, stream, err)
	}
	switch {
	case resp.Error != nil && resp.Error.ErrorCode == jetstream.JSErrCodeMessageNotFound:
		return nil, jetstream.ErrMsgNotFound
	case resp.Error != nil:
		return nil, fmt.Errorf("bus: get %s from the leader of %s: %w", subject, stream, resp.Error)
	case resp.Message == nil:
		return nil, fmt.Errorf("bus: get %s from the leader of %s: %w", subject, stream, jetstream.ErrInvalidJetStreamResponse)
	}
	m := resp.Message
	var hdr nats.Header
	if len(m.Header) > 0 {
		if hdr, err = nats.DecodeHeadersMsg(m.Header); err != nil {
			return nil, fmt.Errorf("bus: get %s from the leader of %s: headers: %w", subject, stream, err)
		}
	}
	return &jetstream.RawStreamMsg{Subject: m.Subject, Sequence: m.Sequence, Header: hdr, Data: m.Data, Time: m.Time}, nil
}

// AllMsgsFromLeader returns every message of stream on subjects matching
// filter, oldest first, read from the stream's leader without a consumer:
// the literal subjects are resolved as in LastMsg, then each is read
// forward by the stream API's get of the next message on it (which only
// the leader answers, so nothing it acknowledged is missed). Meant for the
// handful of messages of one call (its events); a role that reads this
// way needs no consumer on the stream (see RoleWorker).
func AllMsgsFromLeader(ctx context.Context, js jetstream.JetStream, stream jetstream.Stream, filter string) ([]*jetstream.RawStreamMsg, error) {
	subjects, err := literalSubjects(ctx, js.Conn(), stream, filter, true)
	if err != nil {
		return nil, err
	}
	name := stream.CachedInfo().Config.Name
	var out []*jetstream.RawStreamMsg
	for _, subject := range subjects {
		if out, err = subjectMsgs(ctx, js.Conn(), name, subject, 1, 0, out); err != nil {
			return nil, err
		}
	}
	slices.SortFunc(out, func(a, b *jetstream.RawStreamMsg) int { return cmp.Compare(a.Sequence, b.Sequence) })
	return out, nil
}

// MsgsBetweenFromLeader returns the messages of stream on the literal
// subject stored at sequence from or later and before sequence before,
// oldest first, read from the stream's leader as AllMsgsFromLeader reads.
func MsgsBetweenFromLeader(ctx context.Context, js jetstream.JetStream, stream jetstream.Stream, subject string, from, before uint64) ([]*jetstream.RawStreamMsg, error) {
	return subjectMsgs(ctx, js.Conn(), stream.CachedInfo().Config.Name, subject, max(from, 1), before, nil)
}

// subjectMsgs appends to out the messages on the literal subject, read
// forward from the leader from sequence from up to (not including)
// sequence before; before 0 = to the end.
func subjectMsgs(ctx context.Context, nc *nats.Conn, stream, subject string, from, before uint64, out []*jetstream.RawStreamMsg) ([]*jetstream.RawStreamMsg, error) {
	for seq := from; before == 0 || seq < before; {
		m, err := leaderGet(ctx, nc, stream, subject, getRequest{Seq: seq, NextFor: subject})
		if errors.Is(err, jetstream.ErrMsgNotFound) {
			break
		}
		if err != nil {
			return nil, err
		}
		if before != 0 && m.Sequence >= before {
			break
		}
		out = append(out, m)
		seq = m.Sequence + 1
	}
	return out, nil
}

// leaderAttempt bounds one request that only a stream's leader answers.
// After a leader dies (kill -9, a frozen process) the stream has no leader
// for 4 to 9 s (the servers' RAFT election timeout), and a request sent
// meanwhile is answered by nobody: it would wait for its whole context
// (a worker's lookup: 10 s) although a new leader answers a second later.
// Sent again every leaderAttempt, a read is answered within about
// leaderAttempt of the election. A leader too busy to answer within it is
// asked again, which costs one more read.
const leaderAttempt = time.Second

// leaderRetryBackoff spaces requests that failed at once (no responders,
// or a member answering that the stream has no leader yet).
const leaderRetryBackoff = 100 * time.Millisecond

// jsErrClusterNotAvailable is the error code of the server's answer "JetStream
// system temporarily unavailable": a member of the stream's group knows
// it has no leader (an election is under way).
const jsErrClusterNotAvailable = 10008

// leaderRetry runs request, a read only a stream's leader answers, each
// time bounded by leaderAttempt, until it succeeds, fails for a reason
// other than a missing leader, or ctx ends. The error is the last
// attempt's.
func leaderRetry(ctx context.Context, request func(context.Context) error) error {
	return LeaderRetry(ctx, leaderAttempt, request)
}

// LeaderRetry runs request, work that needs a stream's leader (its API,
// a consumer of it), each time bounded by attempt, until it succeeds,
// fails for a reason other than a missing leader (no answer, no
// responders, a member saying there is none), or ctx ends: what rides out
// a leader's election. The error is the last attempt's.
func LeaderRetry(ctx context.Context, attempt time.Duration, request func(context.Context) error) error {
	for {
		start := time.Now()
		actx, cancel := context.WithTimeout(ctx, attempt)
		err := request(actx)
		cancel()
		if err == nil || ctx.Err() != nil || !noLeader(err) {
			return err
		}
		if wait := leaderRetryBackoff - time.Since(start); wait > 0 {
			t := time.NewTimer(wait)
			select {
			case <-ctx.Done():
				t.Stop()
				return err
			case <-t.C:
			}
		}
	}
}

// deniedOr is err, or, when nc's server refused it publishing to
// subject (or to a subject under it) since before (lastError, taken
// before the request was sent), the permissions violation: the server
// reports it to the connection, and a request sees only no answer, which
// LeaderRetry would take for a missing leader and ask again until its
// context ends. Only a refusal newer than before counts: a connection's
// last error stays until the next, and a refusal of an older
// configuration says nothing of the server's current permissions.
func deniedOr(nc *nats.Conn, before error, subject string, err error) error {
	if nc == nil || !noLeader(err) {
		return err
	}
	last := nc.LastError()
	if last == nil || same(last, before) || !errors.Is(last, nats.ErrPermissionViolation) {
		return err
	}
	at := `Publish to "` + subject
	if msg := last.Error(); strings.Contains(msg, at+`"`) || strings.Contains(msg, at+".") {
		return fmt.Errorf("%w (the request: %v)", last, err)
	}
	return err
}

// same reports whether a and b are one error value (an error type that
// is not comparable is never the same: == would panic).
func same(a, b error) bool {
	t := reflect.TypeOf(a)
	return t == reflect.TypeOf(b) && t != nil && t.Comparable() && a == b
}

// lastError is nc's last error (nil for no connection), for deniedOr.
func lastError(nc *nats.Conn) error {
	if nc == nil {
		return nil
	}
	return nc.LastError()
}

// errNoLeader: an answer from a member of a stream that has no leader
// now.
var errNoLeader = errors.New("the stream has no leader")

// noLeader reports whether err may mean that the stream has no leader now:
// no answer, no responders, or a member saying so.
func noLeader(err error) bool {
	if errors.Is(err, errNoLeader) {
		return true
	}
	var apiErr *jetstream.APIError
	if errors.As(err, &apiErr) {
		return apiErr.ErrorCode == jsErrClusterNotAvailable
	}
	return errors.Is(err, context.DeadlineExceeded) || errors.Is(err, nats.ErrTimeout) || errors.Is(err, nats.ErrNoResponders)
}

// EachMsgFromLeader hands fn the messages of stream on the subjects of
// filter (resolved as AllMsgsFromLeader resolves them), each subject
// oldest first, read one at a time from the stream's leader, until fn
// returns false, max messages were read, or there are no more. It
// returns how many it read.
func EachMsgFromLeader(ctx context.Context, js jetstream.JetStream, stream jetstream.Stream, filter string, limit int, fn func(*jetstream.RawStreamMsg) bool) (int, error) {
	subjects, err := literalSubjects(ctx, js.Conn(), stream, filter, true)
	if err != nil {
		return 0, err
	}
	slices.Sort(subjects)
	name, n := stream.CachedInfo().Config.Name, 0
	for _, subject := range subjects {
		for seq := uint64(1); n < limit; n++ {
			m, err := leaderGet(ctx, js.Conn(), name, subject, getRequest{Seq: seq, NextFor: subject})
			if errors.Is(err, jetstream.ErrMsgNotFound) {
				break
			}
			if err != nil {
				return n, err
			}
			if !fn(m) {
				return n + 1, nil
			}
			seq = m.Sequence + 1
		}
	}
	return n, nil
}
