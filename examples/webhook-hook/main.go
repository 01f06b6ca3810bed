// Command webhook-hook is an HTTP webhook that serves as an after-hook
// (docs/policy.md, "Hooks"): it redacts e-mail addresses and card numbers
// from the responses of the tools it is bound to, before they are stored.
//
// A hook is a registered tool, so the webhook enters the fleet as an HTTP
// tool (redact_pii.yaml, served by any worker with the HTTP executor) and
// is bound in a policy document (policy.yaml):
//
//	hooks:
//	  - {id: pii, phase: after, tool: redact_pii, tools: ["*"]}
//
// It listens on -listen (default 127.0.0.1:8787) and answers only requests
// that carry "Authorization: Bearer <token>", the token read from the file
// -token-file (the worker sends it from its REDACT_PII_AUTHORIZATION
// environment variable). Request bodies are limited to 4 MiB before they
// are read. It decodes and answers the hook contract's types (pkg/hook).
package main

import (
	"context"
	"crypto/subtle"
	"encoding/json"
	"errors"
	"flag"
	"fmt"
	"log/slog"
	"net/http"
	"os"
	"os/signal"
	"regexp"
	"strconv"
	"strings"
	"syscall"
	"time"

	"github.com/toolwire/toolwire/pkg/hook"
)

// maxBody bounds a request body, applied before it is read.
const maxBody = 4 << 20

var (
	email = regexp.MustCompile(`[A-Za-z0-9._%+-]+@[A-Za-z0-9.-]+\.[A-Za-z]{2,}`)
	// card: 13 to 19 digits, optionally grouped by spaces or dashes.
	card = regexp.MustCompile(`\b(?:\d[ -]?){12,18}\d\b`)
)

// redactText replaces what looks like personal data in s, counting it.
func redactText(s string, n *int) string {
	s = email.ReplaceAllStringFunc(s, func(string) string { *n++; return "[email]" })
	return card.ReplaceAllStringFunc(s, func(string) string { *n++; return "[card]" })
}

// redactJSON redacts every string in a JSON value.
func redactJSON(v any, n *int) any {
	switch x := v.(type) {
	case string:
		return redactText(x, n)
	case map[string]any:
		for k, e := range x {
			x[k] = redactJSON(e, n)
		}
	case []any:
		for i, e := range x {
			x[i] = redactJSON(e, n)
		}
	}
	return v
}

// answer decides on one after-hook request: redact what it finds in the
// text blocks and the structured content, pass other blocks unchanged.
func answer(req *hook.AfterRequest) (hook.AfterAnswer, error) {
	var blocks []json.RawMessage
	if len(req.Response.Content) > 0 {
		if err := json.Unmarshal(req.Response.Content, &blocks); err != nil {
			return hook.AfterAnswer{}, fmt.Errorf("content: %w", err)
		}
	}
	n := 0
	var redacted []json.RawMessage
	for _, raw := range blocks {
		var block map[string]any
		if err := json.Unmarshal(raw, &block); err != nil {
			return hook.AfterAnswer{}, fmt.Errorf("content block: %w", err)
		}
		if text, ok := block["text"].(string); ok && block["type"] == "text" {
			block["text"] = redactText(text, &n)
		}
		b, err := json.Marshal(block)
		if err != nil {
			return hook.AfterAnswer{}, err
		}
		redacted = append(redacted, b)
	}
	ans := hook.AfterAnswer{Action: hook.Redact}
	if len(redacted) > 0 {
		b, err := json.Marshal(redacted)
		if err != nil {
			return hook.AfterAnswer{}, err
		}
		ans.Content = b
	}
	if len(req.Response.StructuredContent) > 0 {
		var v any
		if err := json.Unmarshal(req.Response.StructuredContent, &v); err != nil {
			return hook.AfterAnswer{}, fmt.Errorf("structured content: %w", err)
		}
		b, err := json.Marshal(redactJSON(v, &n))
		if err != nil {
			return hook.AfterAnswer{}, err
		}
		ans.StructuredContent = b
	}
	if n == 0 {
		return hook.AfterAnswer{Action: hook.Continue}, nil
	}
	ans.Reason = "personal data"
	ans.Annotations = map[string]string{"pii_redacted": strconv.Itoa(n)}
	return ans, nil
}

// handler serves POST /hook for callers with the bearer token.
func handler(token string, log *slog.Logger) http.Handler {
	want := []byte("Bearer " + token)
	mux := http.NewServeMux()
	mux.HandleFunc("POST /hook", func(w http.ResponseWriter, r *http.Request) {
		if subtle.ConstantTimeCompare([]byte(r.Header.Get("Authorization")), want) != 1 {
			w.Header().Set("WWW-Authenticate", `Bearer realm="redact-pii"`)
			http.Error(w, "unauthorized", http.StatusUnauthorized)
			return
		}
		var req hook.AfterRequest
		if err := json.NewDecoder(http.MaxBytesReader(w, r.Body, maxBody)).Decode(&req); err != nil {
			var tooBig *http.MaxBytesError
			if errors.As(err, &tooBig) {
				http.Error(w, "request body over 4 MiB", http.StatusRequestEntityTooLarge)
				return
			}
			http.Error(w, "not an after-hook request: "+err.Error(), http.StatusBadRequest)
			return
		}
		if req.Phase != hook.PhaseAfter {
			http.Error(w, "this hook looks at responses: bind it with phase: after", http.StatusBadRequest)
			return
		}
		ans, err := answer(&req)
		if err != nil {
			http.Error(w, err.Error(), http.StatusBadRequest)
			return
		}
		log.Info("looked at a response", "hook", req.Hook, "tool", req.Tool, "action", ans.Action)
		w.Header().Set("Content-Type", "application/json")
		_ = json.NewEncoder(w).Encode(ans)
	})
	return mux
}

func main() {
	listen := flag.String("listen", "127.0.0.1:8787", "address to listen on")
	tokenFile := flag.String("token-file", "", "file holding the bearer token callers must present (required)")
	flag.Parse()
	log := slog.New(slog.NewTextHandler(os.Stderr, nil))
	if err := run(*listen, *tokenFile, log); err != nil {
		log.Error("webhook-hook", "err", err)
		os.Exit(1)
	}
}

func run(listen, tokenFile string, log *slog.Logger) error {
	if tokenFile == "" {
		return errors.New("-token-file is required: the webhook answers only callers with its token")
	}
	b, err := os.ReadFile(tokenFile)
	if err != nil {
		return err
	}
	token := strings.TrimSpace(string(b))
	if len(token) < 16 {
		return errors.New("the token must be at least 16 characters")
	}
	srv := &http.Server{Addr: listen, Handler: handler(token, log),
		ReadHeaderTimeout: 5 * time.Second, ReadTimeout: 30 * time.Second, WriteTimeout: 30 * time.Second, IdleTimeout: time.Minute}
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	defer stop()
	errc := make(chan error, 1)
	go func() { errc <- srv.ListenAndServe() }()
	log.Info("webhook-hook listening", "addr", listen)
	select {
	case err := <-errc:
		return err
	case <-ctx.Done():
	}
	sctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	return srv.Shutdown(sctx)
}
