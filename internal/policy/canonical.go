package policy

import (
	"crypto/sha256"
	"encoding/hex"
	"errors"

	"github.com/toolwire/toolwire/internal/jsonvalue"
)

// Errors of ParseArgs, ArgsFrom and Canonicalize: the kinds of text the
// one JSON reader (internal/jsonvalue) refuses, and ErrNotObject. Match
// them with errors.Is; the error itself gives the offset, or for a
// duplicate key the JSON Pointer of the repeated member.
var (
	// ErrInvalidJSON: the text is not JSON (RFC 8259).
	ErrInvalidJSON = jsonvalue.ErrSyntax
	// ErrDuplicateKey: an object names a member twice. encoding/json keeps
	// the last one, other decoders the first, so such arguments have no
	// single meaning and are refused.
	ErrDuplicateKey = jsonvalue.ErrDuplicateKey
	// ErrInvalidString: a string holds invalid UTF-8 or an unpaired UTF-16
	// surrogate escape (\ud800). encoding/json turns both into U+FFFD,
	// which would make different arguments look the same.
	ErrInvalidString = jsonvalue.ErrInvalidString
	// ErrNumberRange: a number's exponent is beyond ±999999999.
	ErrNumberRange = jsonvalue.ErrNumberRange
	// ErrTooDeep: arrays and objects nest deeper than MaxArgsDepth.
	ErrTooDeep = jsonvalue.ErrTooDeep
	// ErrNotObject: arguments are a JSON value other than an object.
	ErrNotObject = errors.New("policy: arguments are not a JSON object")
)

// MaxArgsDepth bounds the nesting of arrays and objects that ParseArgs and
// Canonicalize accept (jsonvalue.MaxDepth). The dispatcher's own limit (32
// by default) is far lower; this one only keeps the parser's recursion
// bounded.
const MaxArgsDepth = jsonvalue.MaxDepth

// Args are a call's arguments as every decision sees them: one parsed
// text (a jsonvalue.Doc) that is an object. Its forms — the value (for
// argument globs and CEL), the canonical JSON text and its SHA-256 (for
// approval bindings and the loop guard) — are the Doc's, derived when
// first asked for, once. An Args is immutable and safe for concurrent use.
// A nil *Args stands for no arguments, {}.
type Args jsonvalue.Doc

// emptyArgs stands for a nil *Args: no arguments, {}.
var emptyArgs = mustParseArgs("{}")

func mustParseArgs(s string) *Args {
	a, err := ParseArgs([]byte(s))
	if err != nil {
		panic(err) // only for constants of this package
	}
	return a
}

// ParseArgs parses a call's arguments, a JSON object, with the one JSON
// reader (jsonvalue.Parse). Empty input (or only white space) stands for
// {}. It is stricter than encoding/json: it refuses duplicate keys,
// invalid UTF-8, unpaired surrogate escapes, nesting deeper than
// MaxArgsDepth and exponents beyond ±999999999 (see the Err variables), so
// the dispatcher answers such calls VALIDATION; and a value other than an
// object (ErrNotObject).
func ParseArgs(raw []byte) (*Args, error) {
	if isBlank(raw) {
		raw = []byte("{}")
	}
	doc, err := jsonvalue.Parse(raw)
	if err != nil {
		return nil, err
	}
	return ArgsFrom(doc)
}

// ArgsFrom gives the arguments of a text parsed already, doc (not nil;
// registry.CheckedArgs parses and validates a call's arguments and returns
// their Doc), so that admission reads them once. It returns ErrNotObject
// unless the text is an object.
func ArgsFrom(doc *jsonvalue.Doc) (*Args, error) {
	if _, ok := doc.Object(); !ok {
		return nil, ErrNotObject
	}
	return (*Args)(doc), nil
}

// Doc returns the parsed text the arguments are.
func (a *Args) Doc() *jsonvalue.Doc { return (*jsonvalue.Doc)(a.orEmpty()) }

// Value returns the decoded arguments (jsonvalue's native form): objects
// are map[string]any, arrays []any, numbers int64 when they are whole and
// fit, float64 otherwise (±Inf beyond its range), and strings, bools and
// nil as such. The caller must not modify it.
func (a *Args) Value() map[string]any { return a.Doc().Native().(map[string]any) }

// Canonical returns the canonical JSON text of the arguments (see
// Canonicalize). The caller must not modify it.
func (a *Args) Canonical() []byte { return a.Doc().Canonical() }

// SHA256 returns the SHA-256 of Canonical.
func (a *Args) SHA256() [sha256.Size]byte { return a.Doc().SHA256() }

// Hash returns SHA256 as lower-case hex, the form approval records and
// the loop guard store.
func (a *Args) Hash() string {
	s := a.SHA256()
	return hex.EncodeToString(s[:])
}

func (a *Args) orEmpty() *Args {
	if a == nil {
		return emptyArgs
	}
	return a
}

// ArgsDigest is the SHA-256 of the canonical form of a call's arguments
// (ParseArgs): two spellings of the same arguments have one digest.
func ArgsDigest(raw []byte) ([]byte, error) {
	a, err := ParseArgs(raw)
	if err != nil {
		return nil, err
	}
	sum := a.SHA256()
	return sum[:], nil
}

// Canonicalize returns the canonical form of any JSON text
// (jsonvalue.Doc.Canonical): no white space outside strings; object
// members sorted by the UTF-8 bytes of their keys (that is, by code
// point); strings with only `"`, `\` and control characters escaped (as
// \b \f \n \r \t or \u00xx), everything else as UTF-8; numbers as the
// decimal number they denote, so 1, 1.0, 1e0 and 10E-1 are all written 1,
// -0 is 0, and no number is rounded to a float64 (9007199254740993 stays
// itself). A number is written as its digits when the decimal point falls
// within 21 places of them (1.5, 0.0001, 1e20 → 100000000000000000000),
// otherwise in exponent form (1e+21, 1.5e-7), which agrees with
// JavaScript's and RFC 8785's form wherever a float64 holds the number
// exactly. Two texts have the same canonical form exactly when they denote
// the same JSON value. It refuses what ParseArgs refuses, but for
// ErrNotObject (any value has a canonical form), and empty input.
func Canonicalize(raw []byte) ([]byte, error) {
	doc, err := jsonvalue.Parse(raw)
	if err != nil {
		return nil, err
	}
	return doc.Canonical(), nil
}

func isBlank(b []byte) bool {
	for _, c := range b {
		if c != ' ' && c != '\t' && c != '\n' && c != '\r' {
			return false
		}
	}
	return true
}
