//go:build linux

package sandbox

import (
	"bytes"
	"os"
	"sync"
	"sync/atomic"
)

// outputs captures a process's stdout and stderr. Both count towards one
// cap; past it the process is stopped (over is closed) and stdout keeps
// its first cap bytes. Of stderr only the tail is kept, for messages.
type outputs struct {
	limit   int64
	tailMax int
	total   atomic.Int64

	overOnce sync.Once
	over     chan struct{}

	stdout bytes.Buffer // owned by the stdout reader until done
	stderr []byte       // owned by the stderr reader until done
	done   sync.WaitGroup
}

func newOutputs(limit int64, tailMax int) *outputs {
	return &outputs{limit: limit, tailMax: tailMax, over: make(chan struct{})}
}

// start reads both pipes until EOF or until they are closed.
func (o *outputs) start(stdout, stderr *os.File) {
	o.done.Go(func() { o.read(stdout, true) })
	o.done.Go(func() { o.read(stderr, false) })
}

func (o *outputs) read(f *os.File, isStdout bool) {
	buf := make([]byte, 32<<10)
	for {
		n, err := f.Read(buf)
		if n > 0 {
			total := o.total.Add(int64(n))
			if isStdout {
				if room := o.limit - int64(o.stdout.Len()); room > 0 {
					o.stdout.Write(buf[:min(int64(n), room)])
				}
			} else {
				o.stderr = append(o.stderr, buf[:n]...)
				if len(o.stderr) > 2*o.tailMax {
					o.stderr = append(o.stderr[:0], o.stderr[len(o.stderr)-o.tailMax:]...)
				}
			}
			if total > o.limit {
				o.overOnce.Do(func() { close(o.over) })
			}
		}
		if err != nil {
			return // EOF, or the pipe was closed after the process was gone
		}
	}
}

// stderrTail returns the last tailMax bytes of stderr. Call after done.
func (o *outputs) stderrTail() string {
	s := o.stderr
	if len(s) > o.tailMax {
		s = s[len(s)-o.tailMax:]
	}
	return string(bytes.TrimSpace(s))
}
