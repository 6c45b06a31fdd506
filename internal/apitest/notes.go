package apitest

import (
	"fmt"
	"sync"
)

// Notes is a list of messages that goroutines add to, each formatted as
// fmt.Sprintf formats: what a test found, reported at its end. The zero
// Notes is empty and ready.
type Notes struct {
	mu   sync.Mutex
	list []string
}

// Addf adds the message fmt.Sprintf(format, args...).
func (n *Notes) Addf(format string, args ...any) {
	msg := fmt.Sprintf(format, args...)
	n.mu.Lock()
	n.list = append(n.list, msg)
	n.mu.Unlock()
}

// Take returns the messages added since the last Take (nil if none) and
// forgets them.
func (n *Notes) Take() []string {
	n.mu.Lock()
	defer n.mu.Unlock()
	list := n.list
	n.list = nil
	return list
}
