package bus

import (
	"net/url"
	"strings"
)

// redactURL hides user info in NATS URLs, so passwords and tokens never
// reach logs or errors.
func redactURL(s string) string {
	parts := strings.Split(s, ",")
	for i, p := range parts {
		u, err := url.Parse(strings.TrimSpace(p))
		if err != nil {
			parts[i] = "<unparsable url>"
			continue
		}
		if u.User != nil {
			u.User = url.User("redacted")
		}
		parts[i] = u.String()
	}
	return strings.Join(parts, ",")
}
