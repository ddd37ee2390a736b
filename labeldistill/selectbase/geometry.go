package selectbase

// geometry.go: the three geometric choices, on the rows of one class of a points matrix
// (n×d float32, row-major): k-means with k-means++ seeding and the real point nearest each
// centroid, herding, and k-centre greedy. Pure Go, float64 sums, deterministic: ties go to
// the earliest row.

import (
	"context"
	"math"
	"math/bits"
	"math/rand/v2"
)

// points is a matrix of n rows of d values.
type points struct {
	x []float32
	d int
}

func (p points) row(i int) []float32 { return p.x[i*p.d : (i+1)*p.d] }

// dist2 is the squared Euclidean distance between row i and the vector c.
func (p points) dist2(i int, c []float64) float64 {
	var s float64
	for j, v := range p.row(i) {
		e := float64(v) - c[j]
		s += e * e
	}
	return s
}

// rowDist2 is the squared Euclidean distance between rows i and j.
func (p points) rowDist2(i, j int) float64 {
	a, b := p.row(i), p.row(j)
	var s float64
	for k := range a {
		e := float64(a[k]) - float64(b[k])
		s += e * e
	}
	return s
}

// pick is one chosen row and its score.
type pick struct {
	row   int
	score float64
}

// uniform01 is a uniform value in [0, 1) from 53 random bits (spelled out, as the data
// package spells out its permutation, so that it stays the same across Go releases).
func uniform01(r *rand.PCG) float64 { return float64(r.Uint64()>>11) / (1 << 53) }

// below is a uniform integer in [0, n), n > 0 (Lemire's multiply-and-reject).
func below(r *rand.PCG, n int) int {
	un := uint64(n)
	hi, lo := bits.Mul64(r.Uint64(), un)
	if lo < un {
		thresh := -un % un
		for lo < thresh {
			hi, lo = bits.Mul64(r.Uint64(), un)
		}
	}
	return int(hi)
}

// kmeansResult is one class's clustering.
type kmeansResult struct {
	centroids  [][]float64
	assign     []int // cluster of each row of rows
	iterations int   // Lloyd iterations run
	converged  bool  // an iteration changed no assignment
	inertia    float64
}

// kMeans clusters the given rows into k clusters: k-means++ seeding (the first centre a
// uniform row, each next one a row drawn with probability proportional to its squared
// distance to the nearest centre so far), then Lloyd iterations (assign each row to its
// nearest centroid, move each centroid to its rows' mean; a cluster left empty keeps its
// centroid) until no assignment changes or maxIter iterations.
func kMeans(ctx context.Context, p points, rows []int, k int, r *rand.PCG, maxIter int) (*kmeansResult, error) {
	n := len(rows)
	res := &kmeansResult{assign: make([]int, n)}
	centre := func(i int) []float64 {
		c := make([]float64, p.d)
		for j, v := range p.row(rows[i]) {
			c[j] = float64(v)
		}
		return c
	}
	res.centroids = append(res.centroids, centre(below(r, n)))
	near := make([]float64, n) // squared distance to the nearest centre so far
	for i := range rows {
		near[i] = p.dist2(rows[i], res.centroids[0])
	}
	for len(res.centroids) < k {
		if err := ctx.Err(); err != nil {
			return nil, err
		}
		var total float64
		for _, v := range near {
			total += v
		}
		next := 0
		if total > 0 {
			u, acc := uniform01(r)*total, 0.0
			next = n - 1
			for i, v := range near {
				acc += v
				if u < acc {
					next = i
					break
				}
			}
		} else { // every row sits on a centre: take the first row not yet a centre's
			next = len(res.centroids) % n
		}
		c := centre(next)
		res.centroids = append(res.centroids, c)
		for i := range rows {
			near[i] = min(near[i], p.dist2(rows[i], c))
		}
	}
	for i := range res.assign {
		res.assign[i] = -1
	}
	sums := make([][]float64, k)
	counts := make([]int, k)
	for res.iterations < maxIter {
		if err := ctx.Err(); err != nil {
			return nil, err
		}
		changed := false
		res.inertia = 0
		for i := range rows {
			best, bestD := 0, math.Inf(1)
			for c, cent := range res.centroids {
				if d := p.dist2(rows[i], cent); d < bestD {
					best, bestD = c, d
				}
			}
			if res.assign[i] != best {
				res.assign[i], changed = best, true
			}
			res.inertia += bestD
		}
		if !changed {
			res.converged = true
			break
		}
		res.iterations++
		for c := range sums {
			sums[c] = make([]float64, p.d)
			counts[c] = 0
		}
		for i, c := range res.assign {
			counts[c]++
			for j, v := range p.row(rows[i]) {
				sums[c][j] += float64(v)
			}
		}
		for c := range res.centroids {
			if counts[c] == 0 {
				continue
			}
			for j := range sums[c] {
				res.centroids[c][j] = sums[c][j] / float64(counts[c])
			}
		}
	}
	return res, nil
}

// nearestDistinct takes, for each centroid in order, the row nearest to it that no earlier
// centroid took; the score is the distance (not squared).
func nearestDistinct(p points, rows []int, centroids [][]float64) []pick {
	taken := map[int]bool{}
	out := make([]pick, 0, len(centroids))
	for _, c := range centroids {
		best, bestD := -1, math.Inf(1)
		for _, i := range rows {
			if taken[i] {
				continue
			}
			if d := p.dist2(i, c); d < bestD {
				best, bestD = i, d
			}
		}
		taken[best] = true
		out = append(out, pick{row: best, score: math.Sqrt(bestD)})
	}
	return out
}

// herding picks k of the rows greedily so that the mean of the picks follows the mean μ of
// all of them (Welling 2009; Chen, Welling & Smola 2010): pick t (1-based) is the row x
// minimising ‖t·μ − S − x‖, S the sum of the earlier picks, i.e. the one that brings the
// picks' mean closest to μ. The first pick is the row nearest μ. The score is ‖μ − mean
// of the picks so far‖ after the pick.
func herding(ctx context.Context, p points, rows []int, k int) ([]pick, error) {
	mu := make([]float64, p.d)
	for _, i := range rows {
		for j, v := range p.row(i) {
			mu[j] += float64(v)
		}
	}
	for j := range mu {
		mu[j] /= float64(len(rows))
	}
	sum := make([]float64, p.d)
	target := make([]float64, p.d)
	taken := map[int]bool{}
	out := make([]pick, 0, k)
	for t := 1; t <= k; t++ {
		if err := ctx.Err(); err != nil {
			return nil, err
		}
		for j := range target {
			target[j] = float64(t)*mu[j] - sum[j]
		}
		best, bestD := -1, math.Inf(1)
		for _, i := range rows {
			if taken[i] {
				continue
			}
			if d := p.dist2(i, target); d < bestD {
				best, bestD = i, d
			}
		}
		taken[best] = true
		var gap float64
		for j, v := range p.row(best) {
			sum[j] += float64(v)
			e := mu[j] - sum[j]/float64(t)
			gap += e * e
		}
		out = append(out, pick{row: best, score: math.Sqrt(gap)})
	}
	return out, nil
}

// kCenterGreedy picks k of the rows by farthest-first traversal (Gonzalez 1985; Sener &
// Savarese 2018's k-centre greedy): first the row at position first of rows, then
// repeatedly the row farthest from its nearest pick. The score of a pick is its distance to
// the nearest earlier pick (0 for the first); radius is the largest distance of any row to
// its nearest pick afterwards (the covering radius, at most twice the optimal k-centre's).
func kCenterGreedy(ctx context.Context, p points, rows []int, k, first int) (picks []pick, radius float64, err error) {
	near := make([]float64, len(rows))
	for i := range near {
		near[i] = math.Inf(1)
	}
	taken := make([]bool, len(rows))
	cur, score := first, 0.0
	for {
		picks = append(picks, pick{row: rows[cur], score: score})
		taken[cur] = true
		far := 0.0
		next := -1
		for i, r := range rows {
			near[i] = min(near[i], p.rowDist2(r, rows[cur]))
			far = max(far, near[i])
			if !taken[i] && (next < 0 || near[i] > near[next]) {
				next = i
			}
		}
		radius = math.Sqrt(far)
		if len(picks) == k {
			return picks, radius, nil
		}
		if err := ctx.Err(); err != nil {
			return nil, 0, err
		}
		if next < 0 {
			return picks, radius, nil // fewer rows than k (the caller checks the counts)
		}
		cur, score = next, radius
	}
}
