package cluster

import (
	"strings"
	"testing"
)

// TestChannelName keeps two schemas of one database apart (NOTIFY is
// database-wide) and every name a short identifier.
func TestChannelName(t *testing.T) {
	a, b := channelName("public"), channelName("test_bench_1")
	if a == b {
		t.Fatalf("two schemas share the channel %q", a)
	}
	long := channelName(strings.Repeat("Schema-Name ", 20))
	if len(long) > 63 || strings.ContainsAny(long, " -") || long != strings.ToLower(long) {
		t.Errorf("channel %q is not a short lower-case identifier", long)
	}
}
