package train

// seed.go: the seeding scheme.

// Seed derives an independent seed for one purpose and index from a run's seed (splitmix64
// mixing): the seeding scheme of every random stream of a run (model initialisations,
// minibatches, validation and test models, baselines, studies), so that purposes never
// share a stream and a purpose's stream does not depend on the others.
func Seed(seed uint64, purpose string, i int) uint64 {
	h := seed ^ 0x9e3779b97f4a7c15
	for _, b := range []byte(purpose) {
		h = mix64(h ^ uint64(b))
	}
	return mix64(h ^ uint64(i))
}

func mix64(z uint64) uint64 {
	z += 0x9e3779b97f4a7c15
	z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9
	z = (z ^ (z >> 27)) * 0x94d049bb133111eb
	return z ^ (z >> 31)
}
