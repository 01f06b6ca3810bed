//go:build failpoints

package failpoint

import (
	"fmt"
	"os"
	"strings"
	"sync"
)

var (
	once    sync.Once
	actions map[string]string
	mu      sync.Mutex
	fired   = map[string]bool{}
)

// Inject acts on the failpoint name if TOOLWIRE_FAILPOINTS names it.
func Inject(name string) {
	once.Do(func() {
		actions = map[string]string{}
		for _, kv := range strings.Split(os.Getenv("TOOLWIRE_FAILPOINTS"), ",") {
			if k, v, ok := strings.Cut(strings.TrimSpace(kv), "="); ok {
				actions[k] = v
			}
		}
	})
	switch actions[name] {
	case "exit":
		fmt.Fprintf(os.Stderr, "failpoint %s: exiting\n", name)
		os.Exit(137)
	case "exit-once":
		mu.Lock()
		first := !fired[name]
		fired[name] = true
		mu.Unlock()
		if first {
			fmt.Fprintf(os.Stderr, "failpoint %s: exiting\n", name)
			os.Exit(137)
		}
	}
}
