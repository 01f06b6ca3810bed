package policy

import (
	"path"
	"strings"
	"testing"
	"unicode/utf8"

	"github.com/stretchr/testify/require"
)

func TestGlobMatch(t *testing.T) {
	t.Parallel()
	for _, tc := range []struct {
		pattern string
		yes, no []string
	}{
		{"fs_read", []string{"fs_read"}, []string{"fs_rea", "fs_read2", "FS_READ", ""}},
		{"fs_*", []string{"fs_", "fs_read", "fs_write"}, []string{"fs", "xfs_read", "fs_a/b"}},
		{"*_read", []string{"fs_read", "_read"}, []string{"fs_write", "a/b_read"}},
		{"mcp__github__*", []string{"mcp__github__create_issue"}, []string{"mcp__gitlab__x"}},
		{"*", []string{"", "anything", "with space"}, []string{"a/b"}},
		{"**", []string{"", "a/b/c", "/"}, nil},
		{"/etc/**", []string{"/etc", "/etc/", "/etc/passwd", "/etc/ssl/certs/x.pem"}, []string{"/etcx", "/et", "etc/passwd", "/tmp/etc/x"}},
		{"/etc/*", []string{"/etc/passwd", "/etc/"}, []string{"/etc", "/etc/ssl/x"}},
		{"**/.ssh/**", []string{"/home/a/.ssh/id_rsa", "x/.ssh/", "/.ssh/k"}, []string{"/home/a/.sshx/k", ".ssh/k"}},
		{"**.pem", []string{"a.pem", "/a/b/c.pem", ".pem"}, []string{"a.pem.bak", "apem"}},
		{"*.pem", []string{"a.pem"}, []string{"/a/b.pem"}},
		{"a?c", []string{"abc", "aéc"}, []string{"ac", "abbc", "a/c"}},
		{"[a-c]x", []string{"ax", "bx", "cx"}, []string{"dx", "x", "/x"}},
		{"[!a-c]x", []string{"dx", "éx"}, []string{"ax", "/x"}},
		{"[^0-9]*", []string{"a1", "b"}, []string{"1a", ""}},
		{`\*lit\?`, []string{"*lit?"}, []string{"xlit?", "*lit"}},
		{`[\]]`, []string{"]"}, []string{"["}},
		{"acme-*", []string{"acme-", "acme-web"}, []string{"acme", "acm-x"}},
		{"a*b*c", []string{"abc", "aXbYc", "abbbc", "acbc"}, []string{"acb", "ab/c", "a/bc"}},
		{"a**b*c", []string{"a/x/bc", "ab/bc"}, []string{"ab/c/x"}},
		{"*a*a*a*a*b", []string{"aaaab", "xaxaxaxab"}, []string{strings.Repeat("a", 3000)}},
		{"é*", []string{"é", "été"}, []string{"e"}},
	} {
		g, err := compileGlob(tc.pattern)
		require.NoError(t, err, tc.pattern)
		for _, s := range tc.yes {
			require.True(t, g.match(s), "%q should match %q", tc.pattern, s)
		}
		for _, s := range tc.no {
			require.False(t, g.match(s), "%q should not match %q", tc.pattern, s)
		}
	}
}

func TestGlobRefuses(t *testing.T) {
	t.Parallel()
	for _, p := range []string{"", "[", "[a", "[]", "[!]", `a\`, "[b-a]", strings.Repeat("a", maxGlobBytes+1), strings.Repeat("a", maxGlobTokens+1), "a\xff"} {
		_, err := compileGlob(p)
		require.ErrorIs(t, err, errBadGlob, "%q", p)
	}
}

// A long string against a pattern that makes a backtracking matcher
// explode stays linear.
func TestGlobLinear(t *testing.T) {
	t.Parallel()
	g, err := compileGlob("**a**a**a**a**a**a**a**a**b")
	require.NoError(t, err)
	s := strings.Repeat("a", 256<<10)
	require.False(t, g.match(s))
}

// refMatch is a plain backtracking matcher with the same semantics, for
// the fuzz test (exponential, fine for short inputs).
func refMatch(toks []globTok, s string) bool {
	if len(toks) == 0 {
		return s == ""
	}
	t := toks[0]
	switch t.kind {
	case tokStar, tokDStar:
		for i := 0; ; {
			if refMatch(toks[1:], s[i:]) {
				return true
			}
			if i == len(s) {
				return false
			}
			r, n := utf8.DecodeRuneInString(s[i:])
			if r == '/' && t.kind == tokStar {
				return false
			}
			i += n
		}
	}
	if s == "" {
		return false
	}
	r, n := utf8.DecodeRuneInString(s)
	ok := false
	switch t.kind {
	case tokLit:
		ok = r == t.r
	case tokAny:
		ok = r != '/'
	case tokClass:
		ok = r != '/' && t.inClass(r)
	}
	return ok && refMatch(toks[1:], s[n:])
}

// FuzzGlob checks the fast paths and the automaton against the reference
// matcher, and against path.Match where the semantics agree (no **, no
// classes, no '/' in the string).
func FuzzGlob(f *testing.F) {
	for _, s := range [][2]string{{"a*b", "axxb"}, {"/etc/**", "/etc"}, {"**/x", "a/b/x"}, {"[a-c]?*", "bq/"}, {"a**", "a/b"}, {"*.go", "x.go"}} {
		f.Add(s[0], s[1])
	}
	f.Fuzz(func(t *testing.T, pattern, s string) {
		if len(pattern) > 16 || len(s) > 24 || !utf8.ValidString(s) {
			return
		}
		g, err := compileGlob(pattern)
		if err != nil {
			return
		}
		want := refMatch(g.toks, s)
		if g.alt != nil {
			want = want || refMatch(g.alt.toks, s)
		}
		require.Equal(t, want, g.match(s), "pattern %q string %q", pattern, s)
		if !strings.Contains(pattern, "**") && !strings.ContainsAny(pattern, `[\`) && !strings.Contains(s, "/") {
			pm, err := path.Match(pattern, s)
			if err == nil {
				require.Equal(t, pm, g.match(s), "path.Match disagrees: pattern %q string %q", pattern, s)
			}
		}
	})
}
