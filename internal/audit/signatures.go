package audit

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"fmt"

	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"
	"github.com/toolwire/toolwire/internal/believed"
	"github.com/toolwire/toolwire/internal/bus"
	"github.com/toolwire/toolwire/internal/signing"
)

// Signature is a record's proof of who wrote its result: the parts of
// the signed statement (internal/signing, Statement) and the signature,
// so that a third party can check it offline with the signer's public
// key alone (Signature.Check; toolctl audit verify-export does). The
// statement covers the SHA-256 of the stored result's bytes, which the
// export does not carry (its response is redacted): a holder of the
// results stream can match it.
type Signature struct {
	Signer    string `json:"signer"`
	Signature string `json:"signature"`
	// Batch is the result's place in the batch the signature covers and
	// its path to the batch's root (signing.HeaderBatch); empty when the
	// signature covers the statement alone.
	Batch      string `json:"batch,omitempty"`
	Kind       string `json:"kind"`
	CallID     string `json:"call_id"`
	Attempt    int32  `json:"attempt"`
	SHA256     string `json:"sha256"`
	Dispatcher bool   `json:"dispatcher,omitempty"`
	Pool       string `json:"pool,omitempty"`
}

// Check verifies the signature over its statement.
func (s *Signature) Check() error {
	sum, err := hex.DecodeString(s.SHA256)
	if err != nil || len(sum) != sha256.Size {
		return errors.New("audit: signature: sha256 is not a hex SHA-256")
	}
	h := nats.Header{signing.HeaderSigner: {s.Signer}, signing.HeaderSignature: {s.Signature}}
	if s.Batch != "" {
		h[signing.HeaderBatch] = []string{s.Batch}
	}
	if _, p := signing.VerifyStatement(h, signing.StatementOfSum(s.Kind, s.CallID, s.Attempt, sum)); p != "" {
		return fmt.Errorf("audit: signature of call %s: %s", s.CallID, p)
	}
	return nil
}

// RefusedResult is a result stored on a call's subject and not believed
// (internal/believed): never the call's answer, always an anomaly.
type RefusedResult struct {
	Seq     uint64 `json:"seq"`
	Problem string `json:"problem"`
	Signer  string `json:"signer,omitempty"`
	Detail  string `json:"detail,omitempty"`
}

// storedResults returns the first believed result of j's call on
// subject (nil when none) and the results stored there that are refused.
// It reads the subject's messages oldest first — those the archive holds
// and the results stream no longer does (with an archive), then the
// stream's from its leader (the API the operator role may use for it) —
// up to the first believed one (one read for a call's one result), or,
// with all (audit --verify), every one of them, at most believed.MaxScan.
// Archived results are checked exactly as live ones.
func (s *Source) storedResults(ctx context.Context, j *job, subject string, all bool) (*believed.Stored, []RefusedResult, error) {
	tool := j.call.Tool
	var found *believed.Stored
	var refused []RefusedResult
	var lookupErr error
	visit := func(m *jetstream.RawStreamMsg) bool {
		resp, v, err := believed.Check(ctx, s.keys, believed.MsgOf(m), tool)
		se := signing.AsError(err)
		switch {
		case se != nil:
			refused = append(refused, RefusedResult{Seq: m.Sequence, Problem: string(se.Problem), Signer: se.Signer, Detail: se.Detail})
		case err != nil:
			lookupErr = err
			return false
		case found == nil:
			found = &believed.Stored{Msg: m, Resp: resp, Verdict: v}
			j.end = m.Time
		default:
			refused = append(refused, RefusedResult{Seq: m.Sequence, Problem: "second result", Signer: v.Signer,
				Detail: fmt.Sprintf("a believed result is stored already at %d", found.Msg.Sequence)})
		}
		return all || found == nil
	}
	err := s.archivedOfCall(ctx, j, s.results, subject, visit)
	if err == nil && lookupErr == nil && (all || found == nil) {
		_, err = bus.EachMsgFromLeader(ctx, s.js, s.results, subject, believed.MaxScan, visit)
	}
	if err = errors.Join(err, lookupErr); err != nil {
		return nil, nil, err
	}
	return found, refused, nil
}

// signatureOf is the Signature of a believed result.
func signatureOf(st *believed.Stored) *Signature {
	sum := sha256.Sum256(st.Msg.Data)
	return &Signature{Signer: st.Verdict.Signer, Signature: st.Msg.Header.Get(signing.HeaderSignature), Batch: st.Msg.Header.Get(signing.HeaderBatch), Kind: signing.KindResult,
		CallID: st.Resp.GetCallId(), Attempt: st.Resp.GetMeta().GetAttempt(), SHA256: hex.EncodeToString(sum[:]),
		Dispatcher: st.Verdict.Dispatcher, Pool: st.Verdict.Pool}
}
