package data

// facts.go: the per-dataset facts that configuration defaults and checks depend on (classes,
// colour, target or source only, validation size, normalisation), for registered datasets
// and for a user's image folder.

// Facts are the per-dataset facts that configuration defaults depend on, read from
// the registry (registry.go), the one place they are written.
type Facts struct {
	Name    string // canonical name
	Classes int    // C
	Colour  bool   // 3×32×32 (true) or 1×28×28 greyscale (false)
	// Target reports whether the dataset can be a distillation target, i.e. has the
	// train → (target set, validation) / test split of docs/ALGORITHM.md §1. CUB is
	// source-only (the paper and the reference use it only as cub → cifar10 base examples).
	Target bool
	// ValidationSize is the default size of the validation part of the train split (§1).
	ValidationSize int
	// NormMean and NormStd are the default per-channel normalisation (§1).
	NormMean, NormStd []float64
}

// LookupFacts returns the facts for a dataset name (canonical or alias), or for a
// user's image folder "imagefolder:PATH" (see InspectImageFolder), whose canonical name
// holds the folder's absolute path.
func LookupFacts(name string) (Facts, bool) {
	if path, ok := ImageFolderPath(name); ok {
		info, err := InspectImageFolder(path)
		if err != nil {
			return Facts{}, false
		}
		return Facts{Name: ImageFolderPrefix + info.Path, Classes: len(info.ClassNames), Colour: info.Colour, Target: true,
			ValidationSize: info.ValidationSize()}, true
	}
	s, err := Lookup(Canonical(name))
	if err != nil {
		return Facts{}, false
	}
	return Facts{Name: s.Name, Classes: s.Classes, Colour: s.C == 3, Target: !s.SourceOnly,
		ValidationSize: s.ValidationSize, NormMean: s.Mean, NormStd: s.Std}, true
}
