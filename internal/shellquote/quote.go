package shellquote

import "strings"

// bare are the characters of a word Quote leaves bare: none is special to
// a POSIX shell.
const bare = "abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ0123456789-_./:@,+="

// Quote is s as one word of a POSIX shell: left bare when it holds only
// characters no shell treats specially, else in single quotes, each
// single quote in it closing the quotes, then escaped with a backslash,
// then reopening them.
func Quote(s string) string {
	if s != "" && strings.Trim(s, bare) == "" {
		return s
	}
	return "'" + strings.ReplaceAll(s, "'", `'\''`) + "'"
}
