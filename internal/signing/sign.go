package signing

import (
	"crypto/ed25519"
	"crypto/sha256"
	"encoding/base64"
	"encoding/hex"
	"strconv"

	"github.com/nats-io/nats.go"
)

// Headers a signed message carries.
const (
	// HeaderSigner is the signing key's public key ("U…").
	HeaderSigner = "Toolwire-Signer"
	// HeaderSignature is the Ed25519 signature of the message's
	// Statement, base64 (standard, padded).
	HeaderSignature = "Toolwire-Signature"
)

// Kinds of signed messages: the first line of a Statement, so that a
// signature over a result can never pass for one over an event.
const (
	KindResult = "result"
	KindEvent  = "event"
	// KindAnnouncement signs a worker's registry announcement (no call:
	// the call id is empty, the attempt 0), proving it holds the key it
	// names.
	KindAnnouncement = "announcement"
	// KindMCPCancel signs a dispatcher's notice to the other MCP
	// replicas of a client's notifications/cancelled (internal/mcpserver;
	// no call: the call id is empty, the attempt 0).
	KindMCPCancel = "mcp-cancel"
)

// Statement is what a signature covers: the kind of message, the call it
// belongs to, the attempt that wrote it and the SHA-256 of the message's
// exact payload bytes (the stored bytes, so nothing is re-encoded to
// check it). Its form, for offline verifiers:
//
//	toolwire-signature-v1\n<kind>\n<call id>\n<attempt>\n<hex sha256 of the payload>
func Statement(kind, callID string, attempt int32, payload []byte) []byte {
	sum := sha256.Sum256(payload)
	return StatementOfSum(kind, callID, attempt, sum[:])
}

// Sign sets h's signature headers for a message of kind about callID's
// attempt with payload, and returns h (a new header when h is nil). Under
// load its signature may cover a batch of statements (HeaderBatch), and
// it may wait for the signature being made to finish first: safe for
// concurrent use, never while holding a lock another signer needs.
func (k *Key) Sign(h nats.Header, kind, callID string, attempt int32, payload []byte) nats.Header {
	if h == nil {
		h = nats.Header{}
	}
	s := k.signStatement(Statement(kind, callID, attempt, payload))
	h[HeaderSigner] = []string{k.pub}
	h[HeaderSignature] = []string{s.sig}
	if s.batch != "" {
		h[HeaderBatch] = []string{s.batch}
	} else {
		delete(h, HeaderBatch)
	}
	return h
}

// SignedMsg returns a message on subject with payload, signed.
func (k *Key) SignedMsg(subject, kind, callID string, attempt int32, payload []byte, h nats.Header) *nats.Msg {
	return &nats.Msg{Subject: subject, Data: payload, Header: k.Sign(h, kind, callID, attempt, payload)}
}

// VerifySignature checks h's signature over the statement of a message of
// kind about callID's attempt with payload, whoever signed it; it returns
// the signer. It is what an offline verifier does; Keyring.Check also
// asks whether the signer may sign it.
func VerifySignature(h nats.Header, kind, callID string, attempt int32, payload []byte) (string, Problem) {
	return VerifyStatement(h, Statement(kind, callID, attempt, payload))
}

// StatementOfSum is Statement given the payload's SHA-256 instead of the
// payload (an export's record carries the sum, not the bytes).
func StatementOfSum(kind, callID string, attempt int32, sum []byte) []byte {
	b := make([]byte, 0, 40+len(kind)+len(callID)+2*len(sum))
	b = append(b, "toolwire-signature-v1\n"...)
	b = append(b, kind...)
	b = append(b, '\n')
	b = append(b, callID...)
	b = append(b, '\n')
	b = strconv.AppendInt(b, int64(attempt), 10)
	b = append(b, '\n')
	return hex.AppendEncode(b, sum)
}

// VerifyStatement checks h's signature over statement, alone or as a leaf
// of the batch h names; it returns the signer, and the problem when the
// signature does not verify.
func VerifyStatement(h nats.Header, statement []byte) (string, Problem) {
	c, p := claimOf(h, statement)
	if p != "" {
		return c.signer, p
	}
	return c.signer, verifySigned(c.signer, c.sig, c.signed)
}

// claim is what a message's headers say was signed: by whom, the
// signature, and the bytes it must cover (the statement, or its batch's).
type claim struct {
	signer, sig string
	signed      []byte
}

// claimOf reads h's claim over statement; Unsigned without signature
// headers, Forged when the batch path cannot lead to a root.
func claimOf(h nats.Header, statement []byte) (claim, Problem) {
	c := claim{signer: h.Get(HeaderSigner), sig: h.Get(HeaderSignature)}
	if c.signer == "" && c.sig == "" {
		return c, Unsigned
	}
	signed, ok := signedBytes(h, statement)
	if !ok {
		return c, Forged
	}
	c.signed = signed
	return c, ""
}

// verifySigned checks sig, signer's signature over signed.
func verifySigned(signer, sig string, signed []byte) Problem {
	pub, err := publicKey(signer)
	if err != nil {
		return Forged
	}
	raw, err := base64.StdEncoding.DecodeString(sig)
	if err != nil || len(raw) != ed25519.SignatureSize || !ed25519.Verify(pub, signed, raw) {
		return Forged
	}
	return ""
}
