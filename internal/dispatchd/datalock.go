package dispatchd

import (
	"bytes"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strconv"
	"syscall"
)

// ErrDataDirInUse is returned by Run when another process holds the data
// directory's lock: two embedded servers on one store corrupt it.
var ErrDataDirInUse = errors.New("dispatch: the data directory is in use")

// dataLock holds an exclusive lock on <data>/dispatcher.lock for as long
// as the process uses the directory; the file names the holder's pid and
// API address, so a second dispatcher can say which one runs there.
type dataLock struct{ f *os.File }

// lockDataDir takes the lock without waiting, or returns ErrDataDirInUse
// naming the holder.
func lockDataDir(dir string) (*dataLock, error) {
	if err := os.MkdirAll(dir, 0o700); err != nil {
		return nil, fmt.Errorf("dispatch: data directory: %w", err)
	}
	path := filepath.Join(dir, "dispatcher.lock")
	f, err := os.OpenFile(path, os.O_RDWR|os.O_CREATE, 0o600)
	if err != nil {
		return nil, fmt.Errorf("dispatch: data directory lock: %w", err)
	}
	if err := syscall.Flock(int(f.Fd()), syscall.LOCK_EX|syscall.LOCK_NB); err != nil {
		holder, _ := os.ReadFile(path)
		_ = f.Close()
		if errors.Is(err, syscall.EWOULDBLOCK) {
			who := "another process"
			if h := string(bytes.TrimSpace(holder)); h != "" {
				who = h
			}
			abs, _ := filepath.Abs(dir)
			return nil, fmt.Errorf("%w: %s holds %s; stop it, or give this one another --data", ErrDataDirInUse, who, abs)
		}
		return nil, fmt.Errorf("dispatch: data directory lock: %w", err)
	}
	l := &dataLock{f: f}
	l.describe("")
	return l, nil
}

// describe writes who holds the lock: this pid and, once known, the API.
func (l *dataLock) describe(api string) {
	s := "dispatcher pid " + strconv.Itoa(os.Getpid())
	if api != "" {
		s += " (API " + api + ")"
	}
	if err := l.f.Truncate(0); err == nil {
		_, _ = l.f.WriteAt([]byte(s+"\n"), 0)
	}
}

// release drops the lock (closing the file releases it too, also when the
// process dies).
func (l *dataLock) release() {
	_ = l.f.Truncate(0)
	_ = l.f.Close()
}
