package jsonvalue

import (
	"errors"
	"fmt"
	"strconv"
	"strings"
	"unicode/utf8"
)

// The kinds of text Parse refuses. Match them with errors.Is: every
// refusal is an *Error of one of these kinds, or a *DuplicateKeyError
// (which is ErrDuplicateKey).
var (
	// ErrSyntax: the text is not JSON (RFC 8259's grammar).
	ErrSyntax = errors.New("jsonvalue: not JSON")
	// ErrDuplicateKey: an object names a member twice (after unescaping).
	// encoding/json keeps the last one, other decoders the first, so such
	// a text has no single meaning.
	ErrDuplicateKey = errors.New("jsonvalue: duplicate object key")
	// ErrInvalidString: a string holds invalid UTF-8 or an unpaired UTF-16
	// surrogate escape (\ud800). encoding/json reads both as U+FFFD, which
	// would make different texts one value.
	ErrInvalidString = errors.New("jsonvalue: invalid string")
	// ErrNumberRange: a number's exponent has more than nine digits
	// (beyond ±999999999), after leading zeros.
	ErrNumberRange = errors.New("jsonvalue: number out of range")
	// ErrTooDeep: arrays and objects nest deeper than MaxDepth.
	ErrTooDeep = errors.New("jsonvalue: nesting too deep")
)

// Error is a refusal of Parse at a byte offset of the text.
type Error struct {
	// Kind is ErrSyntax, ErrInvalidString, ErrNumberRange or ErrTooDeep.
	Kind error
	// Offset is the byte offset of what was refused (the length of the
	// text when it ended too early).
	Offset int
	// Msg says what was refused, e.g. "invalid character 'x' after
	// object key".
	Msg string
}

func (e *Error) Error() string { return e.Msg + " (offset " + strconv.Itoa(e.Offset) + ")" }

// Unwrap returns Kind, so that errors.Is matches it.
func (e *Error) Unwrap() error { return e.Kind }

// DuplicateKeyError reports an object that repeats a key. It is
// ErrDuplicateKey (errors.Is).
type DuplicateKeyError struct {
	// Pointer is the JSON Pointer of the repeated member, e.g. "/a/0/path".
	Pointer string
	// Key is the repeated key.
	Key string
}

func (e *DuplicateKeyError) Error() string {
	return fmt.Sprintf("duplicate key %q at %s", e.Key, e.Pointer)
}

// Is reports whether target is ErrDuplicateKey.
func (e *DuplicateKeyError) Is(target error) bool { return target == ErrDuplicateKey }

// within prefixes the pointer of a duplicate found inside a member; other
// errors pass through. It runs only on the error path.
func within(err error, token string) error {
	var dup *DuplicateKeyError
	if errors.As(err, &dup) {
		dup.Pointer = "/" + escapePointer(token) + dup.Pointer
	}
	return err
}

// escapePointer escapes one reference token of a JSON Pointer (RFC
// 6901): "~" → "~0", "/" → "~1".
func escapePointer(token string) string {
	return strings.ReplaceAll(strings.ReplaceAll(token, "~", "~0"), "/", "~1")
}

// errEnd is the refusal of a text that ends before its value does.
func (p *parser) errEnd() error {
	return &Error{Kind: ErrSyntax, Offset: len(p.data), Msg: "unexpected end of JSON input"}
}

// unexpected refuses the byte at p.pos (or the end of the text) in
// encoding/json's words: "invalid character 'x' after object key".
func (p *parser) unexpected(context string) error {
	if p.pos >= len(p.data) {
		return p.errEnd()
	}
	return &Error{Kind: ErrSyntax, Offset: p.pos, Msg: "invalid character " + quoteByte(p.data[p.pos]) + " " + context}
}

func quoteByte(c byte) string {
	if c == '\'' {
		return `'\''`
	}
	if c == '"' {
		return `'"'`
	}
	s := strconv.Quote(string(rune(c)))
	if c >= utf8.RuneSelf {
		s = strconv.Quote(string([]byte{c}))
	}
	return "'" + s[1:len(s)-1] + "'"
}
