// flexibility.go: `ldtorch study flexibility --distilled DIR --versus DD_DIR`: the paper's
// flexibility figure, the studies of learnt labels beside those of method dd, written to
// DIR/studies/flexibility.json and .png.

package main

import (
	"encoding/json"
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"strings"
	"text/tabwriter"

	"github.com/urfave/cli/v2"

	"github.com/ldtorch/ldtorch/labeldistill/artifact"
	"github.com/ldtorch/ldtorch/labeldistill/config"
	"github.com/ldtorch/ldtorch/labeldistill/report"
	"github.com/ldtorch/ldtorch/labeldistill/study"
	"github.com/ldtorch/ldtorch/torch/fileio/atomicfile"
)

// flexibilityAction runs study flexibility (studyAction has refused the other studies'
// flags).
func (e *env) flexibilityAction(c *cli.Context, dir string) error {
	versus := c.String("versus")
	if versus == "" {
		return usageErrorf("--versus DD_DIR is required: study flexibility puts the artifact of --distilled beside a method dd artifact (ldtorch distill --method dd)")
	}
	sc, err := studyConfig(c)
	if err != nil {
		return err
	}
	ld, err := readStudyArtifact("distilled", dir)
	if err != nil {
		return err
	}
	dd, err := readStudyArtifact("versus", versus)
	if err != nil {
		return err
	}
	lc, dc := ld.Report.Config, dd.Report.Config
	if lc.Method == config.MethodDD {
		return usageErrorf("--distilled: %s is a method dd artifact; study flexibility takes learnt labels as --distilled and the method dd artifact as --versus", dir)
	}
	if dc.Method != config.MethodDD || dd.StepLRs == nil {
		return usageErrorf("--versus: %s was distilled with method %s (%s), not method dd; study flexibility puts --distilled beside Wang et al.'s DD (ldtorch distill --method dd)", versus, dc.Method, dc.MethodName())
	}
	if lc.Dataset != dc.Dataset {
		return usageErrorf("--versus: %s was distilled for %s and --distilled %s for %s; the figure compares the two on one dataset", versus, dc.Dataset, dir, lc.Dataset)
	}
	ldCfg, err := studySettle(c, ld)
	if err != nil {
		return err
	}
	ddCfg, err := studySettle(c, dd)
	if err != nil {
		return err
	}
	for _, d := range []struct{ flag, dir string }{{"--distilled", dir}, {"--versus", versus}} {
		unlock, err := lockOut(d.flag, d.dir)
		if err != nil {
			return err
		}
		defer unlock()
	}
	pr := newProgress(e.stderr, false, c.Bool("quiet"))
	var notes []string
	ldStudies, err := e.flexStudies(c, pr, dir, ld, ldCfg, study.FlexKinds, sc, &notes)
	if err != nil {
		return err
	}
	ddStudies, err := e.flexStudies(c, pr, versus, dd, ddCfg, study.FlexVersusKinds, sc, &notes)
	if err != nil {
		return err
	}
	f, err := study.NewFlexibility(ldStudies, ddStudies, lc, dc)
	if err != nil {
		return failuref("%v", err)
	}
	f.Artifact, f.Versus = dir, versus
	f.Notes = append(notes, f.Notes...)
	b, err := json.MarshalIndent(f, "", "  ")
	if err != nil {
		return failuref("%v", err)
	}
	png, err := report.FlexibilityFigure(f)
	if err != nil {
		return failuref("figure: %v", err)
	}
	jsonPath, pngPath := filepath.Join(dir, "studies", flexibilityStudy+".json"), filepath.Join(dir, "studies", flexibilityStudy+".png")
	if err := os.MkdirAll(filepath.Join(dir, "studies"), 0o755); err != nil {
		return failuref("%v", err)
	}
	if err := atomicfile.WriteFile(jsonPath, append(b, '\n')); err != nil {
		return failuref("%v", err)
	}
	if err := atomicfile.WriteFile(pngPath, png); err != nil {
		return failuref("%v", err)
	}
	fmt.Fprintf(e.stdout, "flexibility of %s (%s) beside %s (%s) on %s\n", dir, f.MethodName, versus, f.VersusName, f.Dataset)
	for _, pn := range f.Panels {
		fmt.Fprintf(e.stdout, "\n%s\n", pn.Title)
		tw := tabwriter.NewWriter(e.stdout, 0, 0, 3, ' ', 0)
		fmt.Fprintln(tw, "series\tsetting\tsteps\ttest accuracy (mean ± std)\tmodels")
		for _, s := range pn.Series {
			for _, p := range s.Points {
				acc := fmt.Sprintf("%.2f%% ± %.2f", p.Mean, p.Std)
				if p.Models == 0 {
					acc = "diverged"
				}
				own := ""
				if p.Own {
					own = " *"
				}
				fmt.Fprintf(tw, "%s\t%s%s\t%d\t%s\t%d\n", s.Name, p.Label, own, p.Steps, acc, p.Models)
			}
		}
		tw.Flush()
	}
	fmt.Fprintln(e.stdout, "\n* the method's own recipe")
	for _, n := range f.Notes {
		fmt.Fprintf(e.stdout, "note: %s\n", n)
	}
	fmt.Fprintf(e.stdout, "wrote %s and %s\n", jsonPath, pngPath)
	return nil
}

// flexStudies returns the studies kinds of the artifact in dir: each read from
// dir/studies/KIND.json (what ldtorch study KIND wrote) or dir/studies/flexibility/KIND.json
// (what an earlier study flexibility ran) when it fits the artifact and the settings this
// command runs (study.Reusable), else run. A study it runs goes to dir/studies/KIND.json
// when there is none, else beside it under studies/flexibility/: a study of other
// settings, seed or model count, or of the artifact the folder held before, is never
// overwritten. notes hears which were reused, which ran, and why.
func (e *env) flexStudies(c *cli.Context, pr *progress, dir string, art *artifact.Artifact, cfg config.Config, kinds []string, sc study.Config, notes *[]string) (map[string]*study.Study, error) {
	out := map[string]*study.Study{}
	var d *study.Data
	for _, kind := range kinds {
		jsonName, pngName := study.FileNames(kind)
		own := filepath.Join(dir, jsonName)
		ours, oursPNG := filepath.Join(dir, "studies", flexibilityStudy, kind+".json"), filepath.Join(dir, "studies", flexibilityStudy, kind+".png")
		var why []string
		ownExists := false
		for _, path := range []string{own, ours} {
			st, err := study.ReadFile(path)
			w := ""
			switch {
			case errors.Is(err, fs.ErrNotExist):
				continue
			case err != nil:
				w = err.Error()
			default:
				w = study.Reusable(st, kind, art, sc)
			}
			ownExists = ownExists || path == own
			if w == "" {
				other := ""
				if o := study.OtherSettings(st, kind, art, sc); o != "" {
					other = "; " + o
				}
				*notes = append(*notes, fmt.Sprintf("reused %s (%d models per setting, seed %d%s)", path, st.Models, st.Seed, other))
				out[kind] = st
				break
			}
			why = append(why, fmt.Sprintf("%s not reused: %s", path, strings.TrimSuffix(w, ".")))
		}
		if out[kind] != nil {
			continue
		}
		if d == nil {
			var err error
			if d, err = e.studyData(c, pr, kind, dir, art, cfg); err != nil {
				return nil, err
			}
		}
		st, err := runStudy(c, kind, art, d, sc, pr, cfg, dir)
		if err != nil {
			var ee *exitError
			if errors.As(err, &ee) && ee.code == exitInterrupted {
				return nil, &exitError{code: exitInterrupted, msg: fmt.Sprintf("interrupted during the %s study of %s; the studies finished before it are written (the same command reuses them), flexibility.json and .png are not", kind, dir)}
			}
			return nil, err
		}
		path, png := own, filepath.Join(dir, pngName)
		if ownExists { // another study of this kind: kept, this one written beside it
			path, png = ours, oursPNG
		}
		if err := writeStudyAt(path, png, st); err != nil {
			return nil, err
		}
		if len(why) == 0 {
			why = []string{"none yet"}
		}
		*notes = append(*notes, fmt.Sprintf("ran %s study of %s into %s (%s)", kind, dir, path, strings.Join(why, "; ")))
		out[kind] = st
	}
	return out, nil
}
