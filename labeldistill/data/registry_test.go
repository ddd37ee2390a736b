package data

import (
	"os"
	"path/filepath"
	"regexp"
	"slices"
	"strings"
	"testing"
)

func TestRegistryConsistent(t *testing.T) {
	hex64 := regexp.MustCompile(`^[0-9a-f]{64}$`)
	want := []string{"mnist", "fashion-mnist", "kmnist", "emnist-letters", "k49", "cifar10", "cifar100", "cub"}
	if got := strings.Join(Names(), " "); got != strings.Join(want, " ") {
		t.Errorf("Names() = %s", got)
	}
	for _, s := range registry {
		if len(s.Mean) != s.C || len(s.Std) != s.C {
			t.Errorf("%s: mean/std per channel", s.Name)
		}
		if s.TargetSize+s.ValidationSize > s.TrainTotal || s.TargetSize <= 0 || s.ValidationSize <= 0 || s.TestTotal <= 0 {
			t.Errorf("%s: split sizes", s.Name)
		}
		if s.ClassNames != nil && len(s.ClassNames) != s.Classes {
			t.Errorf("%s: class names", s.Name)
		}
		if len(s.Layouts) == 0 || s.Obtain == "" {
			t.Errorf("%s: no layouts or no Obtain", s.Name)
		}
		for _, l := range s.Layouts {
			for _, f := range l.Files {
				if len(f.Names) == 0 {
					t.Errorf("%s/%s: file without names", s.Name, l.Name)
				}
				for _, h := range f.SHA256 {
					if !hex64.MatchString(h) {
						t.Errorf("%s/%s: bad sha256 %q", s.Name, l.Name, h)
					}
				}
			}
		}
	}
	if _, err := Lookup("imagenet"); err == nil || !strings.Contains(err.Error(), "known: mnist") {
		t.Errorf("Lookup unknown: %v", err)
	}
	// docs/ALGORITHM.md §1 constants.
	m, _ := Lookup("k49")
	if m.Mean[0] != 0.1307 || m.Std[0] != 0.3081 {
		t.Error("greyscale normalisation")
	}
	c, _ := Lookup("cub")
	if c.Mean[1] != 123.0/255 || c.Std[2] != 66.7/255 || c.H != 32 {
		t.Error("colour normalisation")
	}
}

// TestCIFAR100ClassNames: the registry's CIFAR-100 class names are the shared copy's
// fine_label_names.txt, line for line (figures name the classes by them).
func TestCIFAR100ClassNames(t *testing.T) {
	b, err := os.ReadFile(filepath.Join(sharedDatasets(t), "cifar100", "fine_label_names.txt"))
	if err != nil {
		t.Skip(err)
	}
	want := strings.Fields(string(b))
	spec, err := Lookup("cifar100")
	if err != nil {
		t.Fatal(err)
	}
	if !slices.Equal(spec.ClassNames, want) {
		t.Errorf("cifar100 class names (%d) differ from fine_label_names.txt (%d)", len(spec.ClassNames), len(want))
	}
}
