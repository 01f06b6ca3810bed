package bus

import (
	"cmp"
	"context"
	"errors"
	"fmt"
	"log/slog"
	"net"
	"net/url"
	"strconv"
	"time"

	"github.com/nats-io/nats-server/v2/server"
	"github.com/nats-io/nats.go"
	"github.com/nats-io/nkeys"
)

// EmbeddedConfig configures the in-process NATS server.
type EmbeddedConfig struct {
	// StoreDir holds JetStream's data. Required: never empty, so data never
	// lands in a temporary directory by accident.
	StoreDir string
	// ServerName; default "toolwire-embedded".
	ServerName string
	// MaxMemory for memory-backed streams. Default 256 MiB.
	MaxMemory int64
	// MaxStore for file-backed streams. Default 16 GiB.
	MaxStore int64
	// SyncInterval between fsyncs of the store. Default 1s. The server's own
	// default of 2m can lose acknowledged writes on power loss.
	SyncInterval time.Duration
	// SyncAlways fsyncs every write: no loss window, lower throughput.
	SyncAlways bool
	// ListenAddr, if set (host:port, port 0 = random), opens a client
	// listener so the nats CLI and external workers can connect. Empty =
	// in-process connections only. A listener needs Users: it never
	// accepts a client without credentials, on loopback or not.
	ListenAddr string
	// Users may connect through the client listener, each with a password
	// or an nkey and its permissions. Required with ListenAddr. In-process
	// connections (Connect) never need them: they authenticate as an
	// internal user with every permission, which can connect in process
	// only.
	Users []User
	// MonitorAddr, if set, serves the NATS monitoring endpoints there.
	MonitorAddr string
	// Logger receives the server's log lines; nil = discard.
	Logger *slog.Logger
	// EncryptionKey, if set, encrypts the JetStream store at rest with a
	// key derived from it (nats-server's JetStreamKey): calls, with their
	// arguments, results, events, dead letters. At least
	// MinEncryptionKeyBytes; keep it outside the data directory. A store
	// written in clear is encrypted when the server starts with a key; a
	// store whose key is lost cannot be read. Empty = not encrypted.
	EncryptionKey string
	// EncryptionCipher is "chacha" (ChaCha20-Poly1305, the default) or
	// "aes" (AES-GCM); only with EncryptionKey.
	EncryptionCipher string
}

// User is a NATS user of the embedded server's client listener.
type User struct {
	// Name identifies the user: its user name with Password, a label in
	// errors with NKey.
	Name string
	// NKey is the user's public nkey ("U..."): the client signs the
	// server's nonce with the seed, which never crosses the wire. Set NKey
	// or Password, not both.
	NKey string
	// Password of user Name.
	Password string
	// Permissions of the user; nil = every subject (an administrator).
	Permissions *Permissions
}

// Embedded is a running in-process NATS server with JetStream.
type Embedded struct {
	Server *server.Server
	// internalKey authenticates in-process connections: an nkey made
	// at start, kept in memory only, whose user can connect in process
	// only. An nkey rather than a random password: the server warns of
	// any plaintext password ("Plaintext passwords detected"), the first
	// line a newcomer read on every start, and bcrypt would cost every
	// in-process connection a hash.
	internalKey nkeys.KeyPair
}

// internalUserName is the name no other user may take: it was the
// in-process user's, now an nkey (Embedded.internalKey).
const internalUserName = "toolwire-in-process"

// internalPub is the public key of internalKey.
func (e *Embedded) internalPub() string {
	pub, _ := e.internalKey.PublicKey() // a key made by CreateUser has one
	return pub
}

// StartEmbedded starts the server and waits until it accepts connections.
// It returns an error, before starting anything, for a ListenAddr without
// Users (whatever the address) and for a user without a name or
// credentials, or with both an nkey and a password.
func StartEmbedded(ctx context.Context, cfg EmbeddedConfig) (*Embedded, error) {
	if cfg.StoreDir == "" {
		return nil, errors.New("bus: embedded server: StoreDir is required")
	}
	opts := &server.Options{
		ServerName:         cmp.Or(cfg.ServerName, "toolwire-embedded"),
		JetStream:          true,
		StoreDir:           cfg.StoreDir,
		JetStreamMaxMemory: cmp.Or(cfg.MaxMemory, 256<<20),
		JetStreamMaxStore:  cmp.Or(cfg.MaxStore, 16<<30),
		SyncInterval:       cmp.Or(cfg.SyncInterval, time.Second),
		SyncAlways:         cfg.SyncAlways,
		NoSigs:             true,
		NoLog:              cfg.Logger == nil,
		MaxPayload:         8 << 20,
	}
	if err := applyEncryption(opts, cfg); err != nil {
		return nil, err
	}
	if cfg.ListenAddr == "" {
		opts.DontListen = true
	} else {
		host, port, err := splitHostPort(cfg.ListenAddr)
		if err != nil {
			return nil, fmt.Errorf("bus: ListenAddr: %w", err)
		}
		if len(cfg.Users) == 0 {
			where := "a loopback"
			if !IsLoopbackHost(host) {
				where = "a non-loopback"
			}
			return nil, fmt.Errorf("bus: embedded server: %s client listener (%s) needs credentials (Users): it never accepts unauthenticated clients", where, cfg.ListenAddr)
		}
		opts.Host, opts.Port = host, port
		if port == 0 {
			opts.Port = server.RANDOM_PORT
		}
	}
	if cfg.MonitorAddr != "" {
		host, port, err := splitHostPort(cfg.MonitorAddr)
		if err != nil {
			return nil, fmt.Errorf("bus: MonitorAddr: %w", err)
		}
		opts.HTTPHost, opts.HTTPPort = host, port
		if port == 0 {
			opts.HTTPPort = server.RANDOM_PORT
		}
	}
	internalKey, err := nkeys.CreateUser()
	if err != nil {
		return nil, fmt.Errorf("bus: in-process key: %w", err)
	}
	internalPub, err := internalKey.PublicKey()
	if err != nil {
		return nil, fmt.Errorf("bus: in-process key: %w", err)
	}
	if err := authorize(opts, cfg.Users, internalPub); err != nil {
		return nil, err
	}
	s, err := server.NewServer(opts)
	if err != nil {
		return nil, fmt.Errorf("bus: embedded server: %w", err)
	}
	if cfg.Logger != nil {
		s.SetLoggerV2(slogAdapter{cfg.Logger}, false, false, false)
	}
	s.Start()
	deadline := 30 * time.Second
	if d, ok := ctx.Deadline(); ok {
		deadline = time.Until(d)
	}
	if !s.ReadyForConnections(deadline) {
		s.Shutdown()
		return nil, errors.New("bus: embedded server not ready in time")
	}
	return &Embedded{Server: s, internalKey: internalKey}, nil
}

// ClientURL is the loopback client URL, or "" without a listener.
func (e *Embedded) ClientURL() string {
	if e.Server.Addr() == nil {
		return ""
	}
	return e.Server.ClientURL()
}

// ClientURLWithPassword is ClientURL carrying user and password (a
// password user of Users), for clients that take only a URL; "" without a
// listener. Never log it.
func (e *Embedded) ClientURLWithPassword(user, password string) string {
	u, err := url.Parse(e.ClientURL())
	if err != nil || u.Host == "" {
		return ""
	}
	u.User = url.UserPassword(user, password)
	return u.String()
}

// MonitorURL is the monitoring URL, or "" without one.
func (e *Embedded) MonitorURL() string {
	if a := e.Server.MonitorAddr(); a != nil {
		return "http://" + a.String()
	}
	return ""
}

// Connect opens an in-process client connection with every permission.
func (e *Embedded) Connect(name string, opts ...nats.Option) (*nats.Conn, error) {
	opts = append([]nats.Option{nats.InProcessServer(e.Server), nats.Name(name), nats.MaxReconnects(-1),
		nats.Nkey(e.internalPub(), e.internalKey.Sign)}, opts...)
	nc, err := nats.Connect("", opts...)
	if err != nil {
		return nil, fmt.Errorf("bus: in-process connect: %w", err)
	}
	return nc, nil
}

// Shutdown stops the server and waits until it has stopped.
func (e *Embedded) Shutdown() {
	e.Server.Shutdown()
	e.Server.WaitForShutdown()
}

func splitHostPort(addr string) (string, int, error) {
	host, p, err := net.SplitHostPort(addr)
	if err != nil {
		return "", 0, err
	}
	port, err := strconv.Atoi(p)
	if err != nil || port < 0 || port > 65535 {
		return "", 0, fmt.Errorf("bad port %q", p)
	}
	return host, port, nil
}

type slogAdapter struct{ l *slog.Logger }

func (a slogAdapter) Noticef(format string, v ...any) { a.l.Debug(fmt.Sprintf(format, v...)) }
func (a slogAdapter) Warnf(format string, v ...any)   { a.l.Warn(fmt.Sprintf(format, v...)) }
func (a slogAdapter) Fatalf(format string, v ...any)  { a.l.Error(fmt.Sprintf(format, v...)) }
func (a slogAdapter) Errorf(format string, v ...any)  { a.l.Error(fmt.Sprintf(format, v...)) }
func (a slogAdapter) Debugf(format string, v ...any)  { a.l.Debug(fmt.Sprintf(format, v...)) }
func (a slogAdapter) Tracef(format string, v ...any)  { a.l.Debug(fmt.Sprintf(format, v...)) }
