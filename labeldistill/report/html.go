package report

// html.go: report.html, the page beside the figures: the run's facts, the accuracy table
// (the distilled labels and each baseline), the benchmark protocol's scores and the
// figures.

import (
	"fmt"
	"html/template"
	"math"
	"os"
	"path/filepath"
	"sort"
	"strings"
	"time"

	"github.com/ldtorch/ldtorch/labeldistill"
	"github.com/ldtorch/ldtorch/labeldistill/artifact"
	"github.com/ldtorch/ldtorch/labeldistill/rundir"
)

// accuracies lists the distilled labels and each baseline, and the distilled labels'
// improvement over each baseline.
func accuracies(rep *artifact.Report) (entries, improvements []accuracyEntry) {
	method := rep.Config.MethodName()
	entries = append(entries, accuracyEntry{name: "distilled (" + method + ")", mean: rep.TestMean, std: rep.TestStd, models: len(rep.TestAccuracies)})
	keys := make([]string, 0, len(rep.Baselines))
	for k := range rep.Baselines {
		keys = append(keys, k)
	}
	order := map[string]int{"true": 0, "smooth": 1, "teacher": 2}
	sort.Slice(keys, func(a, b int) bool {
		ka, kb := strings.TrimSuffix(keys[a], "_rr"), strings.TrimSuffix(keys[b], "_rr")
		if order[ka] != order[kb] {
			return order[ka] < order[kb]
		}
		return keys[a] < keys[b]
	})
	for _, k := range keys {
		b := rep.Baselines[k]
		name := strings.TrimSuffix(k, "_rr") + " labels"
		entries = append(entries, accuracyEntry{name: name, mean: b.Mean, std: b.Std, models: len(b.Accuracies)})
		improvements = append(improvements, accuracyEntry{name: "vs " + name, mean: rep.TestMean - b.Mean})
	}
	return entries, improvements
}

var page = template.Must(template.New("report").Funcs(template.FuncMap{
	"pct":  func(v float64) string { return fmt.Sprintf("%.2f", v) },
	"frac": func(v float64) string { return fmt.Sprintf("%.4f", v) },
	"signed": func(v float64) string {
		return fmt.Sprintf("%+.2f", v)
	},
	"dur": func(s float64) string { return time.Duration(math.Round(s) * float64(time.Second)).String() },
}).Parse(`<!DOCTYPE html>
<html lang="en"><head><meta charset="utf-8"><title>ldtorch report: {{.Title}}</title>
<style>body{font-family:sans-serif;max-width:1100px;margin:2em auto;padding:0 1em;color:#222}
table{border-collapse:collapse;margin:1em 0}td,th{border:1px solid #ccc;padding:.3em .7em;text-align:left}
th{background:#f3f3f3}figure{margin:2em 0}img{max-width:100%;border:1px solid #ddd}figcaption{font-size:.9em;color:#444;margin-top:.4em}
.note{color:#a40}</style></head><body>
<h1>{{.Title}}</h1>
<table>
{{range .Facts}}<tr><th>{{index . 0}}</th><td>{{index . 1}}</td></tr>
{{end}}</table>
<h2>Accuracy</h2>
<table><tr><th>labels</th><th>test accuracy (%)</th><th>std</th><th>models</th><th>distilled minus these</th></tr>
{{range $i, $e := .Entries}}<tr><td>{{$e.Name}}</td><td>{{pct $e.Mean}}</td><td>{{pct $e.Std}}</td><td>{{$e.Models}}</td><td>{{if $i}}{{signed $e.Gain}}{{end}}</td></tr>
{{end}}</table>
{{with .DDRanking}}<h2>Benchmark protocol (DD-Ranking soft-label evaluation)</h2>
<p>{{.Models}} runs of {{.Arch}} models, {{.Recipe.Epochs}} epochs (full data {{.FullDataRecipe.Epochs}}), SGD with momentum {{.Recipe.Momentum}} and weight decay {{.Recipe.WeightDecay}},
learning rate and epoch chosen on the validation split; accuracies and scores are fractions (evaluations/ddranking.json).</p>
<table><tr><th>training set</th><th>test accuracy</th><th>std</th><th>learning rates chosen</th></tr>
<tr><td>full data, hard labels</td><td>{{frac .FullData.Accuracy}}</td><td></td><td>{{index .FullDataRecipe.LRs 0}}</td></tr>
<tr><td>distilled images, hard labels</td><td>{{frac .HardLabel.Mean}}</td><td>{{frac .HardLabel.Std}}</td><td>{{.HardLabel.LRs}}</td></tr>
<tr><td>distilled images and labels</td><td>{{frac .SoftLabel.Mean}}</td><td>{{frac .SoftLabel.Std}}</td><td>{{.SoftLabel.LRs}}</td></tr>
<tr><td>random real images, full-data model's labels</td><td>{{frac .RandomSoftLabel.Mean}}</td><td>{{frac .RandomSoftLabel.Std}}</td><td>{{.RandomSoftLabel.LRs}}</td></tr>
</table>
<table><tr><th>score</th><th>mean</th><th>std</th></tr>
<tr><td>hlr (hard-label recovery: full data minus distilled images, hard labels; lower is better)</td><td>{{frac .HLR}}</td><td>{{frac .HLRStd}}</td></tr>
<tr><td>ior (improvement over random: distilled minus random images, soft labels)</td><td>{{frac .IOR}}</td><td>{{frac .IORStd}}</td></tr>
<tr><td>score ((e<sup>α</sup> − e<sup>−1</sup>)/(e − e<sup>−1</sup>), α = ½·ior − ½·hlr)</td><td>{{frac .Score}}</td><td>{{frac .ScoreStd}}</td></tr>
</table>
{{end}}{{range .Notes}}<p class="note">{{.}}</p>
{{end}}
{{range .Figures}}<figure><h2>{{.Title}}</h2><img src="{{.Src}}" alt="{{.Title}}"><figcaption>{{.Caption}}</figcaption></figure>
{{end}}
<p>Files: <a href="distilled.npz">distilled.npz</a>, <a href="report.json">report.json</a>{{if .History}}, <a href="metrics.jsonl">metrics.jsonl</a>{{end}}. Written by ldtorch {{.Version}}.</p>
</body></html>
`))

type htmlEntry struct {
	Name            string
	Mean, Std, Gain float64
	Models          int
}

type htmlFigure struct {
	Title, Caption string
	Src            string
}

func renderHTML(dir string, rep *artifact.Report, res *Result, entries, improvements []accuracyEntry) ([]byte, error) {
	cfg := rep.Config
	method := rep.Config.MethodName()
	title := fmt.Sprintf("%s on %s", method, cfg.Dataset)
	if cfg.Source != "" && cfg.Source != cfg.Dataset {
		title += " from " + cfg.Source + " base images"
	}
	title += fmt.Sprintf(", %d base examples", rep.BaseExamples)
	version := rep.LdtorchVersion
	if version == "" {
		version = "(not recorded: artifact before schema 2)"
	}
	facts := [][2]string{
		{"run", dir},
		{"method / architecture", fmt.Sprintf("%s / %s (fresh models: %s)", method, cfg.Arch, cfg.EvalArch)},
		{"target / source", cfg.Dataset + " / " + cfg.Source},
		{"epochs, meta-steps, resets", fmt.Sprintf("%d, %d, %d", rep.Epochs, rep.MetaSteps, len(rep.Resets))},
		{"best validation", fmt.Sprintf("%.2f%% after epoch %d", rep.BestValidation.Accuracy, rep.BestValidation.Epoch)},
		{"T (steps fresh models train)", fmt.Sprint(rep.T)},
		{"seed", fmt.Sprint(rep.Seed)},
		{"wall time", fmt.Sprintf("%s (meta-steps %s, %.3f s each)", time.Duration(rep.WallSeconds*float64(time.Second)).Round(time.Second), time.Duration(rep.DistillSeconds*float64(time.Second)).Round(time.Second), rep.SecondsPerStep)},
		{"versions", fmt.Sprintf("ldtorch %s, libtorch %s", version, rep.LibtorchVersion)},
	}
	facts = append(facts, [2]string{"base examples", res.Base})
	if res.Recovered >= 0 {
		facts = append(facts, [2]string{"labels whose arg-max is the true class", fmt.Sprintf("%d of %d (%.0f%%)", res.Recovered, res.BaseExamples, 100*float64(res.Recovered)/float64(res.BaseExamples))})
	}
	var hes []htmlEntry
	for i, e := range entries {
		he := htmlEntry{Name: e.name, Mean: e.mean, Std: e.std, Models: e.models}
		if i > 0 {
			he.Gain = improvements[i-1].mean
		}
		hes = append(hes, he)
	}
	var figs []htmlFigure
	for _, f := range res.Figures {
		figs = append(figs, htmlFigure{Title: f.Title, Caption: f.Caption, Src: FiguresDir + "/" + f.Name})
	}
	_, histErr := os.Stat(filepath.Join(dir, rundir.HistoryFile))
	var b strings.Builder
	err := page.Execute(&b, map[string]any{
		"Title": title, "Facts": facts, "Entries": hes, "Notes": res.Notes, "Figures": figs,
		"History": histErr == nil, "Version": labeldistill.Version, "DDRanking": res.DDRanking,
	})
	return []byte(b.String()), err
}
