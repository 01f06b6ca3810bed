package mcp

import (
	"cmp"
	"errors"
	"fmt"
	"net/url"
	"regexp"
	"strings"
	"time"

	"github.com/toolwire/toolwire/internal/configvalue"
)

// Config declares the MCP servers a worker serves. It is embedded in the
// worker's YAML configuration (read with sigs.k8s.io/yaml, hence the JSON
// tags), for example:
//
//	mcp:
//	  servers:
//	    - name: files
//	      stdio:
//	        command: /usr/local/bin/files-mcp
//	        args: ["--root", "/srv/data"]
//	        env: [HOME, LANG]
//	        set_env: {LOG_LEVEL: warn}
//	    - name: search
//	      http:
//	        url: https://search.internal/mcp
//	        secret_headers: {Authorization: "env:SEARCH_TOKEN"}
type Config struct {
	// Servers to connect to; names must be unique. Default: none.
	Servers []ServerConfig `json:"servers"`
	// ConnectTimeout bounds one connection attempt to a server: start or
	// dial, initialize and list its tools. Default 30s.
	ConnectTimeout Duration `json:"connect_timeout,omitempty"`
	// StartupWait is how long New waits for every server's first
	// connection attempt before returning with the servers that answered
	// (the others keep retrying in the background). Default: ConnectTimeout.
	StartupWait Duration `json:"startup_wait,omitempty"`
	// SessionWait is how long a call waits for a server that is
	// (re)connecting before it fails TRANSIENT with no side effects.
	// Default 10s.
	SessionWait Duration `json:"session_wait,omitempty"`
	// MinBackoff and MaxBackoff bound the exponential, jittered delay
	// between reconnection attempts (and restarts of crashed stdio
	// servers). Defaults 200ms and 30s.
	MinBackoff Duration `json:"min_backoff,omitempty"`
	MaxBackoff Duration `json:"max_backoff,omitempty"`
	// TerminateDuration is how long closing a stdio server waits after
	// closing its stdin before sending SIGTERM, and again before SIGKILL;
	// the process group is killed afterwards in any case. Default 1s (the
	// SDK's default of 5s would hold every shutdown).
	TerminateDuration Duration `json:"terminate_duration,omitempty"`
}

// ServerConfig declares one MCP server. Exactly one of Stdio and HTTP is set.
type ServerConfig struct {
	// Name of the server: 1-32 letters, digits or '-', starting with a
	// letter or digit. It is the provider token of its tools' subjects and
	// the middle of their names, mcp__<name>__<tool>. Required.
	Name string `json:"name"`
	// Stdio runs the server as a child process speaking MCP over its
	// stdin and stdout.
	Stdio *StdioConfig `json:"stdio,omitempty"`
	// HTTP connects to a streamable HTTP server.
	HTTP *HTTPConfig `json:"http,omitempty"`
	// Required makes New fail when the server's first connection attempt
	// fails; otherwise the failure is logged and retried in the
	// background. Default false.
	Required bool `json:"required,omitempty"`
}

// StdioConfig starts a server process. The process gets its own process
// group, which is killed when the server is closed or restarted.
type StdioConfig struct {
	// Command is the program to run, looked up in the worker's PATH.
	// Required. It is run directly, never through a shell.
	Command string `json:"command"`
	// Args are its arguments, each one argv element. Default none.
	Args []string `json:"args,omitempty"`
	// Env names the variables passed through from the worker's
	// environment (those unset in the worker are left out). Nothing else
	// of the worker's environment reaches the server, not even PATH.
	// Default none.
	Env []string `json:"env,omitempty"`
	// SetEnv are fixed variables set for the server; they win over Env.
	// Default none.
	SetEnv map[string]string `json:"set_env,omitempty"`
	// Dir is the working directory. Default: the worker's.
	Dir string `json:"dir,omitempty"`
}

// HTTPConfig connects to a streamable HTTP MCP server.
type HTTPConfig struct {
	// URL of the server's MCP endpoint (http or https). Required.
	URL string `json:"url"`
	// Headers are sent with every request, as is. Put no secrets here:
	// they may appear in configuration dumps. Default none.
	Headers map[string]string `json:"headers,omitempty"`
	// SecretHeaders maps a header name to a secret reference, "env:NAME"
	// (a variable of the worker's environment) or "file:/path" (the file's
	// content, trailing newline removed), resolved at every connection.
	// Their values are never logged. Default none.
	SecretHeaders map[string]string `json:"secret_headers,omitempty"`
}

// Duration is a time.Duration written as a Go duration string ("1.5s") in
// JSON and YAML.
// Duration is a time.Duration written as a Go duration string ("30s") in
// JSON and YAML; see configvalue.Duration.
type Duration = configvalue.Duration

// WithDefaults returns a copy of c with zero fields set to their defaults.
func (c Config) WithDefaults() Config {
	c.ConnectTimeout = cmp.Or(c.ConnectTimeout, Duration(30*time.Second))
	c.StartupWait = cmp.Or(c.StartupWait, c.ConnectTimeout)
	c.SessionWait = cmp.Or(c.SessionWait, Duration(10*time.Second))
	c.MinBackoff = cmp.Or(c.MinBackoff, Duration(200*time.Millisecond))
	c.MaxBackoff = cmp.Or(c.MaxBackoff, Duration(30*time.Second))
	c.TerminateDuration = cmp.Or(c.TerminateDuration, Duration(time.Second))
	return c
}

// serverNameRe is the rule of server names: a subject token and a name
// part without "__", so a tool name splits back unambiguously.
var serverNameRe = regexp.MustCompile(`^[a-zA-Z0-9][a-zA-Z0-9-]{0,31}$`)

// Validate returns every problem of c, each naming its field.
func (c Config) Validate() error {
	var errs []error
	for name, d := range map[string]Duration{
		"connect_timeout": c.ConnectTimeout, "startup_wait": c.StartupWait, "session_wait": c.SessionWait,
		"min_backoff": c.MinBackoff, "max_backoff": c.MaxBackoff, "terminate_duration": c.TerminateDuration,
	} {
		if d < 0 {
			errs = append(errs, fmt.Errorf("mcp.%s: must not be negative", name))
		}
	}
	if c.MaxBackoff > 0 && c.MinBackoff > c.MaxBackoff {
		errs = append(errs, errors.New("mcp.min_backoff: must not exceed max_backoff"))
	}
	seen := map[string]bool{}
	for i, s := range c.Servers {
		field := fmt.Sprintf("mcp.servers[%d]", i)
		if !serverNameRe.MatchString(s.Name) {
			errs = append(errs, fmt.Errorf("%s.name: %q must match %s", field, s.Name, serverNameRe))
		} else if seen[s.Name] {
			errs = append(errs, fmt.Errorf("%s.name: duplicate server %q", field, s.Name))
		}
		seen[s.Name] = true
		switch {
		case (s.Stdio == nil) == (s.HTTP == nil):
			errs = append(errs, fmt.Errorf("%s: set exactly one of stdio and http", field))
		case s.Stdio != nil:
			if s.Stdio.Command == "" {
				errs = append(errs, fmt.Errorf("%s.stdio.command: required", field))
			}
			for _, n := range s.Stdio.Env {
				if n == "" || strings.ContainsAny(n, "=\x00") {
					errs = append(errs, fmt.Errorf("%s.stdio.env: %q is not a variable name", field, n))
				}
			}
			for n := range s.Stdio.SetEnv {
				if n == "" || strings.ContainsAny(n, "=\x00") {
					errs = append(errs, fmt.Errorf("%s.stdio.set_env: %q is not a variable name", field, n))
				}
			}
		case s.HTTP != nil:
			u, err := url.Parse(s.HTTP.URL)
			if err != nil || (u.Scheme != "http" && u.Scheme != "https") || u.Host == "" {
				errs = append(errs, fmt.Errorf("%s.http.url: %q is not an http(s) URL", field, s.HTTP.URL))
			}
			for h, ref := range s.HTTP.SecretHeaders {
				if _, err := parseSecretRef(ref); err != nil {
					errs = append(errs, fmt.Errorf("%s.http.secret_headers[%s]: %w", field, h, err))
				}
			}
		}
	}
	return errors.Join(errs...)
}

// secretRef is an "env:NAME" or "file:/path" reference (settings).
type secretRef string

func parseSecretRef(ref string) (secretRef, error) {
	return secretRef(ref), configvalue.CheckSecretRef(ref)
}

// resolve returns the secret's value. Errors name the reference, never
// the value.
func (r secretRef) resolve() (string, error) { return configvalue.ResolveSecret(string(r)) }
