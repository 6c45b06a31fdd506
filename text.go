package instore

import (
	"unicode"
	"unicode/utf8"
)

// ValidText reports whether s is free text a terminal can be sent: valid
// UTF-8 of at most max characters (code points) without a control
// character (Unicode Cc: C0 including tab and line breaks, DEL, C1), so
// without NUL, which PostgreSQL cannot store either. It is the one rule of
// free text: the request validation of every free-text field (ecrReference,
// print lines) and the terminal protocol's check of the messages that
// carry them both use it, so a request the API accepts is never one the
// protocol then refuses to send.
func ValidText(s string, max int) bool {
	if len(s) > max*utf8.UTFMax {
		return false
	}
	n := 0
	for i := 0; i < len(s); {
		r, size := utf8.DecodeRuneInString(s[i:])
		if r == utf8.RuneError && size <= 1 || unicode.IsControl(r) {
			return false
		}
		if n++; n > max {
			return false
		}
		i += size
	}
	return true
}
