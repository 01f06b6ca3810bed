package httpexec

import (
	"bytes"
	"encoding/json"
	"errors"
	"io"
	"strings"

	"github.com/toolwire/toolwire/pkg/tool"
)

// args are a call's arguments: a JSON object whose members keep their
// order and exact bytes.
type args struct {
	raw     []byte
	members []member
}

type member struct {
	name  string
	value json.RawMessage
}

// parseArgs decodes the top level of a call's arguments. Empty arguments
// are the empty object; anything but an object is a VALIDATION error.
func parseArgs(raw []byte) (*args, error) {
	a := &args{raw: raw}
	if len(bytes.TrimSpace(raw)) == 0 {
		a.raw = []byte("{}")
		return a, nil
	}
	dec := json.NewDecoder(bytes.NewReader(raw))
	tok, err := dec.Token()
	if err != nil || tok != json.Delim('{') {
		return nil, tool.InvalidArgument("", "the arguments must be a JSON object")
	}
	for dec.More() {
		tok, err := dec.Token()
		if err != nil {
			return nil, tool.InvalidArgument("", "the arguments are not valid JSON")
		}
		name, _ := tok.(string)
		var v json.RawMessage
		if err := dec.Decode(&v); err != nil {
			return nil, tool.InvalidArgument("", "the arguments are not valid JSON")
		}
		a.members = append(a.members, member{name: name, value: v})
	}
	if _, err := dec.Token(); err != nil {
		return nil, tool.InvalidArgument("", "the arguments are not valid JSON")
	}
	if _, err := dec.Token(); !errors.Is(err, io.EOF) {
		return nil, tool.InvalidArgument("", "the arguments hold more than one JSON value")
	}
	return a, nil
}

// get returns the raw value of an argument; the last one wins if a name
// repeats, as in encoding/json. null counts as absent.
func (a *args) get(name string) (json.RawMessage, bool) {
	for i := len(a.members) - 1; i >= 0; i-- {
		if a.members[i].name == name {
			v := a.members[i].value
			if string(v) == "null" {
				return nil, false
			}
			return v, true
		}
	}
	return nil, false
}

// lookup returns the raw value of an argument, null included.
func (a *args) lookup(name string) (json.RawMessage, bool) {
	for i := len(a.members) - 1; i >= 0; i-- {
		if a.members[i].name == name {
			return a.members[i].value, true
		}
	}
	return nil, false
}

// scalar returns an argument as text: a string's value, a number's JSON
// text, true or false. Objects and arrays are VALIDATION errors.
func (a *args) scalar(name string) (string, bool, error) {
	v, ok := a.get(name)
	if !ok {
		return "", false, nil
	}
	s, err := scalarText(name, v)
	return s, err == nil, err
}

func scalarText(name string, v json.RawMessage) (string, error) {
	switch v[0] {
	case '"':
		var s string
		if err := json.Unmarshal(v, &s); err != nil {
			return "", argError(name, "not a valid JSON string")
		}
		return s, nil
	case '{', '[':
		return "", argError(name, "must be a string, number or boolean")
	}
	return string(v), nil // a number, true or false, as written
}

// body returns the arguments not named in consumed, as a JSON object, in
// their original order and bytes. With nothing consumed it returns the
// arguments unchanged.
func (a *args) body(consumed map[string]bool) []byte {
	if len(consumed) == 0 {
		return a.raw
	}
	var b bytes.Buffer
	b.Grow(len(a.raw))
	b.WriteByte('{')
	first := true
	for _, m := range a.members {
		if consumed[m.name] {
			continue
		}
		if !first {
			b.WriteByte(',')
		}
		first = false
		key, _ := json.Marshal(m.name) // a string always encodes
		b.Write(key)
		b.WriteByte(':')
		b.Write(m.value)
	}
	b.WriteByte('}')
	return b.Bytes()
}

// argError is the VALIDATION error of one argument.
func argError(name, msg string) *tool.Error {
	return tool.InvalidArgument("/"+pointerEscaper.Replace(name), msg)
}

// pointerEscaper escapes a member name as a JSON Pointer token (RFC 6901).
var pointerEscaper = strings.NewReplacer("~", "~0", "/", "~1")
