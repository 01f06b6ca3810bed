package output

import (
	"bufio"
	"bytes"
	"context"
	"errors"
	"fmt"
	"io"
	"regexp"
	"regexp/syntax"
	"slices"
	"strings"
	"unicode/utf8"

	toolwirev1 "github.com/toolwire/toolwire/pkg/toolproto/toolwire/v1"
)

// Bounds of a read.
const (
	// DefaultLimit is the limit of a read that gives none.
	DefaultLimit = 64 << 10
	// MaxLimit is the largest limit of a read; larger ones are lowered to
	// it. It is also the longest piece of a line a pattern is matched
	// against.
	MaxLimit = 1 << 20
	// MaxPatternBytes bounds the text of a pattern.
	MaxPatternBytes = 1024
	// MaxPatternInsts bounds the compiled program of a pattern (Go's RE2
	// engine matches in time linear in the input times this size).
	MaxPatternInsts = 10000
	// lineOverhead is what each matching line costs of the limit besides
	// its text, so that a page of empty matches is bounded too.
	lineOverhead = 16
)

// ErrPattern is the cause of a pattern Compile refuses.
var ErrPattern = errors.New("output: invalid pattern")

// Text returns the output text of resp: its text blocks joined by
// newlines, or, when it has no text block, its structured JSON.
func Text(resp *toolwirev1.ToolResponse) string {
	var (
		b    strings.Builder
		seen bool
	)
	for _, c := range resp.GetContent() {
		t, ok := c.GetKind().(*toolwirev1.Content_Text)
		if !ok {
			continue
		}
		if seen {
			b.WriteByte('\n')
		}
		seen = true
		b.WriteString(t.Text.GetText())
	}
	if !seen {
		return resp.GetStructuredJson()
	}
	return b.String()
}

// Lines counts the lines of s: its newlines, plus one when s does not end
// with one ("" has none, "a" and "a\n" one, "a\nb" two).
func Lines(s string) int64 {
	n := int64(strings.Count(s, "\n"))
	if s != "" && s[len(s)-1] != '\n' {
		n++
	}
	return n
}

// Compile compiles a pattern: Go's RE2 syntax (linear-time matching, no
// backreferences), at most MaxPatternBytes of text and MaxPatternInsts
// instructions compiled. Errors wrap ErrPattern.
func Compile(pattern string) (*regexp.Regexp, error) {
	if len(pattern) > MaxPatternBytes {
		return nil, fmt.Errorf("%w: %d bytes, at most %d", ErrPattern, len(pattern), MaxPatternBytes)
	}
	re, err := syntax.Parse(pattern, syntax.Perl)
	if err != nil {
		return nil, fmt.Errorf("%w: %w", ErrPattern, err)
	}
	prog, err := syntax.Compile(re.Simplify())
	if err != nil {
		return nil, fmt.Errorf("%w: %w", ErrPattern, err)
	}
	if len(prog.Inst) > MaxPatternInsts {
		return nil, fmt.Errorf("%w: it compiles to %d instructions, at most %d", ErrPattern, len(prog.Inst), MaxPatternInsts)
	}
	out, err := regexp.Compile(pattern)
	if err != nil {
		return nil, fmt.Errorf("%w: %w", ErrPattern, err)
	}
	return out, nil
}

// ClampLimit returns the limit a read uses for the one asked (0 =
// DefaultLimit, at most MaxLimit).
func ClampLimit(limit int64) int64 {
	switch {
	case limit <= 0:
		return DefaultLimit
	case limit > MaxLimit:
		return MaxLimit
	}
	return limit
}

// Range is what a read returns.
type Range struct {
	// Text read (Read).
	Text string
	// Lines that matched (Grep).
	Lines []*toolwirev1.OutputLine
	// Offset is where the text or the first line searched starts; Next
	// where the next read starts (the end of the output when Next is its
	// size).
	Offset, Next int64
}

// Read reads at most limit bytes (ClampLimit) of the UTF-8 text r from
// byte offset on. The range never splits a character: a start inside one
// moves to the next character, an end inside one to its start. r is read
// from its beginning to offset+limit; ctx is checked between chunks.
func Read(ctx context.Context, r io.Reader, offset, limit int64) (Range, error) {
	limit = ClampLimit(limit)
	offset = max(offset, 0)
	br := bufio.NewReaderSize(r, chunk)
	skipped, err := discard(ctx, br, offset)
	if err != nil {
		return Range{}, err
	}
	if skipped < offset { // past the end
		return Range{Offset: skipped, Next: skipped}, nil
	}
	// A start inside a character moves to the next one.
	for {
		b, err := br.Peek(1)
		if err != nil || utf8.RuneStart(b[0]) {
			break
		}
		_, _ = br.Discard(1)
		offset++
	}
	buf := make([]byte, 0, min(limit, chunk))
	atEnd := false
	for int64(len(buf)) < limit {
		if err := ctx.Err(); err != nil {
			return Range{}, fmt.Errorf("output: read: %w", err)
		}
		n := int(min(limit-int64(len(buf)), chunk))
		buf = slices.Grow(buf, n)
		k, err := io.ReadFull(br, buf[len(buf):len(buf)+n])
		buf = buf[:len(buf)+k]
		if errors.Is(err, io.EOF) || errors.Is(err, io.ErrUnexpectedEOF) {
			atEnd = true
			break
		}
		if err != nil {
			return Range{}, fmt.Errorf("output: read: %w", err)
		}
	}
	// An end inside a character moves to its start, unless the text itself
	// ends there (it ends with a broken character: shown replaced, and the
	// range still reaches the end, so a reader paging to the end stops).
	read := int64(len(buf))
	for i := len(buf) - 1; !atEnd && i >= 0 && i >= len(buf)-utf8.UTFMax; i-- {
		if utf8.RuneStart(buf[i]) {
			if !utf8.FullRune(buf[i:]) {
				buf = buf[:i]
				read = int64(i)
			}
			break
		}
	}
	return Range{Text: strings.ToValidUTF8(string(buf), "\uFFFD"), Offset: offset, Next: offset + read}, nil
}

// chunk is the unit of reading.
const chunk = 64 << 10

// discard skips n bytes of br, checking ctx between chunks; it returns
// how many it skipped (fewer at the end of br).
func discard(ctx context.Context, br *bufio.Reader, n int64) (int64, error) {
	var done int64
	for done < n {
		if err := ctx.Err(); err != nil {
			return done, fmt.Errorf("output: read: %w", err)
		}
		k, err := br.Discard(int(min(n-done, chunk)))
		done += int64(k)
		if errors.Is(err, io.EOF) {
			return done, nil
		}
		if err != nil {
			return done, fmt.Errorf("output: read: %w", err)
		}
	}
	return done, nil
}

// Grep returns the lines of the UTF-8 text r that start at or after byte
// offset and match re, until their text (plus a small overhead per line)
// reaches limit (ClampLimit): Next is then the offset of the first line
// not returned, so that a read from there goes on. A line longer than
// MaxLimit is matched in pieces of at most MaxLimit bytes (cut at a
// character), each reported with the line's number and cut set; so is a
// first match longer than the limit, cut to it. r is read from its
// beginning (line numbers count from there); ctx is checked between
// lines.
func Grep(ctx context.Context, r io.Reader, re *regexp.Regexp, offset, limit int64) (Range, error) {
	limit = ClampLimit(limit)
	offset = max(offset, 0)
	sc := bufio.NewScanner(r)
	sc.Buffer(make([]byte, 0, chunk), MaxLimit+utf8.UTFMax+1)
	// Of the last token: a newline followed it (and was consumed); it
	// ends its line (a newline, or the end of the text).
	var newline, lineEnd bool
	sc.Split(func(data []byte, atEOF bool) (int, []byte, error) {
		if i := bytes.IndexByte(data[:min(len(data), MaxLimit+1)], '\n'); i >= 0 && i <= MaxLimit {
			newline, lineEnd = true, true
			return i + 1, data[:i], nil
		}
		if len(data) <= MaxLimit && !(atEOF && len(data) > 0) {
			return 0, nil, nil // more data, or the end
		}
		cut := min(len(data), MaxLimit)
		for cut > 0 && cut < len(data) && !utf8.RuneStart(data[cut]) {
			cut--
		}
		if cut == 0 { // not UTF-8: cut anywhere
			cut = min(len(data), MaxLimit)
		}
		newline, lineEnd = false, atEOF && cut == len(data)
		return cut, data[:cut], nil
	})
	out := Range{Offset: -1}
	var (
		pos    int64     // offset of the current token
		number int64 = 1 // its line
		used   int64
		cont   bool // the current token continues a line
	)
	for sc.Scan() {
		if err := ctx.Err(); err != nil {
			return Range{}, fmt.Errorf("output: grep: %w", err)
		}
		tok := sc.Bytes()
		adv := int64(len(tok))
		if newline {
			adv++
		}
		if pos >= offset {
			if out.Offset < 0 {
				out.Offset = pos
			}
			if re.Match(tok) {
				text, cut := tok, cont || !lineEnd
				cost := int64(len(tok)) + lineOverhead
				if used+cost > limit {
					if len(out.Lines) > 0 {
						out.Next = pos
						return out, nil
					}
					n := int(max(limit-lineOverhead, 0))
					for n > 0 && !utf8.RuneStart(tok[n]) {
						n--
					}
					text, cut, cost = tok[:n], true, limit
				}
				out.Lines = append(out.Lines, &toolwirev1.OutputLine{Number: number, Offset: pos,
					Text: strings.ToValidUTF8(string(text), "\uFFFD"), Cut: cut})
				used += cost
				if used >= limit {
					out.Next = pos + adv
					return out, nil
				}
			}
		}
		pos += adv
		cont = !lineEnd
		if lineEnd {
			number++
		}
	}
	if err := sc.Err(); err != nil {
		return Range{}, fmt.Errorf("output: grep: %w", err)
	}
	if out.Offset < 0 { // nothing at or after offset
		out.Offset = pos
	}
	out.Next = pos
	return out, nil
}
