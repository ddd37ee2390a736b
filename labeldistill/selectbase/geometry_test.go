package selectbase

import (
	"context"
	"math"
	"math/rand/v2"
	"slices"
	"testing"
)

// clusters draws per points around each centre (Gaussian, spread sd), in a shuffled order;
// of[i] is the cluster of row i.
func clusters(seed uint64, centres [][]float64, per int, sd float64) (points, []int) {
	r := rand.New(rand.NewPCG(seed, 1))
	d := len(centres[0])
	n := len(centres) * per
	p := points{x: make([]float32, n*d), d: d}
	of := make([]int, n)
	order := r.Perm(n)
	for k, i := range order {
		c := k / per
		of[i] = c
		for j := range d {
			p.x[i*d+j] = float32(centres[c][j] + sd*r.NormFloat64())
		}
	}
	return p, of
}

func allRows(n int) []int {
	rows := make([]int, n)
	for i := range rows {
		rows[i] = i
	}
	return rows
}

// nearestTo is the row of rows nearest the mean of rows, by brute force.
func nearestToMean(p points, rows []int) int {
	mu := make([]float64, p.d)
	for _, i := range rows {
		for j, v := range p.row(i) {
			mu[j] += float64(v) / float64(len(rows))
		}
	}
	best, bestD := -1, math.Inf(1)
	for _, i := range rows {
		if d := p.dist2(i, mu); d < bestD {
			best, bestD = i, d
		}
	}
	return best
}

// On well-separated clusters k-means (any seed) finds them: one centroid per cluster, every
// row assigned with its cluster, and the pick of each is the row nearest its cluster's mean.
func TestKMeansFindsSeparatedClusters(t *testing.T) {
	centres := [][]float64{{0, 0, 0, 0}, {50, 0, 0, 0}, {0, 50, 0, 50}}
	p, of := clusters(7, centres, 40, 1)
	rows := allRows(len(of))
	want := map[int]bool{}
	for c := range centres {
		var members []int
		for i, o := range of {
			if o == c {
				members = append(members, i)
			}
		}
		want[nearestToMean(p, members)] = true
	}
	for seed := range uint64(5) {
		km, err := kMeans(context.Background(), p, rows, 3, rand.NewPCG(seed, 9), 100)
		if err != nil {
			t.Fatal(err)
		}
		if !km.converged {
			t.Fatalf("seed %d: not converged after %d iterations", seed, km.iterations)
		}
		clusterOf := map[int]int{} // k-means cluster → true cluster
		for i, a := range km.assign {
			if c, ok := clusterOf[a]; ok && c != of[i] {
				t.Fatalf("seed %d: k-means cluster %d mixes true clusters %d and %d", seed, a, c, of[i])
			}
			clusterOf[a] = of[i]
		}
		if len(clusterOf) != 3 {
			t.Fatalf("seed %d: %d clusters used", seed, len(clusterOf))
		}
		picks := nearestDistinct(p, rows, km.centroids)
		got := map[int]bool{}
		for _, pk := range picks {
			got[pk.row] = true
			if pk.score > 5 { // the spread is 1 in 4 dimensions
				t.Errorf("seed %d: pick %d is %.2f from its centroid", seed, pk.row, pk.score)
			}
		}
		if len(got) != 3 || !mapsEqual(got, want) {
			t.Fatalf("seed %d: picks %v, want the rows nearest each cluster's mean %v", seed, got, want)
		}
	}
}

func mapsEqual(a, b map[int]bool) bool {
	if len(a) != len(b) {
		return false
	}
	for k := range a {
		if !b[k] {
			return false
		}
	}
	return true
}

// Herding's first pick is the row nearest the mean, and each later pick the row that brings
// the mean of the picks closest to the mean of all (recomputed by brute force).
func TestHerdingFollowsTheMean(t *testing.T) {
	r := rand.New(rand.NewPCG(3, 4))
	n, d := 60, 6
	p := points{x: make([]float32, n*d), d: d}
	for i := range p.x {
		p.x[i] = float32(r.ExpFloat64()) // skewed, so that the mean is no data point's
	}
	rows := allRows(n)
	picks, err := herding(context.Background(), p, rows, 8)
	if err != nil {
		t.Fatal(err)
	}
	if picks[0].row != nearestToMean(p, rows) {
		t.Fatalf("first pick %d, the row nearest the mean is %d", picks[0].row, nearestToMean(p, rows))
	}
	mu := make([]float64, d)
	for _, i := range rows {
		for j, v := range p.row(i) {
			mu[j] += float64(v) / float64(n)
		}
	}
	var chosen []int
	for t1, pk := range picks {
		best, bestGap := -1, math.Inf(1)
		for _, i := range rows {
			if slices.Contains(chosen, i) {
				continue
			}
			var gap float64
			for j := range d {
				s := float64(p.row(i)[j])
				for _, c := range chosen {
					s += float64(p.row(c)[j])
				}
				e := s/float64(t1+1) - mu[j]
				gap += e * e
			}
			if gap < bestGap {
				best, bestGap = i, gap
			}
		}
		if pk.row != best {
			t.Fatalf("pick %d is row %d, brute force says %d", t1+1, pk.row, best)
		}
		if math.Abs(pk.score-math.Sqrt(bestGap)) > 1e-9 {
			t.Fatalf("pick %d: score %g, gap %g", t1+1, pk.score, math.Sqrt(bestGap))
		}
		chosen = append(chosen, best)
	}
	if picks[len(picks)-1].score >= picks[0].score {
		t.Errorf("the picks' mean did not get closer to the mean: %g then %g", picks[0].score, picks[len(picks)-1].score)
	}
}

// k-centre greedy with one pick per well-separated cluster covers every cluster whatever
// its first pick, and its radius is the largest distance of a row to its nearest pick.
func TestKCenterCoversThePoints(t *testing.T) {
	centres := [][]float64{{0, 0, 0}, {40, 0, 0}, {0, 40, 0}, {0, 0, 40}}
	p, of := clusters(11, centres, 25, 1)
	rows := allRows(len(of))
	for _, first := range []int{0, 17, 99} {
		picks, radius, err := kCenterGreedy(context.Background(), p, rows, 4, first)
		if err != nil {
			t.Fatal(err)
		}
		if picks[0].row != first || picks[0].score != 0 {
			t.Fatalf("first pick %+v, want row %d", picks[0], first)
		}
		covered := map[int]bool{}
		for _, pk := range picks {
			covered[of[pk.row]] = true
		}
		if len(covered) != 4 {
			t.Fatalf("first %d: picks %v cover clusters %v, want all 4", first, picks, covered)
		}
		var far float64
		for _, i := range rows {
			near := math.Inf(1)
			for _, pk := range picks {
				near = min(near, p.rowDist2(i, pk.row))
			}
			far = max(far, near)
		}
		if math.Abs(radius-math.Sqrt(far)) > 1e-9 || radius > 10 {
			t.Fatalf("first %d: radius %g, brute force %g (clusters of spread 1, 40 apart)", first, radius, math.Sqrt(far))
		}
		// Each later pick was the row farthest from the earlier ones.
		for k := 1; k < len(picks); k++ {
			if picks[k].score < 20 {
				t.Fatalf("pick %d is only %.2f from the earlier ones", k, picks[k].score)
			}
		}
	}
	// As many picks as rows: every row, radius 0.
	picks, radius, err := kCenterGreedy(context.Background(), p, rows[:5], 5, 2)
	if err != nil || len(picks) != 5 || radius != 0 {
		t.Fatalf("k = n: %v picks, radius %g, %v", len(picks), radius, err)
	}
}
