package engine

import (
	"encoding/json"
	"math"
	"math/big"
	"math/rand"
	"reflect"
	"strings"
	"testing"
)

// bruteResets computes the reset rule of docs/ALGORITHM.md §6 from its definition, independently
// of ResetTracker: within the segment since the last reset, with S_i the exact sum of the
// errors of steps i−G+1 … i (i ≥ G, steps counted from 1 within the segment) and b(k) the
// FIRST step attaining min(S_G … S_k), the model is reset at the first k with
// k − b(k) = G + 1, recording T = b(k). It returns the recorded T_i and the 1-based global
// steps at which resets happen, and T as defined after each global step.
func bruteResets(errs []float64, g, meanOfLast int) (ts, at, tAfter []int) {
	rat := func(xs []float64) *big.Rat {
		s := new(big.Rat)
		for _, x := range xs {
			s.Add(s, new(big.Rat).SetFloat64(x))
		}
		return s
	}
	start := 0          // index of the segment's first step
	var sums []*big.Rat // S_G, S_{G+1}, … of the current segment
	for j := range errs {
		k := j - start + 1
		if k >= g {
			sums = append(sums, rat(errs[j-g+1:j+1]))
		}
		if k >= g+1 {
			b := 0
			for i := range sums { // first argmin
				if sums[i].Cmp(sums[b]) < 0 {
					b = i
				}
			}
			bStep := b + g // step index within the segment
			if k-bStep == g+1 {
				ts = append(ts, bStep)
				at = append(at, j+1)
				start = j + 1
				sums = nil
			}
		}
		t := j + 1
		if len(ts) > 0 {
			last := ts[max(0, len(ts)-meanOfLast):]
			sum := 0.0
			for _, v := range last {
				sum += float64(v)
			}
			t = int(sum / float64(len(last))) // Python's int(np.mean(...))
		}
		tAfter = append(tAfter, t)
	}
	return ts, at, tAfter
}

// runTracker feeds errs and returns the recorded T_i, the 1-based steps at which Observe
// reported a reset, and T() after every step.
func runTracker(t *testing.T, r *ResetTracker, errs []float64) (ts, at, tAfter []int) {
	t.Helper()
	for j, e := range errs {
		if r.Observe(e) {
			at = append(at, j+1)
		}
		tAfter = append(tAfter, r.T())
	}
	return r.Resets(), at, tAfter
}

func TestResetConstantErrors(t *testing.T) {
	// G = 3: steps 1–3 fill the window (best = S_3); steps 4, 5, 6 are not strictly
	// better (since_best 1, 2, 3 = G); step 7 resets with T = 7 − 3 − 1 = 3. The next
	// model repeats it: reset at global step 14.
	errs := make([]float64, 20)
	for i := range errs {
		errs[i] = 42
	}
	r := NewResetTracker(3, 3)
	ts, at, tAfter := runTracker(t, r, errs)
	if want := []int{3, 3}; !reflect.DeepEqual(ts, want) {
		t.Errorf("T_i = %v, want %v", ts, want)
	}
	if want := []int{7, 14}; !reflect.DeepEqual(at, want) {
		t.Errorf("resets at steps %v, want %v", at, want)
	}
	// Before the first reset T is the number of steps so far; after it, mean of T_i.
	for j := 0; j < 6; j++ {
		if tAfter[j] != j+1 {
			t.Errorf("T after step %d = %d, want %d", j+1, tAfter[j], j+1)
		}
	}
	if tAfter[6] != 3 || tAfter[19] != 3 {
		t.Errorf("T after steps 7 and 20 = %d, %d, want 3, 3", tAfter[6], tAfter[19])
	}
	if r.StepsSinceReset() != 6 || r.TotalSteps() != 20 {
		t.Errorf("steps since reset %d, total %d; want 6, 20", r.StepsSinceReset(), r.TotalSteps())
	}
}

func TestResetDecreasingThenFlat(t *testing.T) {
	// G = 3, errors 10 9 8 7 6 5 5 5 …: window sums S_3 … S_9 = 27 24 21 18 16 15 15, so the
	// best window ends at step 8; since_best reaches 3 at step 11 and step 12 resets, T = 8.
	errs := []float64{10, 9, 8, 7, 6, 5, 5, 5, 5, 5, 5, 5, 5}
	r := NewResetTracker(3, 3)
	for j, e := range errs {
		reset := r.Observe(e)
		if reset != (j+1 == 12) {
			t.Fatalf("step %d: reset = %v", j+1, reset)
		}
		if j+1 == 11 && r.SinceBest() != 3 {
			t.Fatalf("since_best after step 11 = %d, want 3", r.SinceBest())
		}
	}
	if got := r.Resets(); !reflect.DeepEqual(got, []int{8}) {
		t.Fatalf("T_i = %v, want [8]", got)
	}
	if r.T() != 8 {
		t.Fatalf("T = %d, want 8", r.T())
	}
}

// segment returns errors that decrease strictly for m steps and are then flat: for G the
// window sums decrease strictly up to step m+G−1, so T = max(G, m+G−1) and the reset
// happens at step T+G+1 (the segment's length).
func segment(m, g int) (errs []float64, T int) {
	T = max(g, m+g-1)
	for i := 1; i <= T+g+1; i++ {
		errs = append(errs, float64(1000-min(i, m)))
	}
	return errs, T
}

func TestResetMeanOfLastTruncates(t *testing.T) {
	const g = 3
	r := NewResetTracker(g, 3)
	var wantTs []int
	for _, m := range []int{6, 10, 2, 4} { // T = 8, 12, 4, 6
		errs, T := segment(m, g)
		for j, e := range errs {
			if reset := r.Observe(e); reset != (j == len(errs)-1) {
				t.Fatalf("m=%d step %d: reset = %v", m, j+1, reset)
			}
		}
		wantTs = append(wantTs, T)
	}
	if got := r.Resets(); !reflect.DeepEqual(got, []int{8, 12, 4, 6}) || !reflect.DeepEqual(got, wantTs) {
		t.Fatalf("T_i = %v, want [8 12 4 6]", got)
	}
	// int(mean(12, 4, 6)) = int(7.33) = 7: the last three only, truncated.
	if r.T() != 7 {
		t.Fatalf("T = %d, want 7", r.T())
	}
	r2 := NewResetTracker(g, 2)
	for _, m := range []int{6, 10, 2, 4} {
		errs, _ := segment(m, g)
		for _, e := range errs {
			r2.Observe(e)
		}
	}
	if r2.T() != 5 { // int(mean(4, 6))
		t.Fatalf("mean of last 2: T = %d, want 5", r2.T())
	}
}

func TestResetMatchesBruteForce(t *testing.T) {
	rng := rand.New(rand.NewSource(7))
	gens := map[string]func(i int) float64{
		// Integer-valued noise: many exact ties between window sums.
		"noisy-int": func(int) float64 { return float64(rng.Intn(5)) },
		// A downward trend with noise, as in training.
		"trend": func(i int) float64 {
			return math.Max(0, 90*math.Exp(-float64(i%400)/60)+float64(rng.Intn(8)))
		},
		// Percentages of a partial batch (848 examples): not dyadic, so sums round.
		"partial-batch": func(int) float64 { return 100 * float64(100+rng.Intn(4)) / 848 },
		// Uniform floats: ties essentially never.
		"uniform": func(int) float64 { return 100 * rng.Float64() },
	}
	for name, gen := range gens {
		for _, g := range []int{1, 2, 3, 5, 10, 50} {
			errs := make([]float64, 3000)
			for i := range errs {
				errs[i] = gen(i)
			}
			for _, meanOfLast := range []int{1, 3} {
				wantTs, wantAt, wantT := bruteResets(errs, g, meanOfLast)
				ts, at, tAfter := runTracker(t, NewResetTracker(g, meanOfLast), errs)
				if !reflect.DeepEqual(ts, wantTs) || !reflect.DeepEqual(at, wantAt) {
					t.Fatalf("%s G=%d: T_i %v at %v, brute force %v at %v", name, g, ts, at, wantTs, wantAt)
				}
				if !reflect.DeepEqual(tAfter, wantT) {
					t.Fatalf("%s G=%d mean_of_last=%d: T() sequence differs from brute force", name, g, meanOfLast)
				}
				if len(wantTs) == 0 && g <= 10 {
					t.Errorf("%s G=%d: no reset in 3000 steps; the test exercises nothing", name, g)
				}
			}
		}
	}
}

func TestResetExactWindowSums(t *testing.T) {
	// Cycling 0.1, 0.2, 0.3 with G = 3: every window has the same true sum 0.6, but float
	// sums in different orders differ (0.1+0.2+0.3 = 0.6000000000000001, 0.2+0.3+0.1 = 0.6),
	// so a float comparison would see a spurious "strictly below" at step 4 and postpone
	// the reset. Exactly, nothing improves after step 3: reset at step 7, T = 3.
	cycle := []float64{0.1, 0.2, 0.3}
	if cycle[0]+cycle[1]+cycle[2] == cycle[1]+cycle[2]+cycle[0] {
		t.Fatal("float64 sums agree; the example shows nothing")
	}
	r := NewResetTracker(3, 3)
	for j := 0; j < 7; j++ {
		if reset := r.Observe(cycle[j%3]); reset != (j == 6) {
			t.Fatalf("step %d: reset = %v", j+1, reset)
		}
	}
	if got := r.Resets(); !reflect.DeepEqual(got, []int{3}) {
		t.Fatalf("T_i = %v, want [3]", got)
	}
}

func TestResetJSONRoundTrip(t *testing.T) {
	rng := rand.New(rand.NewSource(11))
	errs := make([]float64, 600)
	for i := range errs {
		errs[i] = 100 * float64(rng.Intn(300)) / 848
	}
	const g = 5
	wantTs, wantAt, wantT := runTracker(t, NewResetTracker(g, 3), errs)
	if len(wantTs) < 3 {
		t.Fatalf("only %d resets; pick another sequence", len(wantTs))
	}
	for cut := 0; cut <= len(errs); cut += 7 {
		r := NewResetTracker(g, 3)
		var at, tAfter []int
		for j := 0; j < cut; j++ {
			if r.Observe(errs[j]) {
				at = append(at, j+1)
			}
			tAfter = append(tAfter, r.T())
		}
		// Checkpoint by value inside a struct, as a checkpoint file would.
		blob, err := json.Marshal(struct{ Reset ResetTracker }{*r})
		if err != nil {
			t.Fatal(err)
		}
		var back struct{ Reset ResetTracker }
		if err := json.Unmarshal(blob, &back); err != nil {
			t.Fatalf("cut %d: %v\n%s", cut, err, blob)
		}
		r2 := &back.Reset
		if r2.T() != r.T() || r2.StepsSinceReset() != r.StepsSinceReset() || r2.SinceBest() != r.SinceBest() {
			t.Fatalf("cut %d: restored tracker differs", cut)
		}
		for j := cut; j < len(errs); j++ {
			if r2.Observe(errs[j]) {
				at = append(at, j+1)
			}
			tAfter = append(tAfter, r2.T())
		}
		if !reflect.DeepEqual(r2.Resets(), wantTs) || !reflect.DeepEqual(at, wantAt) || !reflect.DeepEqual(tAfter, wantT) {
			t.Fatalf("cut %d: resumed run differs from uninterrupted run", cut)
		}
	}
}

func TestResetUnmarshalRejectsInconsistentState(t *testing.T) {
	good := `{"window":3,"mean_of_last":3,"errors":[1,2,3],"best_errors":[1,2,3],` +
		`"steps_since_reset":5,"since_best":2,"total_steps":9,"resets":[3]}`
	var r ResetTracker
	if err := json.Unmarshal([]byte(good), &r); err != nil {
		t.Fatalf("valid state rejected: %v", err)
	}
	if r.T() != 3 || r.SinceBest() != 2 || r.TotalSteps() != 9 {
		t.Fatalf("restored T %d since_best %d total %d", r.T(), r.SinceBest(), r.TotalSteps())
	}
	for name, s := range map[string]string{
		"zero window":       `{"window":0,"mean_of_last":3}`,
		"too many errors":   `{"window":2,"mean_of_last":3,"errors":[1,2,3],"best_errors":[1,2],"steps_since_reset":3}`,
		"filling steps":     `{"window":3,"mean_of_last":3,"errors":[1,2],"steps_since_reset":4,"total_steps":4}`,
		"filling best":      `{"window":3,"mean_of_last":3,"errors":[1,2],"best_errors":[1,2,3],"steps_since_reset":2,"total_steps":2}`,
		"missing best":      `{"window":3,"mean_of_last":3,"errors":[1,2,3],"steps_since_reset":3,"total_steps":3}`,
		"since_best > G":    `{"window":3,"mean_of_last":3,"errors":[1,2,3],"best_errors":[1,2,3],"steps_since_reset":9,"since_best":4,"total_steps":9}`,
		"since_best>steps":  `{"window":3,"mean_of_last":3,"errors":[1,2,3],"best_errors":[1,2,3],"steps_since_reset":4,"since_best":2,"total_steps":4}`,
		"total < steps":     `{"window":3,"mean_of_last":3,"errors":[1,2,3],"best_errors":[1,2,3],"steps_since_reset":4,"since_best":1,"total_steps":3}`,
		"T below window":    `{"window":3,"mean_of_last":3,"errors":[],"steps_since_reset":0,"total_steps":9,"resets":[2]}`,
		"not a tracker":     `[1,2,3]`,
		"negative mean_of":  `{"window":3,"mean_of_last":-1}`,
		"errors wrong type": `{"window":3,"mean_of_last":3,"errors":"x"}`,
	} {
		var r ResetTracker
		if err := json.Unmarshal([]byte(s), &r); err == nil {
			t.Errorf("%s: accepted %s", name, s)
		}
	}
}

func TestResetTrackerPanics(t *testing.T) {
	mustPanic := func(name, want string, f func()) {
		t.Helper()
		defer func() {
			p := recover()
			if p == nil {
				t.Errorf("%s: no panic", name)
			} else if !strings.Contains(p.(string), want) {
				t.Errorf("%s: panic %q, want it to mention %q", name, p, want)
			}
		}()
		f()
	}
	mustPanic("window 0", "must be positive", func() { NewResetTracker(0, 3) })
	mustPanic("mean 0", "must be positive", func() { NewResetTracker(5, 0) })
	mustPanic("NaN", "finite", func() { NewResetTracker(5, 3).Observe(math.NaN()) })
	mustPanic("Inf", "finite", func() { NewResetTracker(5, 3).Observe(math.Inf(1)) })
}

func TestResetTrackerAccessors(t *testing.T) {
	r := NewResetTracker(4, 2)
	if r.Window() != 4 || r.MeanOfLast() != 2 || r.T() != 0 || !math.IsNaN(r.MovingError()) {
		t.Fatalf("fresh tracker: window %d mean_of_last %d T %d moving %v", r.Window(), r.MeanOfLast(), r.T(), r.MovingError())
	}
	for _, e := range []float64{10, 20, 30, 40, 50} {
		r.Observe(e)
	}
	if got := r.MovingError(); got != 35 { // mean of 20, 30, 40, 50
		t.Fatalf("moving error = %v, want 35", got)
	}
	rs := r.Resets()
	if rs != nil {
		t.Fatalf("Resets() = %v before any reset", rs)
	}
}

// TestQuietStepsNeverReset: from any state reached by random error sequences, the next
// QuietSteps() observations never call for a reset, whatever errors they bring (the
// meta-loop relies on this to read errors back in batches), and the bound is reached:
// with errors that never improve, the observation right after them resets.
func TestQuietStepsNeverReset(t *testing.T) {
	rng := rand.New(rand.NewSource(3))
	for trial := 0; trial < 300; trial++ {
		g := 1 + rng.Intn(6)
		tr := NewResetTracker(g, 1+rng.Intn(3))
		levels := 1 + rng.Intn(4) // few levels: many ties and plateaus
		for step := 0; step < 60; step++ {
			q := tr.QuietSteps()
			if q < 0 {
				t.Fatalf("trial %d step %d: QuietSteps %d", trial, step, q)
			}
			state, err := json.Marshal(tr)
			if err != nil {
				t.Fatal(err)
			}
			for probe := 0; probe < 3; probe++ {
				var c ResetTracker
				if err := json.Unmarshal(state, &c); err != nil {
					t.Fatal(err)
				}
				for i := 0; i < q; i++ {
					e := float64(rng.Intn(levels)) * 10
					if probe == 0 {
						e = 1000 // never improves: the slowest way to a reset
					}
					if c.Observe(e) {
						t.Fatalf("trial %d step %d: reset at observation %d of %d quiet ones (G %d)", trial, step, i+1, q, g)
					}
				}
				if probe == 0 && !c.Observe(1000) {
					t.Fatalf("trial %d step %d: no reset right after %d quiet non-improving observations (G %d)", trial, step, q, g)
				}
			}
			tr.Observe(float64(rng.Intn(levels)) * 10)
		}
	}
}
