package instore_test

import (
	"strings"
	"testing"

	"github.com/instore-dev/instore"
)

func TestValidText(t *testing.T) {
	tests := []struct {
		name string
		in   string
		max  int
		want bool
	}{
		{"empty", "", 64, true},
		{"ascii", "order 4711", 64, true},
		{"letters", "Kvitto för bord 7 – tack!", 64, true},
		{"replacement character itself", "\uFFFD", 64, true},
		{"emoji counts one", strings.Repeat("😀", 64), 64, true},
		{"at the limit", strings.Repeat("a", 64), 64, true},
		{"one over", strings.Repeat("a", 65), 64, false},
		{"multi-byte over", strings.Repeat("é", 65), 64, false},
		{"tab", "a\tb", 64, false},
		{"newline", "a\nb", 64, false},
		{"carriage return", "a\rb", 64, false},
		{"NUL", "a\x00b", 64, false},
		{"escape", "\x1b[2J", 64, false},
		{"DEL", "a\x7fb", 64, false},
		{"C1", "a\u0085b", 64, false},
		{"invalid UTF-8", "a\xffb", 64, false},
		{"truncated UTF-8", "a\xc3", 64, false},
		{"overlong NUL", "\xc0\x80", 64, false},
		{"surrogate half", "\xed\xa0\x80", 64, false},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			if got := instore.ValidText(tt.in, tt.max); got != tt.want {
				t.Errorf("ValidText(%q, %d) = %v, want %v", tt.in, tt.max, got, tt.want)
			}
		})
	}
}
