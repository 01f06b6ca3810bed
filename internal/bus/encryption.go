package bus

import (
	"fmt"

	"github.com/nats-io/nats-server/v2/server"
)

// MinEncryptionKeyBytes is the shortest key EmbeddedConfig.EncryptionKey
// accepts: the server derives its stream keys from it, so it must be hard
// to guess (32 random bytes, e.g. `openssl rand -base64 32`, is the
// advice).
const MinEncryptionKeyBytes = 16

// applyEncryption sets the server options that encrypt JetStream's store
// at rest (nats-server's JetStreamKey and JetStreamCipher) from cfg.
// Errors never show the key.
func applyEncryption(opts *server.Options, cfg EmbeddedConfig) error {
	if cfg.EncryptionKey == "" {
		if cfg.EncryptionCipher != "" {
			return fmt.Errorf("bus: EncryptionCipher %q without an EncryptionKey", cfg.EncryptionCipher)
		}
		return nil
	}
	if len(cfg.EncryptionKey) < MinEncryptionKeyBytes {
		return fmt.Errorf("bus: EncryptionKey is %d bytes, shorter than %d", len(cfg.EncryptionKey), MinEncryptionKeyBytes)
	}
	switch cfg.EncryptionCipher {
	case "", "chacha":
		opts.JetStreamCipher = server.ChaCha
	case "aes":
		opts.JetStreamCipher = server.AES
	default:
		return fmt.Errorf("bus: EncryptionCipher %q: want chacha or aes", cfg.EncryptionCipher)
	}
	opts.JetStreamKey = cfg.EncryptionKey
	return nil
}
