package mcp

import (
	"cmp"
	"errors"
	"fmt"
	"net/url"
	"regexp"
	"slices"
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
//	      sessions: per_session
//	      max_sessions: 64
//	      session_idle: 10m
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
	// (re)connecting before it fails TRANSIENT with no side effects, and
	// how long a call waits for room among a server's caller sessions
	// (ServerConfig.MaxSessions) before it is refused OVERLOADED.
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
	// Sessions says which calls share an upstream MCP session (see the
	// package doc, Upstream sessions): "shared" (every call of every
	// tenant on one session), "per_tenant" (one session per tenant) or
	// "per_session" (one per caller session, tenant and session id; calls
	// without a session share their tenant's). Default "per_tenant": a
	// stateful server's state never crosses tenants, at the cost of one
	// upstream connection (for stdio: one process) per active tenant.
	Sessions SessionMode `json:"sessions,omitempty"`
	// MaxSessions caps the upstream sessions (for stdio: processes) the
	// server gets for callers when Sessions is not "shared", besides the
	// one that discovers its tools; sessions still closing count. When it
	// is reached, the least recently used idle session is closed for a
	// new one (the caller's tenant's own first); when none is idle, the
	// call waits up to Config.SessionWait for one and is then refused
	// OVERLOADED (retryable, no side effects). Default 16 for HTTP
	// servers, 4 for stdio servers; at most 1024. Ignored under "shared".
	// The cap is per worker process.
	MaxSessions int `json:"max_sessions,omitempty"`
	// MaxSessionsPerTenant caps the sessions of one tenant under
	// "per_session" (closing ones count), so one tenant cannot hold all
	// MaxSessions. Default max(1, MaxSessions/4); at most MaxSessions.
	// Ignored under the other modes (per_tenant gives a tenant one).
	MaxSessionsPerTenant int `json:"max_sessions_per_tenant,omitempty"`
	// SessionIdle closes a caller session that had no call for this long
	// (its server-side state is lost with it). Default 5m. Ignored under
	// "shared".
	SessionIdle Duration `json:"session_idle,omitempty"`
}

// SessionMode says which calls share an upstream MCP session.
type SessionMode string

// The session modes of ServerConfig.Sessions.
const (
	// SessionsShared: one session for every call of every tenant (the
	// behaviour before per-tenant sessions). Only for stateless servers.
	SessionsShared SessionMode = "shared"
	// SessionsPerTenant: one session per tenant (the default).
	SessionsPerTenant SessionMode = "per_tenant"
	// SessionsPerSession: one session per caller session (tenant and
	// session id); a call without a session id uses its tenant's.
	SessionsPerSession SessionMode = "per_session"
)

// maxMaxSessions bounds ServerConfig.MaxSessions.
const maxMaxSessions = 1024

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
	c.Servers = slices.Clone(c.Servers)
	for i := range c.Servers {
		c.Servers[i] = c.Servers[i].WithDefaults()
	}
	return c
}

// WithDefaults returns a copy of s with zero session fields set to their
// defaults.
func (s ServerConfig) WithDefaults() ServerConfig {
	s.Sessions = cmp.Or(s.Sessions, SessionsPerTenant)
	if s.Stdio != nil {
		s.MaxSessions = cmp.Or(s.MaxSessions, 4)
	}
	s.MaxSessions = cmp.Or(s.MaxSessions, 16)
	s.MaxSessionsPerTenant = cmp.Or(s.MaxSessionsPerTenant, max(1, s.MaxSessions/4))
	s.SessionIdle = cmp.Or(s.SessionIdle, Duration(5*time.Minute))
	return s
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
		errs = append(errs, s.validateSessions(field)...)
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

// validateSessions returns the problems of the session fields of s.
func (s ServerConfig) validateSessions(field string) []error {
	var errs []error
	switch s.Sessions {
	case "", SessionsShared, SessionsPerTenant, SessionsPerSession:
	default:
		errs = append(errs, fmt.Errorf("%s.sessions: %q is not one of shared, per_tenant, per_session", field, s.Sessions))
	}
	if s.MaxSessions < 0 || s.MaxSessions > maxMaxSessions {
		errs = append(errs, fmt.Errorf("%s.max_sessions: must be between 0 (default) and %d", field, maxMaxSessions))
	}
	if s.MaxSessionsPerTenant < 0 || s.MaxSessionsPerTenant > maxMaxSessions || (s.MaxSessions > 0 && s.MaxSessionsPerTenant > s.MaxSessions) {
		errs = append(errs, fmt.Errorf("%s.max_sessions_per_tenant: must be between 0 (default) and max_sessions", field))
	}
	if s.SessionIdle < 0 {
		errs = append(errs, fmt.Errorf("%s.session_idle: must not be negative", field))
	}
	return errs
}

// secretRef is an "env:NAME" or "file:/path" reference (settings).
type secretRef string

func parseSecretRef(ref string) (secretRef, error) {
	return secretRef(ref), configvalue.CheckSecretRef(ref)
}

// resolve returns the secret's value. Errors name the reference, never
// the value.
func (r secretRef) resolve() (string, error) { return configvalue.ResolveSecret(string(r)) }
