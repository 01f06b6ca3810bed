package bus

import (
	"bytes"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"net"
	"net/url"
	"os"
	"path/filepath"
	"slices"
	"strings"

	"github.com/nats-io/nats.go"
	"github.com/nats-io/nkeys"
)

// CredentialsDir is where a dispatcher keeps the credentials of its
// embedded server's client listener, under its data directory.
func CredentialsDir(dataDir string) string { return filepath.Join(dataDir, "credentials") }

// CredentialsFile is the file holding role's nkey seed in dir:
// <dir>/<role>.nk. It is what --nats-creds takes, and what the nats CLI's
// --nkey takes.
func CredentialsFile(dir, role string) string { return filepath.Join(dir, role+".nk") }

// Credentials are the managed NATS users of an embedded server with a
// client listener: one nkey per role, whose seed is kept in a file that
// only the dispatcher's user can read.
type Credentials struct {
	// Dir holds the seed files.
	Dir   string
	roles []string          // Roles, then the pools' (PoolRole)
	keys  map[string]string // role → public nkey
}

// EnsureCredentials makes dir (mode 0700) hold an nkey seed file (mode
// 0600) for every role (Roles) and for the role of each of pools
// (PoolRole: <dir>/pool-<name>.nk), creating only those that are missing,
// so that credentials handed out once keep working across restarts.
// created lists the roles whose file was made now. A directory or file
// that group or others may read or write, or a file that does not hold a
// user seed, is an error naming it: it is never overwritten or
// re-permissioned. Pool names must pass ValidatePoolRoles. A pool's file
// left from an earlier start whose pool is no longer listed is not a
// user: it no longer connects.
func EnsureCredentials(dir string, pools ...string) (cr *Credentials, created []string, err error) {
	if err := ValidatePoolRoles(pools); err != nil {
		return nil, nil, err
	}
	if err := os.MkdirAll(dir, 0o700); err != nil {
		return nil, nil, fmt.Errorf("bus: credentials: %w", err)
	}
	if err := checkPrivate(dir); err != nil {
		return nil, nil, err
	}
	cr = &Credentials{Dir: dir, roles: Roles(), keys: map[string]string{}}
	for _, p := range pools {
		cr.roles = append(cr.roles, PoolRole(p))
	}
	for _, role := range cr.roles {
		path := CredentialsFile(dir, role)
		pub, err := readSeedFile(path)
		if errors.Is(err, fs.ErrNotExist) {
			if pub, err = writeSeedFile(path); err == nil {
				created = append(created, role)
			}
		}
		if err != nil {
			return nil, nil, err
		}
		cr.keys[role] = pub
	}
	return cr, created, nil
}

// RemoveStalePoolCredentials removes from dir the seed files of pools'
// roles (<dir>/pool-<name>.nk, PoolRole) whose pool is not among pools:
// those of pools dropped from --pools-credentials, which the server no
// longer accepts and which a local worker of the pool would otherwise
// pick before the worker role's (LocalCredentials), to be refused. Only
// regular files so named that hold an nkey seed (what EnsureCredentials
// makes) are removed, nothing else of dir. It returns the roles removed.
func RemoveStalePoolCredentials(dir string, pools []string) ([]string, error) {
	matches, err := filepath.Glob(filepath.Join(dir, poolRolePrefix+"*.nk"))
	if err != nil {
		return nil, fmt.Errorf("bus: credentials: %w", err)
	}
	var removed []string
	for _, path := range matches {
		role := strings.TrimSuffix(filepath.Base(path), ".nk")
		pool, ok := PoolOfRole(role)
		if !ok || slices.Contains(pools, pool) || CredentialsFile(dir, role) != path {
			continue
		}
		if fi, err := os.Lstat(path); err != nil || !fi.Mode().IsRegular() {
			continue
		}
		if _, err := readSeedFile(path); err != nil {
			continue // not a seed of ours
		}
		if err := os.Remove(path); err != nil {
			return removed, fmt.Errorf("bus: credentials: remove %s: %w", path, err)
		}
		removed = append(removed, role)
	}
	return removed, nil
}

// PublicKey is role's public nkey, or "".
func (cr *Credentials) PublicKey(role string) string { return cr.keys[role] }

// Roles lists the roles of cr: Roles, then the pools'.
func (cr *Credentials) Roles() []string { return slices.Clone(cr.roles) }

// Users returns one listener user per role of cr, with the role's
// permissions for the installation c.
func (cr *Credentials) Users(c Config) ([]User, error) {
	var users []User
	for _, role := range cr.roles {
		perms, err := RolePermissions(c, role)
		if err != nil {
			return nil, err
		}
		users = append(users, User{Name: role, NKey: cr.keys[role], Permissions: &perms})
	}
	return users, nil
}

// checkPrivate refuses a path that group or others may access.
func checkPrivate(path string) error {
	fi, err := os.Stat(path)
	if err != nil {
		return fmt.Errorf("bus: credentials: %w", err)
	}
	if fi.Mode().Perm()&0o077 != 0 {
		want := "600"
		if fi.IsDir() {
			want = "700"
		}
		return fmt.Errorf("bus: credentials: %s has mode %04o: group and others must have no access (chmod %s %s)",
			path, fi.Mode().Perm(), want, path)
	}
	return nil
}

// maxCredsFile bounds what is read of a credentials file.
const maxCredsFile = 64 << 10

func readCredsFile(path string) ([]byte, error) {
	f, err := os.Open(path)
	if err != nil {
		return nil, err
	}
	defer f.Close()
	b, err := io.ReadAll(io.LimitReader(f, maxCredsFile+1))
	if err != nil {
		return nil, fmt.Errorf("bus: credentials %s: %w", path, err)
	}
	if len(b) > maxCredsFile {
		return nil, fmt.Errorf("bus: credentials %s: larger than %d bytes", path, maxCredsFile)
	}
	return b, nil
}

// readSeedFile returns the public key of the user seed in path.
func readSeedFile(path string) (string, error) {
	b, err := readCredsFile(path)
	if err != nil {
		if errors.Is(err, fs.ErrNotExist) {
			return "", err
		}
		return "", fmt.Errorf("bus: credentials: %w", err)
	}
	defer wipe(b)
	if err := checkPrivate(path); err != nil {
		return "", err
	}
	kp, err := nkeys.ParseDecoratedNKey(b)
	if err != nil {
		return "", fmt.Errorf("bus: credentials %s: not an nkey seed", path) // never the content
	}
	defer kp.Wipe()
	pub, err := kp.PublicKey()
	if err != nil || !nkeys.IsValidPublicUserKey(pub) {
		return "", fmt.Errorf("bus: credentials %s: not a user nkey seed", path)
	}
	return pub, nil
}

// writeSeedFile creates path with a new user seed, mode 0600, and returns
// its public key. The seed is written to a temporary file first and
// linked into place, so path is either absent or complete, and an
// existing file is never replaced.
func writeSeedFile(path string) (string, error) {
	kp, err := nkeys.CreateUser()
	if err != nil {
		return "", fmt.Errorf("bus: credentials: %w", err)
	}
	defer kp.Wipe()
	seed, err := kp.Seed()
	if err != nil {
		return "", fmt.Errorf("bus: credentials: %w", err)
	}
	defer wipe(seed)
	pub, err := kp.PublicKey()
	if err != nil {
		return "", fmt.Errorf("bus: credentials: %w", err)
	}
	tmp, err := os.CreateTemp(filepath.Dir(path), ".seed-*")
	if err != nil {
		return "", fmt.Errorf("bus: credentials: %w", err)
	}
	defer os.Remove(tmp.Name())
	if err := tmp.Chmod(0o600); err != nil {
		tmp.Close()
		return "", fmt.Errorf("bus: credentials: %w", err)
	}
	_, err = tmp.Write(append(seed, '\n'))
	if err == nil {
		err = tmp.Sync()
	}
	if cerr := tmp.Close(); err == nil {
		err = cerr
	}
	if err == nil {
		err = os.Link(tmp.Name(), path)
	}
	if err != nil {
		return "", fmt.Errorf("bus: credentials %s: %w", path, err)
	}
	return pub, nil
}

func wipe(b []byte) {
	for i := range b {
		b[i] = 'x'
	}
}

// credsOption returns the connect option of a credentials file, whatever
// its kind: a NATS user credentials file (JWT and nkey seed, as nsc
// writes), an nkey seed file (as a dispatcher writes under its data
// directory, and the nats CLI's --nkey takes), or a user and password on
// one line ("user:password", as the Helm chart's bundled NATS hands out).
// Errors name the file, never its content.
func credsOption(path string) (nats.Option, error) {
	b, err := readCredsFile(path)
	if err != nil {
		if errors.Is(err, fs.ErrNotExist) || errors.Is(err, fs.ErrPermission) {
			return nil, fmt.Errorf("bus: credentials %s: %w", path, err)
		}
		return nil, err
	}
	defer wipe(b)
	text := bytes.TrimSpace(b)
	switch {
	case bytes.Contains(text, []byte("-----BEGIN NATS USER JWT-----")):
		return nats.UserCredentials(path), nil
	case bytes.HasPrefix(text, []byte("SU")) || bytes.Contains(text, []byte("-----BEGIN USER NKEY SEED-----")):
		opt, err := nats.NkeyOptionFromSeed(path)
		if err != nil {
			return nil, fmt.Errorf("bus: credentials %s: not a valid nkey user seed", path)
		}
		return opt, nil
	}
	user, password, ok := strings.Cut(string(text), ":")
	if !ok || user == "" || password == "" || strings.ContainsAny(user+password, "\r\n") {
		return nil, fmt.Errorf("bus: credentials %s: neither a NATS credentials file, an nkey seed nor one \"user:password\" line", path)
	}
	return nats.UserInfo(user, password), nil
}

// Kinds of credentials file (CredentialsKind).
const (
	CredsJWT      = "jwt"      // a NATS credentials file: a user JWT and its seed
	CredsNKey     = "nkey"     // an nkey user seed
	CredsPassword = "password" // one "user:password" line
)

// CredentialsKind says what the credentials file at path holds, as Dial
// reads it (CredsJWT, CredsNKey or CredsPassword), without returning any
// of it.
func CredentialsKind(path string) (string, error) {
	b, err := readCredsFile(path)
	if err != nil {
		return "", fmt.Errorf("bus: credentials %s: %w", path, err)
	}
	defer wipe(b)
	text := bytes.TrimSpace(b)
	switch {
	case bytes.Contains(text, []byte("-----BEGIN NATS USER JWT-----")):
		return CredsJWT, nil
	case bytes.HasPrefix(text, []byte("SU")) || bytes.Contains(text, []byte("-----BEGIN USER NKEY SEED-----")):
		return CredsNKey, nil
	}
	if user, password, ok := strings.Cut(string(text), ":"); ok && user != "" && password != "" && !strings.ContainsAny(user+password, "\r\n") {
		return CredsPassword, nil
	}
	return "", fmt.Errorf("bus: credentials %s: neither a NATS credentials file, an nkey seed nor one \"user:password\" line", path)
}

// LocalCredentials returns the credentials file of role that a dispatcher
// with data directory dataDir made for its embedded server ("" = the
// default, ./data), if every server of urls is on this machine (a
// loopback address or localhost), none carries credentials of its own
// (user info), and the file exists; otherwise "". It is how toolctl and
// the worker find their credentials without flags (a worker with --pool
// looks for its pool's role first, PoolRole, then the worker role's).
func LocalCredentials(dataDir, role, urls string) string {
	if urls == "" {
		return ""
	}
	for _, u := range strings.Split(urls, ",") {
		if !isLoopbackURL(strings.TrimSpace(u)) {
			return ""
		}
	}
	if dataDir == "" {
		dataDir = "data"
	}
	path := CredentialsFile(CredentialsDir(dataDir), role)
	if _, err := os.Stat(path); err != nil {
		return ""
	}
	return path
}

func isLoopbackURL(s string) bool {
	if !strings.Contains(s, "://") {
		s = "nats://" + s
	}
	u, err := url.Parse(s)
	if err != nil || u.User != nil {
		return false
	}
	return IsLoopbackHost(u.Hostname())
}

// IsLoopbackHost reports whether host is "localhost" or a loopback IP
// address.
func IsLoopbackHost(host string) bool {
	if strings.EqualFold(host, "localhost") {
		return true
	}
	ip := net.ParseIP(host)
	return ip != nil && ip.IsLoopback()
}

// SigningDir is where, under a data directory, the worker signing key of
// this machine lives (signing.LocalWorkerKey): toolworker makes it when
// it takes the dispatcher's local credentials, and that dispatcher
// enrols it for every pool. Only the installation's owner can write
// there (CredentialsDir is 0700).
func SigningDir(dataDir string) string { return filepath.Join(CredentialsDir(dataDir), "signing") }

// DispatcherKeyFile is a dispatcher's own signing key under its data
// directory: kept across restarts, so that one dispatcher has one key.
func DispatcherKeyFile(dataDir string) string {
	return filepath.Join(CredentialsDir(dataDir), "dispatcher-signing.nk")
}
