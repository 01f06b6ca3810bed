package mcpserver

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"log/slog"
	"net"
	"net/http"
	"net/url"
	"slices"
	"strings"
	"sync"

	"github.com/modelcontextprotocol/go-sdk/mcp"

	"github.com/toolwire/toolwire/internal/identity"
)

// Path is where the endpoint is served on the dispatcher's API port.
const Path = "/mcp"

// MetadataPath serves the endpoint's OAuth protected resource metadata
// (RFC 9728: the well-known prefix, then the resource's path).
const MetadataPath = "/.well-known/oauth-protected-resource" + Path

// ProtocolVersions are the MCP revisions served, newest first.
var ProtocolVersions = []string{"2026-07-28", "2025-11-25", "2025-06-18"}

// Extra adds an embedding program's own prompts, resources, resource
// templates and completions to the endpoint. They are served by this
// process, not the fleet: every replica must add the same ones, or a
// client would see them come and go between requests; and they are fixed
// (the prompts and resources capabilities are declared without
// listChanged), as a change on one replica could not reach a client
// listening on another. Tools added here are
// never served: tools/list and tools/call are the fleet's.
type Extra struct {
	// Setup adds prompts, resources and resource templates.
	Setup func(*mcp.Server)
	// Complete answers completion/complete; nil = no completions.
	Complete func(context.Context, *mcp.CompleteRequest) (*mcp.CompleteResult, error)
}

// Server is the MCP face of one dispatcher (doc.go).
type Server struct {
	d    Core
	auth identity.Authenticator
	cfg  Config
	log  *slog.Logger
	sdk  *mcp.Server
	h    http.Handler

	// tools caches each spec version's MCP form.
	mu    sync.Mutex
	tools map[string]cachedTool // tools.go (tool)

	// inflight is the tools/call requests served here, for
	// notifications/cancelled (cancelled.go); stopCancels ends the
	// listening to the other replicas' notices.
	inflight    inflight
	stopCancels func()
	closeOnce   sync.Once
}

// New returns the MCP server of the dispatcher d, authenticating callers
// with auth, configured by cfg (WithDefaults, then Validate: an invalid
// cfg is refused, naming the field; MaxRequestBytes 0 is d's).
func New(d Core, auth identity.Authenticator, cfg Config) (*Server, error) {
	if d == nil || auth == nil {
		return nil, errors.New("mcpserver: New needs a dispatcher and an authenticator")
	}
	cfg = cfg.WithDefaults()
	if err := cfg.Validate(); err != nil {
		return nil, err
	}
	if cfg.MaxRequestBytes == 0 {
		cfg.MaxRequestBytes = d.Config().MaxRequestBytes
	}
	s := &Server{d: d, auth: auth, cfg: cfg, log: cfg.Logger, tools: map[string]cachedTool{}}
	// Resources: the whole outputs of cut results (output.go), read with
	// resources/read; none is listed.
	opts := &mcp.ServerOptions{Capabilities: &mcp.ServerCapabilities{Tools: &mcp.ToolCapabilities{ListChanged: true},
		Resources: &mcp.ResourceCapabilities{}},
		Logger: cfg.Logger, SupportedProtocolVersions: ProtocolVersions,
		Instructions: "Every tool of this toolwire installation that your credentials may use. Calls are validated, " +
			"governed by policy (some may wait for a person's approval), limited, retried and audited."}
	if cfg.Extra != nil {
		// The Extra is the same fixed set on every replica: no list ever
		// changes, and a change made on one replica could not reach a
		// client listening on another.
		opts.Capabilities.Prompts = &mcp.PromptCapabilities{}
		opts.Capabilities.Resources = &mcp.ResourceCapabilities{}
		opts.CompletionHandler = cfg.Extra.Complete
	}
	if cfg.Tasks != nil {
		opts.Capabilities.AddExtension(tasksExtension, map[string]any{})
	}
	// Skills (skills.go): declared always, since a worker may announce
	// skills at any time; with none, skills/list is empty. It needs the
	// resources capability, declared above. Skill directories are read
	// from the manifests (resources/directory/read).
	opts.Capabilities.AddExtension(skillsExtension, map[string]any{"directoryRead": true})
	s.sdk = mcp.NewServer(&mcp.Implementation{Name: "toolwire", Title: "toolwire", Version: cfg.Version}, opts)
	addTaskMethods(s.sdk)
	addSkillMethods(s.sdk)
	if cfg.Extra != nil && cfg.Extra.Setup != nil {
		cfg.Extra.Setup(s.sdk)
	}
	s.sdk.AddReceivingMiddleware(s.receive)
	d.OnToolsChanged(s.toolsChanged)
	h := mcp.NewStreamableHTTPHandler(func(*http.Request) *mcp.Server { return s.sdk }, &mcp.StreamableHTTPOptions{
		Stateless: true, Logger: cfg.Logger, MaxRequestBodyBytes: cfg.MaxRequestBytes,
		// A client that goes away (closes the stream) ends the call's
		// context, which cancels the call (tools.go).
		PropagateRequestCancellation: true,
	})
	s.h = s.checkOrigin(s.authenticate(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		r, done := s.track(r)
		defer done()
		if !s.scoped(w, r) && !s.taskHeaders(w, r) && !s.fast(w, r) {
			h.ServeHTTP(w, r)
		}
	})))
	stop, err := s.listenCancels()
	if err != nil {
		return nil, err
	}
	s.stopCancels = stop
	return s, nil
}

// Close stops listening for the other replicas' notifications/cancelled
// (Config.Bus); requests already served go on. Close is idempotent.
func (s *Server) Close() {
	s.closeOnce.Do(s.stopCancels)
}

// Handler serves the endpoint (Path) and its protected resource metadata
// (MetadataPath) on mux.
func (s *Server) Handle(mux *http.ServeMux) {
	mux.Handle(Path, s.h)
	mux.Handle(MetadataPath, http.HandlerFunc(s.metadata))
}

// authenticate identifies the caller by the dispatcher's API keys, sent as
// a bearer token. An unknown or missing key is answered 401 with a
// WWW-Authenticate challenge naming the protected resource metadata.
func (s *Server) authenticate(h http.Handler) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		id, err := s.auth.Authenticate(r)
		if err == nil && !identity.TenantRe.MatchString(id.Tenant) {
			err = identity.ErrUnauthenticated
		}
		if err != nil {
			w.Header().Set("WWW-Authenticate", `Bearer resource_metadata="`+s.metadataURL(r)+`"`)
			http.Error(w, "missing or unknown API key: send it as Authorization: Bearer <key>", http.StatusUnauthorized)
			return
		}
		// The client's token is the caller's credential here and nowhere
		// else: no tool, worker or MCP server behind the fleet sees it.
		ctx := identity.With(r.Context(), id)
		// The SDK gives a request of a revision before 2026-07-28 a
		// context that never ends: the HTTP request's own is kept to
		// cancel a call whose client went away (tools.go).
		ctx = context.WithValue(ctx, httpRequestKey{}, r.Context())
		h.ServeHTTP(w, r.WithContext(ctx))
	})
}

// httpRequestKey keys the HTTP request's context in a call's context.
type httpRequestKey struct{}

// checkOrigin refuses a request whose Origin header names neither the
// endpoint's own origin nor an allowed one. Without API keys (open
// access: anyone who reaches the port is the default caller) it also
// refuses a Host that is not an IP address, localhost or an allowed
// origin's host: a page whose name was rebound to the dispatcher's
// address (DNS rebinding) sends its own name as both Host and Origin.
func (s *Server) checkOrigin(h http.Handler) http.Handler {
	_, open := s.auth.(identity.OpenAccess)
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if o := r.Header.Get("Origin"); o != "" && !s.originAllowed(o, r) {
			http.Error(w, "origin not allowed", http.StatusForbidden)
			return
		}
		if open && !s.hostAllowed(r.Host) {
			http.Error(w, "host not allowed: without API keys the endpoint answers only to an IP address, localhost or an allowed origin's host", http.StatusForbidden)
			return
		}
		h.ServeHTTP(w, r)
	})
}

func (s *Server) hostAllowed(hostport string) bool {
	host := hostport
	if h, _, err := net.SplitHostPort(hostport); err == nil {
		host = h
	}
	host = strings.TrimSuffix(strings.TrimPrefix(host, "["), "]")
	if net.ParseIP(host) != nil || strings.EqualFold(host, "localhost") {
		return true
	}
	for _, o := range s.cfg.AllowedOrigins {
		if u, err := url.Parse(o); err == nil && strings.EqualFold(u.Host, hostport) {
			return true
		}
	}
	return false
}

func (s *Server) originAllowed(origin string, r *http.Request) bool {
	if slices.Contains(s.cfg.AllowedOrigins, origin) {
		return true
	}
	u, err := url.Parse(origin)
	return err == nil && u.Host != "" && strings.EqualFold(u.Host, r.Host)
}

// metadataURL is the URL of the endpoint's protected resource metadata.
func (s *Server) metadataURL(r *http.Request) string { return s.baseURL(r) + MetadataPath }

// baseURL is the endpoint's origin: Config.PublicURL, else as the request
// reached it.
func (s *Server) baseURL(r *http.Request) string {
	if s.cfg.PublicURL != "" {
		return strings.TrimSuffix(s.cfg.PublicURL, "/")
	}
	scheme := "http"
	if r.TLS != nil {
		scheme = "https"
	}
	return scheme + "://" + r.Host
}

// scoped answers 403, naming the scopes, a tools/call of a tool whose
// scopes the caller's key lacks, when the request names the tool in its
// Mcp-Name header (2026-07-28; other requests get the refusal as the
// call's isError result). It reports whether it answered.
func (s *Server) scoped(w http.ResponseWriter, r *http.Request) bool {
	name := r.Header.Get("Mcp-Name")
	if r.Method != http.MethodPost || r.Header.Get("Mcp-Method") != "tools/call" || name == "" {
		return false
	}
	id, err := callerOf(r.Context())
	if err != nil {
		return false
	}
	missing := s.d.MissingScopes(id, name)
	if len(missing) == 0 {
		return false
	}
	w.Header().Set("WWW-Authenticate", fmt.Sprintf(`Bearer error="insufficient_scope", scope=%q, resource_metadata=%q`,
		strings.Join(missing, " "), s.metadataURL(r)))
	http.Error(w, fmt.Sprintf("tool %q needs the scopes %s, which this key lacks", name, strings.Join(missing, ", ")), http.StatusForbidden)
	return true
}

// callerOf is the caller of a request the endpoint authenticated.
func callerOf(ctx context.Context) (identity.Identity, error) {
	id, ok := identity.From(ctx)
	if !ok {
		return identity.Identity{}, errUnauthenticated
	}
	return id, nil
}

var errUnauthenticated = errors.New("mcpserver: the request carries no authenticated caller")

// metadata serves the endpoint's OAuth protected resource metadata (RFC
// 9728): the resource and the bearer method. toolwire issues its API keys
// itself and names no authorization server.
func (s *Server) metadata(w http.ResponseWriter, r *http.Request) {
	if r.Method != http.MethodGet && r.Method != http.MethodHead {
		w.Header().Set("Allow", "GET, HEAD")
		http.Error(w, "method not allowed", http.StatusMethodNotAllowed)
		return
	}
	w.Header().Set("Content-Type", "application/json")
	_ = json.NewEncoder(w).Encode(map[string]any{
		"resource":                 s.baseURL(r) + Path,
		"bearer_methods_supported": []string{"header"},
		"resource_name":            "toolwire",
		"scopes_supported":         []string{},
	})
}

// listChangedMarker is a tool the SDK holds only for an instant, to send
// notifications/tools/list_changed (toolsChanged).
var listChangedMarker = &mcp.Tool{Name: "toolwire-list-changed", InputSchema: map[string]any{"type": "object"}}

// toolsChanged tells the clients listening for it that the tool list
// changed: the registry's tools did. The SDK sends the notification when
// its own tool set changes (debounced), and the fleet's tools are not its
// own: a marker tool is added and removed. tools/list and tools/call
// never reach the SDK's tools (receive), so the marker is never listed
// or called.
func (s *Server) toolsChanged() {
	s.sdk.AddTool(listChangedMarker, func(context.Context, *mcp.CallToolRequest) (*mcp.CallToolResult, error) {
		return nil, errors.New("mcpserver: the list-changed marker is not a tool")
	})
	s.sdk.RemoveTools(listChangedMarker.Name)
}
