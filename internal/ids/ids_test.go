package ids

import (
	"regexp"
	"testing"
)

func TestNewIsPrefixedSortableAndUnique(t *testing.T) {
	re := regexp.MustCompile(`^mer_[0-9a-f]{32}$`)
	seen := map[string]bool{}
	prev := ""
	for i := 0; i < 1000; i++ {
		id := New(Merchant)
		if !re.MatchString(id) {
			t.Fatalf("New(%q) = %q, want match of %s", Merchant, id, re)
		}
		if seen[id] {
			t.Fatalf("New returned %q twice", id)
		}
		if id < prev {
			t.Fatalf("New returned %q after %q: not time-sortable", id, prev)
		}
		seen[id], prev = true, id
	}
}
