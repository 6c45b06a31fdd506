package service

import (
	"regexp"
	"slices"
	"testing"
	"time"
)

func TestNewUpdateID(t *testing.T) {
	pattern := regexp.MustCompile(`^upd_[0-9a-f]{32}$`)
	var ids []string
	for i := range 5 {
		id := (&Service{}).newUpdateID(time.UnixMilli(1_700_000_000_000 + int64(i)))
		if !pattern.MatchString(id) {
			t.Errorf("newUpdateID() = %q, want upd_ and 32 hex digits", id)
		}
		ids = append(ids, id)
	}
	if !slices.IsSorted(ids) {
		t.Errorf("ids %v do not sort by creation", ids)
	}
}
