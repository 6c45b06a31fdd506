package httpapi

import (
	"testing"

	"github.com/instore-dev/instore"
)

// TestEveryProblemHasItsTitle: every problem name a request can be
// answered with has a title of its own (a service error code has its
// errorCodes description), never the internal error's.
func TestEveryProblemHasItsTitle(t *testing.T) {
	meta := instore.DefaultMetadata()
	for _, name := range instore.ProblemNames() {
		p := NewProblem(instore.Errorf(name, "detail"), "req_1", &meta)
		if p.Title == "" || name != instore.EInternal && p.Title == titles[instore.EInternal] {
			t.Errorf("problem %s has the title %q", name, p.Title)
		}
		if p.Status != instore.HTTPStatus(name) || p.Type != "urn:instore:problem:"+name {
			t.Errorf("problem %s: %d %s", name, p.Status, p.Type)
		}
	}
}
