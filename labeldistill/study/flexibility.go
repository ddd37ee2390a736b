package study

// flexibility.go: the paper's flexibility figure (Figure "Datasets distilled with LD are
// more flexible than those distilled with DD") as data: the studies of an artifact of
// learnt labels (steps, optimizer, arch) beside those of a method dd artifact (steps, lr,
// order, arch), in three panels: the number of training steps, the optimisation settings,
// and the architecture.

import (
	"errors"
	"fmt"
	"math"
	"slices"
	"strings"

	"github.com/ldtorch/ldtorch/labeldistill/artifact"
	"github.com/ldtorch/ldtorch/labeldistill/config"
)

// Flexibility kinds: the studies the figure takes from each artifact.
var (
	FlexKinds       = []string{Steps, Optimizer, Arch}
	FlexVersusKinds = []string{Steps, LR, Order, Arch}
)

// NewFlexibility builds the figure's panels from the studies of an artifact of learnt
// labels (FlexKinds) and of a method dd artifact (FlexVersusKinds), both of one dataset.
// The optimisation panel takes, from the optimizer study, the setting of each optimiser
// whose learning rate is nearest (on a log scale) to its usual one: Adam at the labels'
// eval_lr (their own recipe), SGD at 0.01 with each momentum. ldCfg and ddCfg are the two
// artifacts' configurations (report.json): the architectures they were distilled with.
func NewFlexibility(ld, dd map[string]*Study, ldCfg, ddCfg config.Config) (*Flexibility, error) {
	evalLR := ldCfg.EvalLR
	for _, k := range FlexKinds {
		st := ld[k]
		switch {
		case st == nil:
			return nil, fmt.Errorf("flexibility: no %s study of the distilled labels", k)
		case st.Study != k:
			return nil, fmt.Errorf("flexibility: a %s study given as the %s study", st.Study, k)
		case st.Method == config.MethodDD:
			return nil, errors.New("flexibility: the first artifact's studies are of method dd; it takes learnt labels beside DD")
		}
	}
	for _, k := range FlexVersusKinds {
		st := dd[k]
		switch {
		case st == nil:
			return nil, fmt.Errorf("flexibility: no %s study of the dd artifact", k)
		case st.Study != k:
			return nil, fmt.Errorf("flexibility: a %s study given as the %s study", st.Study, k)
		case st.Method != config.MethodDD || !st.DD():
			return nil, fmt.Errorf("flexibility: the %s study to compare with is of method %s (%s); it must be a method dd artifact's, trained with dd's own recipe", k, st.Method, methodName(st))
		}
	}
	if a, b := ld[Steps].Dataset, dd[Steps].Dataset; a != b {
		return nil, fmt.Errorf("flexibility: the labels were distilled for %s, the dd images for %s", a, b)
	}
	f := &Flexibility{Study: "flexibility", Artifact: ld[Steps].Artifact, Versus: dd[Steps].Artifact, Dataset: ld[Steps].Dataset,
		MethodName: methodName(ld[Steps]), VersusName: methodName(dd[Steps]), StudiesUsed: ld, VersusStudies: dd}
	lname, dname := f.MethodName, f.VersusName

	// Steps: each method's step counts as fractions of its own T.
	steps := Panel{Name: FlexSteps, Title: "(a) training steps", XLabel: "training steps ÷ T (T: the method's own step count)"}
	for _, src := range []struct {
		st   *Study
		name string
	}{{ld[Steps], lname}, {dd[Steps], dname}} {
		s := Series{Name: fmt.Sprintf("%s (T = %d)", src.name, src.st.T), Method: src.name, Labels: "distilled"}
		for _, x := range src.st.Settings {
			p := point(x, float64(x.Steps)/float64(max(1, src.st.T)))
			p.Own = x.Steps == src.st.T
			s.Points = append(s.Points, p)
		}
		steps.Series = append(steps.Series, s)
	}

	// Optimisation: LD's optimisers at their usual rates; DD's mean step size and shuffles.
	opt := Panel{Name: FlexOptimisation, Title: "(b) optimisation settings", XLabel: "setting"}
	ls := Series{Name: lname + ": off-the-shelf optimisers", Method: lname, Labels: "distilled"}
	for _, g := range []struct {
		opt      string
		momentum float64
		lr       float64
	}{{"adam", 0, evalLR}, {"sgd", 0, 0.01}, {"sgd", 0.9, 0.01}} {
		best := -1
		for i, x := range ld[Optimizer].Settings {
			if x.Optimizer != g.opt || x.Momentum != g.momentum {
				continue
			}
			if best < 0 || math.Abs(math.Log(x.LR/g.lr)) < math.Abs(math.Log(ld[Optimizer].Settings[best].LR/g.lr)) {
				best = i
			}
		}
		if best < 0 {
			f.Notes = append(f.Notes, fmt.Sprintf("the optimizer study has no %s setting with momentum %g", g.opt, g.momentum))
			continue
		}
		x := ld[Optimizer].Settings[best]
		p := point(x, 0)
		p.Own = g.opt == "adam" && x.LR == evalLR
		if p.Own {
			p.Label = fmt.Sprintf("%s: Adam lr %g (own recipe)", lname, x.LR)
		} else {
			p.Label = lname + ": " + x.Label
		}
		ls.Points = append(ls.Points, p)
	}
	ds := Series{Name: dname + ": its recipe changed", Method: dname, Labels: "distilled"}
	for i, x := range dd[LR].Settings {
		p := point(x, 0)
		p.Own = i == 0
		p.Label = dname + ": " + x.Label
		if p.Own {
			p.Label = dname + ": learnt step sizes, fixed order (own recipe)"
		}
		ds.Points = append(ds.Points, p)
	}
	for _, x := range dd[Order].Settings {
		if x.Order == OrderFixed {
			continue // the own recipe, as in the lr study
		}
		p := point(x, 0)
		p.Label = dname + ": " + x.Label
		ds.Points = append(ds.Points, p)
	}
	for i := range ls.Points {
		ls.Points[i].X = float64(i)
	}
	for i := range ds.Points {
		ds.Points[i].X = float64(len(ls.Points) + i)
	}
	opt.Series = []Series{ls, ds}

	// Architecture: each architecture of either study.
	arch := Panel{Name: FlexArch, Title: "(c) architectures", XLabel: "architecture of the fresh models"}
	var archs []string
	for _, st := range []*Study{ld[Arch], dd[Arch]} {
		for _, x := range st.Settings {
			if !slices.Contains(archs, x.Arch) {
				archs = append(archs, x.Arch)
			}
		}
	}
	add := func(st *Study, name, labels string, distilledWith string) {
		s := Series{Name: name, Method: methodName(st), Labels: labels}
		for _, x := range st.Settings {
			if x.Labels != labels {
				continue
			}
			p := point(x, float64(slices.Index(archs, x.Arch)))
			p.Label, p.Own = x.Arch, x.Arch == distilledWith && labels == "distilled"
			s.Points = append(s.Points, p)
		}
		if len(s.Points) > 0 {
			arch.Series = append(arch.Series, s)
		}
	}
	ldArch, ddArch := ldCfg.Arch, ddCfg.Arch
	add(ld[Arch], fmt.Sprintf("%s (distilled with %s)", lname, ldArch), "distilled", ldArch)
	add(dd[Arch], fmt.Sprintf("%s (distilled with %s)", dname, ddArch), "distilled", ddArch)
	add(ld[Arch], "true labels of the same base images", "true", "")
	f.Panels = []Panel{steps, opt, arch}
	return f, nil
}

// point is a study setting as a point at x.
func point(s Setting, x float64) Point {
	return Point{Label: s.Label, X: x, Steps: s.Steps, Mean: s.Mean, Std: s.Std, Models: len(s.Accuracies), Diverged: s.Diverged}
}

func methodName(st *Study) string {
	if st.MethodName != "" {
		return st.MethodName
	}
	return st.Method
}

// Reusable says why st, read from an artifact's studies folder, does not fit the artifact
// art and the study config sc, or "" when it fits: another study, method, dataset, T,
// models or seed; a study of another distilled.npz (a folder overwritten by a new run, a
// file copied in) or of one it cannot tell (written before studies recorded theirs); a
// study of a method dd artifact not trained with its own recipe. (Its settings may be
// others than sc runs, a grid of the user's own: OtherSettings says how.)
func Reusable(st *Study, kind string, art *artifact.Artifact, sc Config) string {
	rep := art.Report
	cfg := rep.Config
	switch {
	case st.Study != kind:
		return fmt.Sprintf("it holds a %q study", st.Study)
	case st.Method != cfg.Method || st.Dataset != cfg.Dataset || st.BaseExamples != cfg.BaseExamples || st.T != rep.T:
		return fmt.Sprintf("it was run on method %s, %s, %d base examples, T = %d; the artifact is method %s, %s, %d, T = %d",
			st.Method, st.Dataset, st.BaseExamples, st.T, cfg.Method, cfg.Dataset, cfg.BaseExamples, rep.T)
	case isDD(art) && slices.Contains(DDKinds, kind) && !st.DD():
		return "it trained with the standard recipe, not method dd's own"
	case sc.Models != 0 && st.Models != sc.Models:
		return fmt.Sprintf("it trained %d models per setting, not %d", st.Models, sc.Models)
	case sc.Seed != 0 && st.Seed != sc.Seed:
		return fmt.Sprintf("its seed is %d, not %d", st.Seed, sc.Seed)
	case len(st.Settings) == 0:
		return "it has no settings"
	}
	want, _, err := plan(kind, art, sc)
	if err != nil {
		return err.Error()
	}
	switch {
	case st.DistilledSHA256 == "":
		return "it records no distilled.npz (written before studies recorded theirs), so it may be another artifact's"
	case st.DistilledSHA256 != want.DistilledSHA256:
		return fmt.Sprintf("it scored another distilled.npz (sha256 %.12s, this artifact's %.12s)", st.DistilledSHA256, want.DistilledSHA256)
	case st.Models != want.Models:
		return fmt.Sprintf("it trained %d models per setting, not %d", st.Models, want.Models)
	case st.Seed != want.Seed:
		return fmt.Sprintf("its seed is %d, not %d", st.Seed, want.Seed)
	}
	return ""
}

// OtherSettings says how st's settings differ from those the study of kind runs on art
// with sc ("" when they are the same): "its settings (T+0, T+5) are not the steps study's
// (T-50, T-20, …)".
func OtherSettings(st *Study, kind string, art *artifact.Artifact, sc Config) string {
	_, settings, err := plan(kind, art, sc)
	if err != nil || sameSettings(st.Settings, settings) {
		return ""
	}
	return fmt.Sprintf("its settings (%s) are not the %s study's (%s): drawn as they are", settingLabels(st.Settings), kind, settingLabels(settings))
}

// sameSettings reports whether two lists hold the same settings in the same order (what
// each trains, not its results).
func sameSettings(a, b []Setting) bool {
	if len(a) != len(b) {
		return false
	}
	for i := range a {
		x, y := a[i], b[i]
		// rr-standard's searched setting takes its step count (and label) from the search.
		searched := x.ValidationErrors != nil || y.ValidationErrors != nil
		if (!searched && (x.Label != y.Label || x.Steps != y.Steps)) || x.Labels != y.Labels || x.Arch != y.Arch || x.Optimizer != y.Optimizer ||
			x.LR != y.LR || x.Momentum != y.Momentum || x.RR != y.RR || x.Recipe != y.Recipe || x.StepSizes != y.StepSizes || x.Order != y.Order {
			return false
		}
	}
	return true
}

// settingLabels lists settings for a message: "T-50, T-20, T+0" (at most 8, then "…").
func settingLabels(ss []Setting) string {
	var out []string
	for i, s := range ss {
		if i == 8 {
			out = append(out, fmt.Sprintf("… %d in all", len(ss)))
			break
		}
		out = append(out, s.Label)
	}
	return strings.Join(out, ", ")
}
