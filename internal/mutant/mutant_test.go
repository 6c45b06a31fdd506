package mutant

import "testing"

func TestSetOnRestore(t *testing.T) {
	if On(RefundAboveAmount) {
		t.Fatal("a mutant is on before any test switched one on")
	}
	restore := Set(RefundAboveAmount)
	if !On(RefundAboveAmount) || On(IdempotencyNotTied) {
		t.Fatal("Set switched on the wrong mutant")
	}
	func() {
		defer func() {
			if recover() == nil {
				t.Error("a second Set while one is on did not panic")
			}
		}()
		Set(IdempotencyNotTied)
	}()
	restore()
	if On(RefundAboveAmount) {
		t.Fatal("restore left the mutant on")
	}
}

func TestNamesUnique(t *testing.T) {
	seen := map[Name]bool{}
	for _, n := range All {
		if seen[n] || n == "" {
			t.Errorf("mutant %q listed twice or empty", n)
		}
		seen[n] = true
	}
}
