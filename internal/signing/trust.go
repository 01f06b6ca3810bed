package signing

import (
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"sync"
)

// AnyPool is the pool name a Trust file may have to allow its key for
// every pool (the local worker key, LocalWorkerKey).
const AnyPool = "*"

// Trust is what the dispatchers enrol: the keys an operator put in a
// directory, one file per pool named <pool>.<ext> holding the pool's
// public key (.pub: "U…" or PEM) or its private key (.nk, .seed, .pem,
// .key: the dispatcher derives the public key; Helm's Secret of pool keys
// mounted as a directory). A file named LocalWorkerKey allows its key for
// every pool: the key toolworker makes under a dispatcher's data
// directory, which only the installation's owner can write. Files are
// read again when a key is not found, so a key put in the directory is
// enrolled without a restart.
type Trust struct {
	dirs []string

	mu   sync.Mutex
	keys map[string]map[string]bool // pub → pools (AnyPool: all)
}

// LocalWorkerKey is the file name of the local worker key in a
// dispatcher's credentials directory.
const LocalWorkerKey = "worker-signing.nk"

// NewTrust reads the directories (a missing one holds no key).
func NewTrust(dirs ...string) (*Trust, error) {
	t := &Trust{dirs: dirs}
	if err := t.load(); err != nil {
		return nil, err
	}
	return t, nil
}

// Allows reports whether pub may sign for pool; the error says why not,
// for the refusal an announcing worker gets.
func (t *Trust) Allows(pub, pool string) error {
	t.mu.Lock()
	defer t.mu.Unlock()
	if t.allows(pub, pool) {
		return nil
	}
	// Read again: the key may have been put there a moment ago (a local
	// worker makes its key just before it announces). A directory of a
	// few files, read only for announcements (worker start-ups).
	_ = t.loadLocked()
	if t.allows(pub, pool) {
		return nil
	}
	where := "no --worker-keys directory is configured"
	if len(t.dirs) > 0 {
		where = "put its public key in " + filepath.Join(t.dirs[0], pool+".pub")
	}
	return fmt.Errorf("signing key %s is not enrolled for pool %q: %s", limit(pub), pool, where)
}

func (t *Trust) allows(pub, pool string) bool {
	pools := t.keys[pub]
	return pools[pool] || pools[AnyPool]
}

func (t *Trust) load() error {
	t.mu.Lock()
	defer t.mu.Unlock()
	return t.loadLocked()
}

func (t *Trust) loadLocked() error {
	keys := map[string]map[string]bool{}
	var errs []error
	for _, dir := range t.dirs {
		ents, err := os.ReadDir(dir)
		if errors.Is(err, os.ErrNotExist) {
			continue
		}
		if err != nil {
			errs = append(errs, fmt.Errorf("signing: worker keys: %w", err))
			continue
		}
		for _, e := range ents {
			if e.IsDir() || strings.HasPrefix(e.Name(), ".") {
				continue // Kubernetes' ..data links and the like
			}
			pool, pub, err := trustFile(filepath.Join(dir, e.Name()))
			if err != nil {
				errs = append(errs, err)
				continue
			}
			if keys[pub] == nil {
				keys[pub] = map[string]bool{}
			}
			keys[pub][pool] = true
		}
	}
	t.keys = keys
	return errors.Join(errs...)
}

// trustFile reads one file of a worker keys directory.
func trustFile(path string) (pool, pub string, err error) {
	name := filepath.Base(path)
	if name == LocalWorkerKey {
		k, err := LoadKey(path)
		if err != nil {
			return "", "", err
		}
		return AnyPool, k.Public(), nil
	}
	ext := filepath.Ext(name)
	pool = strings.TrimSuffix(name, ext)
	if pool == "" || pool == AnyPool {
		return "", "", fmt.Errorf("signing: worker key file %s names no pool", path)
	}
	b, err := os.ReadFile(path)
	if err != nil {
		return "", "", fmt.Errorf("signing: worker key file: %w", err)
	}
	if ext == ".pub" {
		pub, err = ParsePublic(b)
	} else {
		var k *Key
		if k, err = ParseKey(b); err == nil {
			pub = k.Public()
		}
	}
	if err != nil {
		return "", "", fmt.Errorf("%w (file %s)", err, path)
	}
	return pool, pub, nil
}
