package httpexec

import (
	"encoding/json"
	"net/url"
	"strings"
	"testing"
)

// FuzzExpandStaysInSegment: whatever string a value holds, the expanded
// URL keeps the template's host and path shape, and the segment decodes
// back to the value.
func FuzzExpandStaysInSegment(f *testing.F) {
	for _, s := range []string{"../", "a/b", "?x=1", "#f", "%2F", "é", "@evil.example", "\\..\\", " ", "...", "~"} {
		f.Add(s)
	}
	ut, err := parseURLTemplate("https://api.example.com/v1/{v}/tail?q={v}")
	if err != nil {
		f.Fatal(err)
	}
	f.Fuzz(func(t *testing.T, v string) {
		raw, _ := json.Marshal(v)
		a, err := parseArgs([]byte(`{"v":` + string(raw) + `}`))
		if err != nil {
			t.Fatalf("parseArgs(%s): %v", raw, err)
		}
		got, err := ut.expand(a)
		if err != nil {
			if v == "" || v == "." || v == ".." {
				return
			}
			t.Fatalf("expand(%q): %v", v, err)
		}
		u, err := url.Parse(got)
		if err != nil {
			t.Fatalf("expand(%q) = %q does not parse: %v", v, got, err)
		}
		if u.Host != "api.example.com" || u.User != nil || u.Fragment != "" {
			t.Fatalf("expand(%q) = %q changed the authority or added a fragment", v, got)
		}
		segs := strings.Split(u.EscapedPath(), "/")
		if len(segs) != 4 || segs[1] != "v1" || segs[3] != "tail" {
			t.Fatalf("expand(%q) = %q changed the path shape", v, got)
		}
		var s string
		_ = json.Unmarshal(raw, &s)
		if dec, err := url.PathUnescape(segs[2]); err != nil || dec != s {
			t.Fatalf("expand(%q): segment %q decodes to %q", v, segs[2], dec)
		}
		if q := u.Query(); len(q) != 1 || q.Get("q") != s {
			t.Fatalf("expand(%q): query %q", v, u.RawQuery)
		}
	})
}
