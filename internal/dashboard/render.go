package dashboard

import (
	"bytes"
	"encoding/base64"
	"encoding/json"
	"fmt"
	"html/template"
	"io/fs"
	"net/http"
	"net/url"
	"path"
	"strings"
	"time"

	toolwirev1 "github.com/toolwire/toolwire/pkg/toolproto/toolwire/v1"
)

// view is what every page template gets.
type view struct {
	Title string
	Nav   string // the nav entry to highlight
	V     *viewer
	Data  any
}

// parsePages parses each page template (templates/<name>.html) with the
// layout and the shared partials (templates/_*.html).
func parsePages() (map[string]*template.Template, error) {
	names, err := fs.Glob(templateFS, "templates/*.html")
	if err != nil {
		return nil, err
	}
	var shared []string
	var pages []string
	for _, n := range names {
		switch base := path.Base(n); {
		case base == "layout.html" || strings.HasPrefix(base, "_"):
			shared = append(shared, n)
		default:
			pages = append(pages, n)
		}
	}
	out := map[string]*template.Template{}
	for _, p := range pages {
		t, err := template.New("layout.html").Funcs(funcs).ParseFS(templateFS, append(append([]string{}, shared...), p)...)
		if err != nil {
			return nil, fmt.Errorf("dashboard: template %s: %w", p, err)
		}
		out[strings.TrimSuffix(path.Base(p), ".html")] = t
	}
	return out, nil
}

// render writes page name with status. Rendering into a buffer first: a
// template error is a 500, never half a page.
func (s *Server) render(w http.ResponseWriter, r *http.Request, status int, name string, v *viewer, title, nav string, data any) {
	t := s.pages[name]
	if t == nil {
		http.Error(w, "no page "+name, http.StatusInternalServerError)
		return
	}
	var b bytes.Buffer
	if err := t.ExecuteTemplate(&b, "layout.html", view{Title: title, Nav: nav, V: v, Data: data}); err != nil {
		s.log.Error("dashboard page failed", "page", name, "path", r.URL.Path, "err", err)
		http.Error(w, "the page failed; see the dispatcher's log", http.StatusInternalServerError)
		return
	}
	w.Header().Set("Content-Type", "text/html; charset=utf-8")
	w.Header().Set("Cache-Control", "no-store")
	w.WriteHeader(status)
	_, _ = w.Write(b.Bytes())
}

// renderPartial renders one named template of page name (a table row for
// a live update) to a string.
func (s *Server) renderPartial(page, name string, data any) (string, error) {
	var b bytes.Buffer
	if err := s.pages[page].ExecuteTemplate(&b, name, data); err != nil {
		return "", err
	}
	return b.String(), nil
}

var funcs = template.FuncMap{
	// delegated is a delegation chain call's state in words.
	"delegated": delegatedState,
	// delegatedClass is that state as one class token.
	"delegatedClass": func(c *toolwirev1.DelegatedCall) string { return strings.ReplaceAll(delegatedState(c), " ", "-") },
	// ts is a time as a <time> element: its text UTC, its datetime
	// attribute what static/app.js shows in the browser's zone.
	"ts": func(t time.Time) template.HTML {
		if t.IsZero() {
			return ""
		}
		t = t.UTC()
		return template.HTML(`<time datetime="` + t.Format(time.RFC3339Nano) + `">` + t.Format("2006-01-02 15:04:05.000") + `</time>`)
	},
	// tsPlain is a time as plain text with its zone named, where a <time>
	// tag would be dropped (inside an <option>): it is not shown local.
	"tsPlain": func(t time.Time) string {
		if t.IsZero() {
			return ""
		}
		return t.UTC().Format("2006-01-02 15:04:05") + " UTC"
	},
	"ago": func(t time.Time) string {
		if t.IsZero() {
			return ""
		}
		return shortDuration(time.Since(t)) + " ago"
	},
	"dur": func(d time.Duration) string {
		if d <= 0 {
			return ""
		}
		return shortDuration(d)
	},
	"pretty": prettyJSON,
	// with returns the query q with key set to value (empty removes it):
	// links that change one filter and keep the others.
	"with": func(q url.Values, key, value string) string {
		n := url.Values{}
		for k, vs := range q {
			n[k] = vs
		}
		if value == "" {
			n.Del(key)
		} else {
			n.Set(key, value)
		}
		return n.Encode()
	},
	"evname": func(t toolwirev1.CallEventType) string {
		return strings.ReplaceAll(strings.ToLower(strings.TrimPrefix(t.String(), "CALL_EVENT_TYPE_")), "_", " ")
	},
	// dataURI shows an image result inline, for image types a browser
	// renders without running anything (never SVG: it may hold script,
	// though the page's CSP would not run it).
	"dataURI": func(mime string, data []byte) template.URL {
		switch mime {
		case "image/png", "image/jpeg", "image/gif", "image/webp":
			return template.URL("data:" + mime + ";base64," + base64.StdEncoding.EncodeToString(data))
		}
		return ""
	},
	// isSVG and svgURI show an SVG result as an <img> of a data: URL:
	// browsers draw an image's SVG without running its scripts or loading
	// anything it names (and the page's CSP runs no inline script). It is
	// never put in the page itself.
	"isSVG": func(mime string) bool {
		return strings.EqualFold(strings.TrimSpace(strings.Split(mime, ";")[0]), "image/svg+xml")
	},
	"svgURI": func(data []byte) template.URL {
		return template.URL("data:image/svg+xml;base64," + base64.StdEncoding.EncodeToString(data))
	},
	"bytes": byteSize,
	"pct":   func(f float64) string { return fmt.Sprintf("%.1f%%", 100*f) },
	"add":   func(a, b int) int { return a + b },
}

// prettyJSON is raw indented, or raw as it is when it is not JSON.
func prettyJSON(raw []byte) string {
	var b bytes.Buffer
	if json.Indent(&b, raw, "", "  ") != nil {
		return string(raw)
	}
	return b.String()
}

// shortDuration is d to two significant units: 1.2s, 340ms, 3m20s, 2h5m.
func shortDuration(d time.Duration) string {
	switch {
	case d < time.Millisecond:
		return d.Round(time.Microsecond).String()
	case d < time.Second:
		return d.Round(time.Millisecond).String()
	case d < time.Minute:
		return d.Round(100 * time.Millisecond).String()
	case d < time.Hour:
		return d.Round(time.Second).String()
	case d < 48*time.Hour:
		return d.Round(time.Minute).String()
	}
	return fmt.Sprintf("%dd", int(d.Hours()/24))
}
