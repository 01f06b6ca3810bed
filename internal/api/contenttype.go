package api

import (
	"mime"
	"net/http"
	"strings"
)

// explainContentType wraps the API so that a POST whose Content-Type no
// protocol of the API speaks (curl -d sends
// application/x-www-form-urlencoded when none is given) is answered 415
// with a body that says what to send, where Connect answers 415 with an
// empty body. Everything else goes to h unchanged.
func explainContentType(h http.Handler) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if r.Method == http.MethodPost && !apiContentType(r.Header.Get("Content-Type")) {
			w.Header().Set("Content-Type", "application/json")
			w.Header().Set("Accept-Post", "application/json, application/proto")
			w.WriteHeader(http.StatusUnsupportedMediaType)
			_, _ = w.Write([]byte(`{"code":"invalid_argument","message":"unsupported Content-Type: ` +
				`send JSON with -H 'Content-Type: application/json' (or binary protobuf as application/proto, or gRPC)"}` + "\n"))
			return
		}
		h.ServeHTTP(w, r)
	})
}

// apiContentType reports whether ct is one of the Connect, gRPC or
// gRPC-Web content types.
func apiContentType(ct string) bool {
	mt, _, err := mime.ParseMediaType(ct)
	if err != nil {
		return false
	}
	switch {
	case mt == "application/json", mt == "application/proto",
		strings.HasPrefix(mt, "application/connect+"),
		mt == "application/grpc", strings.HasPrefix(mt, "application/grpc+"),
		strings.HasPrefix(mt, "application/grpc-web"):
		return true
	}
	return false
}
