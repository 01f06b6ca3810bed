package shellquote

import (
	"os/exec"
	"testing"

	"github.com/stretchr/testify/require"
	"go.uber.org/goleak"
)

func TestMain(m *testing.M) { goleak.VerifyTestMain(m) }

// Quote's word is read back by a real POSIX shell as the string itself,
// whatever it holds (quotes, $, $(), backslashes, ;, newlines, spaces).
func TestQuoteRoundTripsThroughSh(t *testing.T) {
	t.Parallel()
	sh, err := exec.LookPath("sh")
	require.NoError(t, err)
	for _, s := range []string{"", "echo", "o'brien", "''", `{"a":"it's $HOME \"x\" \\ ` + "`id`" + `"}`, "two\nlines", "a b\tc", "--flag", "*", "~", "#x",
		"s 1; $(touch /tmp/x)"} {
		out, err := exec.Command(sh, "-c", "printf '%s' "+Quote(s)).Output()
		require.NoError(t, err, "%q", s)
		require.Equal(t, s, string(out), "quoted as %s", Quote(s))
	}
	require.Equal(t, "echo", Quote("echo"), "a plain word stays bare")
	require.Equal(t, "s-42", Quote("s-42"))
}
