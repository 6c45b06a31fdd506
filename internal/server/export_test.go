package server

import "net/http"

// WrapOnline wraps the Online API's handler of a server not started yet, so
// that a test sees a request arrive.
func (s *Server) WrapOnline(wrap func(http.Handler) http.Handler) {
	s.handlers["online"] = wrap(s.handlers["online"])
}
