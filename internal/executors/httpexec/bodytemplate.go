package httpexec

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"strings"
)

// bodyTemplate is a parsed body_template (syntax in doc.go): a JSON
// document whose string values may hold {name} placeholders.
type bodyTemplate struct {
	root *node
}

type nodeKind int

const (
	literalNode nodeKind = iota // a number, true, false or null, as written
	stringNode                  // a string, possibly with placeholders
	valueNode                   // a string that was exactly "{name}"
	objectNode
	arrayNode
)

type node struct {
	kind nodeKind
	// raw is a literal's JSON text.
	raw string
	// parts of a string: literals and placeholders.
	parts []strPart
	// name of a valueNode's argument.
	name string
	// keys and children of an object (keys as encoded JSON), or children
	// of an array.
	keys     []string
	children []*node
}

type strPart struct {
	literal string
	name    string
}

func parseBodyTemplate(t string) (*bodyTemplate, error) {
	dec := json.NewDecoder(strings.NewReader(t))
	dec.UseNumber()
	root, err := parseNode(dec, 0)
	if err != nil {
		return nil, fmt.Errorf("body_template: %w", err)
	}
	if _, err := dec.Token(); !errors.Is(err, io.EOF) {
		return nil, errors.New("body_template: more than one JSON value")
	}
	return &bodyTemplate{root: root}, nil
}

const maxTemplateDepth = 64

func parseNode(dec *json.Decoder, depth int) (*node, error) {
	if depth > maxTemplateDepth {
		return nil, errors.New("nested too deeply")
	}
	tok, err := dec.Token()
	if err != nil {
		return nil, fmt.Errorf("not valid JSON: %w", err)
	}
	switch v := tok.(type) {
	case json.Delim:
		switch v {
		case '{':
			n := &node{kind: objectNode}
			for dec.More() {
				kt, err := dec.Token()
				if err != nil {
					return nil, fmt.Errorf("not valid JSON: %w", err)
				}
				key, _ := json.Marshal(kt.(string))
				child, err := parseNode(dec, depth+1)
				if err != nil {
					return nil, err
				}
				n.keys = append(n.keys, string(key))
				n.children = append(n.children, child)
			}
			_, err := dec.Token()
			return n, err
		case '[':
			n := &node{kind: arrayNode}
			for dec.More() {
				child, err := parseNode(dec, depth+1)
				if err != nil {
					return nil, err
				}
				n.children = append(n.children, child)
			}
			_, err := dec.Token()
			return n, err
		}
		return nil, fmt.Errorf("unexpected %v", v)
	case string:
		return parseStringNode(v)
	case json.Number:
		return &node{kind: literalNode, raw: v.String()}, nil
	case bool:
		return &node{kind: literalNode, raw: fmt.Sprint(v)}, nil
	case nil:
		return &node{kind: literalNode, raw: "null"}, nil
	}
	return nil, fmt.Errorf("unexpected token %v", tok)
}

// parseStringNode splits a string into literals and {name} placeholders;
// "{{" is a literal "{" and braces around anything but a name are literal.
func parseStringNode(s string) (*node, error) {
	if len(s) > 2 && s[0] == '{' && s[len(s)-1] == '}' && validName(s[1:len(s)-1]) {
		return &node{kind: valueNode, name: s[1 : len(s)-1]}, nil
	}
	n := &node{kind: stringNode}
	var lit strings.Builder
	for i := 0; i < len(s); i++ {
		if s[i] != '{' {
			lit.WriteByte(s[i])
			continue
		}
		if i+1 < len(s) && s[i+1] == '{' {
			lit.WriteByte('{')
			i++
			continue
		}
		end := strings.IndexByte(s[i:], '}')
		if end < 0 || !validName(s[i+1:i+end]) {
			lit.WriteByte('{')
			continue
		}
		if lit.Len() > 0 {
			n.parts = append(n.parts, strPart{literal: lit.String()})
			lit.Reset()
		}
		n.parts = append(n.parts, strPart{name: s[i+1 : i+end]})
		i += end
	}
	if lit.Len() > 0 || len(n.parts) == 0 {
		n.parts = append(n.parts, strPart{literal: lit.String()})
	}
	return n, nil
}

// vars returns the names the template refers to.
func (bt *bodyTemplate) vars() []string {
	var names []string
	var walk func(n *node)
	walk = func(n *node) {
		switch n.kind {
		case valueNode:
			names = append(names, n.name)
		case stringNode:
			for _, p := range n.parts {
				if p.name != "" {
					names = append(names, p.name)
				}
			}
		}
		for _, c := range n.children {
			walk(c)
		}
	}
	walk(bt.root)
	return names
}

// render writes the body for a.
func (bt *bodyTemplate) render(a *args) ([]byte, error) {
	var b bytes.Buffer
	if bt.root.kind == valueNode {
		v, ok := a.lookup(bt.root.name)
		if !ok {
			return nil, argError(bt.root.name, "required by body_template")
		}
		b.Write(v)
		return b.Bytes(), nil
	}
	if err := renderNode(&b, bt.root, a); err != nil {
		return nil, err
	}
	return b.Bytes(), nil
}

func renderNode(b *bytes.Buffer, n *node, a *args) error {
	switch n.kind {
	case literalNode:
		b.WriteString(n.raw)
	case valueNode:
		v, _ := a.lookup(n.name) // absent values are dropped by the parent
		b.Write(v)
	case stringNode:
		var s strings.Builder
		for _, p := range n.parts {
			if p.name == "" {
				s.WriteString(p.literal)
				continue
			}
			v, _, err := a.scalar(p.name)
			if err != nil {
				return err
			}
			s.WriteString(v)
		}
		enc, _ := json.Marshal(s.String()) // a string always encodes
		b.Write(enc)
	case objectNode, arrayNode:
		// Members whose value is an absent argument are left out.
		open, close := byte('['), byte(']')
		if n.kind == objectNode {
			open, close = '{', '}'
		}
		b.WriteByte(open)
		first := true
		for i, c := range n.children {
			if c.kind == valueNode {
				if _, ok := a.lookup(c.name); !ok {
					continue
				}
			}
			if !first {
				b.WriteByte(',')
			}
			first = false
			if n.kind == objectNode {
				b.WriteString(n.keys[i])
				b.WriteByte(':')
			}
			if err := renderNode(b, c, a); err != nil {
				return err
			}
		}
		b.WriteByte(close)
	}
	return nil
}
