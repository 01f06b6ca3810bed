package dispatchd

import (
	"errors"
	"fmt"
	"log/slog"
	"net"
	"strings"

	"github.com/toolwire/toolwire/internal/bus"
	"github.com/toolwire/toolwire/internal/configvalue"
)

// listenerUsers returns the users of the embedded server's client
// listener: none without one; otherwise the managed credentials under
// <dir>/credentials, made on the first start with a listener and reused
// after (bus.EnsureCredentials), one per role and one per pool of
// rc.PoolsCredentials (bus.PoolRole), with the permissions of their roles
// for this installation's prefix. The files of pools no longer listed are
// removed (bus.RemoveStalePoolCredentials), and logged. It logs where the credentials are (never
// the secrets), and warns when the listener is not on loopback: the
// credentials guard it, but NATS traffic is not encrypted.
func listenerUsers(rc RunConfig, dir string, log *slog.Logger) ([]bus.User, error) {
	if rc.NATSListen == "" {
		if len(rc.PoolsCredentials) > 0 {
			return nil, errors.New("dispatch: --pools-credentials makes users of the embedded server's client listener: it needs --nats-listen (an external cluster has its own users: the Helm chart's pools[], or nsc)")
		}
		return nil, nil
	}
	host, _, err := net.SplitHostPort(rc.NATSListen)
	if err != nil {
		return nil, fmt.Errorf("dispatch: --nats-listen %q: %w", rc.NATSListen, err)
	}
	creds, created, err := bus.EnsureCredentials(bus.CredentialsDir(dir), rc.PoolsCredentials...)
	if err != nil {
		return nil, err
	}
	users, err := creds.Users(rc.Bus)
	if err != nil {
		return nil, err
	}
	removed, err := bus.RemoveStalePoolCredentials(creds.Dir, rc.PoolsCredentials)
	if len(removed) > 0 {
		log.Info("removed the credentials of pools no longer in --pools-credentials: their local workers use the worker credential",
			"roles", strings.Join(removed, ","), "dir", creds.Dir)
	}
	if err != nil {
		return nil, err
	}
	attrs := []any{"listen", rc.NATSListen}
	for _, role := range creds.Roles() {
		attrs = append(attrs, role+"_credentials", bus.CredentialsFile(creds.Dir, role))
	}
	if len(created) > 0 {
		attrs = append(attrs, "created", strings.Join(created, ","))
	}
	log.Info("NATS client listener requires credentials: workers use --nats-creds <worker file>, toolctl finds the operator file under the data directory", attrs...)
	if !bus.IsLoopbackHost(host) {
		log.Warn("NATS client listener is not on loopback: clients need credentials, but NATS traffic (calls, arguments, results) is not encrypted; use it on a trusted network only", "listen", rc.NATSListen)
	}
	return users, nil
}

// encryptionKey resolves rc.NATSEncryptionKey; errors name the reference,
// never the key.
func encryptionKey(rc RunConfig) (string, error) {
	if rc.NATSEncryptionKey == "" {
		return "", nil
	}
	if rc.NATSURL != "" {
		return "", errors.New("dispatch: an encryption key applies to the embedded server only; encrypt an external cluster with its jetstream { key } setting")
	}
	key, err := configvalue.ResolveSecret(rc.NATSEncryptionKey)
	if err != nil {
		return "", fmt.Errorf("dispatch: NATS encryption key: %w", err)
	}
	return key, nil
}
