package data

import "testing"

func TestLookupFacts(t *testing.T) {
	if f, ok := LookupFacts("emnist"); !ok || f.Name != "emnist-letters" {
		t.Errorf("alias emnist: %+v, %v", f, ok)
	}
	if f, _ := LookupFacts("cub"); f.Classes != 200 || !f.Colour || f.Target {
		t.Errorf("cub facts %+v", f)
	}
	if f, _ := LookupFacts("mnist"); f.Classes != 10 || f.Colour || !f.Target || f.ValidationSize != 10000 {
		t.Errorf("mnist facts %+v", f)
	}
	if _, ok := LookupFacts("no-such-dataset"); ok {
		t.Error("an unknown name has facts")
	}
}
