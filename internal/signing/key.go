package signing

import (
	"crypto/ed25519"
	"crypto/rand"
	"crypto/x509"
	"encoding/pem"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strings"

	"github.com/nats-io/nkeys"
)

// Key is a signing identity: an Ed25519 private key and its public key in
// nkey form ("U…"), which is how the keyring and the headers name it.
type Key struct {
	priv  ed25519.PrivateKey
	pub   string
	batch batcher
}

// NewKey makes a random key (a process's own, kept in memory).
func NewKey() (*Key, error) {
	_, priv, err := ed25519.GenerateKey(rand.Reader)
	if err != nil {
		return nil, fmt.Errorf("signing: new key: %w", err)
	}
	return fromPrivate(priv)
}

func fromPrivate(priv ed25519.PrivateKey) (*Key, error) {
	pub, err := nkeys.Encode(nkeys.PrefixByteUser, priv.Public().(ed25519.PublicKey))
	if err != nil {
		return nil, fmt.Errorf("signing: public key: %w", err)
	}
	return &Key{priv: priv, pub: string(pub)}, nil
}

// Public is the key's public key, "U…" (an nkey user public key).
func (k *Key) Public() string { return k.pub }

// Seed is the key as an nkey seed ("SU…"), the form KeyFile writes.
func (k *Key) Seed() ([]byte, error) {
	return nkeys.EncodeSeed(nkeys.PrefixByteUser, k.priv.Seed())
}

// ParseKey reads a private key: an nkey user seed ("SU…", what the
// worker's local key file holds) or a PEM PKCS #8 Ed25519 private key
// (Helm's genPrivateKey "ed25519", `openssl genpkey -algorithm ed25519`).
// Errors never quote the content.
func ParseKey(b []byte) (*Key, error) {
	text := strings.TrimSpace(string(b))
	if block, _ := pem.Decode([]byte(text)); block != nil {
		k, err := x509.ParsePKCS8PrivateKey(block.Bytes)
		if err != nil {
			return nil, errors.New("signing: PEM key is not a PKCS #8 private key")
		}
		priv, ok := k.(ed25519.PrivateKey)
		if !ok {
			return nil, errors.New("signing: PEM key is not an Ed25519 key")
		}
		return fromPrivate(priv)
	}
	prefix, seed, err := nkeys.DecodeSeed([]byte(text))
	if err != nil || prefix != nkeys.PrefixByteUser {
		return nil, errors.New("signing: not an nkey user seed (SU…) or a PEM Ed25519 private key")
	}
	return fromPrivate(ed25519.NewKeyFromSeed(seed))
}

// ParsePublic reads a public key: an nkey user public key ("U…") or a PEM
// PKIX Ed25519 public key. It returns the "U…" form.
func ParsePublic(b []byte) (string, error) {
	text := strings.TrimSpace(string(b))
	if block, _ := pem.Decode([]byte(text)); block != nil {
		k, err := x509.ParsePKIXPublicKey(block.Bytes)
		pub, ok := k.(ed25519.PublicKey)
		if err != nil || !ok {
			return "", errors.New("signing: PEM key is not an Ed25519 public key")
		}
		enc, err := nkeys.Encode(nkeys.PrefixByteUser, pub)
		return string(enc), err
	}
	if _, err := publicKey(text); err != nil {
		return "", err
	}
	return text, nil
}

// publicKey decodes a "U…" public key.
func publicKey(pub string) (ed25519.PublicKey, error) {
	raw, err := nkeys.Decode(nkeys.PrefixByteUser, []byte(pub))
	if err != nil || len(raw) != ed25519.PublicKeySize {
		return nil, fmt.Errorf("signing: %q is not an nkey user public key (U…)", limit(pub))
	}
	return ed25519.PublicKey(raw), nil
}

// LoadKey reads a private key file. A file that others may read, or
// group or others may write, is refused. Group read is allowed: a
// Kubernetes Secret volume of a pod with an fsGroup makes every file
// root:fsGroup 0440 whatever its defaultMode, and that group is the pod's
// own.
func LoadKey(path string) (*Key, error) {
	fi, err := os.Stat(path)
	if err != nil {
		return nil, fmt.Errorf("signing: key file: %w", err)
	}
	if fi.Mode().Perm()&0o026 != 0 {
		return nil, fmt.Errorf("signing: key file %s is readable by others or writable by group or others (mode %v); chmod 600 it", path, fi.Mode().Perm())
	}
	b, err := os.ReadFile(path)
	if err != nil {
		return nil, fmt.Errorf("signing: key file: %w", err)
	}
	k, err := ParseKey(b)
	if err != nil {
		return nil, fmt.Errorf("%w (file %s)", err, path)
	}
	return k, nil
}

// KeyFile returns the key in path, making it (a new seed, mode 0600, its
// directory 0700) when there is none yet.
func KeyFile(path string) (*Key, error) {
	if _, err := os.Stat(path); err == nil {
		return LoadKey(path)
	} else if !errors.Is(err, os.ErrNotExist) {
		return nil, fmt.Errorf("signing: key file: %w", err)
	}
	k, err := NewKey()
	if err != nil {
		return nil, err
	}
	seed, err := k.Seed()
	if err != nil {
		return nil, fmt.Errorf("signing: seed: %w", err)
	}
	if err := os.MkdirAll(filepath.Dir(path), 0o700); err != nil {
		return nil, fmt.Errorf("signing: key directory: %w", err)
	}
	f, err := os.OpenFile(path, os.O_WRONLY|os.O_CREATE|os.O_EXCL, 0o600)
	if errors.Is(err, os.ErrExist) {
		return LoadKey(path) // made by another process meanwhile
	}
	if err != nil {
		return nil, fmt.Errorf("signing: key file: %w", err)
	}
	_, err = f.Write(append(seed, '\n'))
	if cerr := f.Close(); err == nil {
		err = cerr
	}
	if err != nil {
		return nil, fmt.Errorf("signing: key file: %w", err)
	}
	return k, nil
}

func limit(s string) string {
	if len(s) > 64 {
		return s[:64] + "…"
	}
	return s
}
