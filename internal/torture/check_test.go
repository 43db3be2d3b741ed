package torture_test

import "testing"

// The checker must catch what it is there to catch.
func TestCheckFindsViolations(t *testing.T) {
	ok := []entry{{Name: "a", Token: 1, Start: 10, End: 20}, {Name: "a", Token: 2, Start: 21, End: 30}, {Name: "b", Token: 1, Start: 15, End: 25}}
	if errs := check(ok); len(errs) != 0 {
		t.Fatalf("clean ledger flagged: %v", errs)
	}
	overlap := []entry{{Name: "a", Token: 1, Start: 10, End: 20}, {Name: "a", Token: 2, Start: 20, End: 30}}
	if errs := check(overlap); len(errs) != 1 {
		t.Fatalf("overlap: %v, want one violation", errs)
	}
	backwards := []entry{{Name: "a", Token: 5, Start: 10, End: 20}, {Name: "a", Token: 4, Start: 21, End: 30}}
	if errs := check(backwards); len(errs) != 1 {
		t.Fatalf("backwards token: %v, want one violation", errs)
	}
}
