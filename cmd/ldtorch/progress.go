// progress.go: showing labeldistill.Progress on stderr: a progress bar over meta-steps on a
// terminal, otherwise one plain line every ~10 seconds and after every validation.

package main

import (
	"fmt"
	"io"
	"math"
	"strings"
	"time"

	"github.com/schollz/progressbar/v3"

	"github.com/ldtorch/ldtorch/labeldistill"
)

// plainEvery is the interval between plain progress lines.
const plainEvery = 10 * time.Second

type progress struct {
	w     io.Writer
	tty   bool
	quiet bool
	start time.Time
	last  time.Time // last plain line
	bar   *progressbar.ProgressBar
	phase string
	step  int
	tag   string // said before each line: which of the runs a sweep --together steps at once
}

func newProgress(w io.Writer, tty, quiet bool) *progress {
	now := time.Now()
	return &progress{w: w, tty: tty, quiet: quiet, start: now, last: now}
}

// status is the one-line state of the meta-loop.
func status(p labeldistill.Progress) string {
	return fmt.Sprintf("epoch %d/%d step %d/%d loss %s err %s resets %d T %d val %s",
		p.Epoch, p.Epochs, p.Step, p.TotalSteps, num(p.LabelLoss, "%.3g"), pct(p.MovingError),
		p.Resets, p.T, pct(p.ValidationAccuracy))
}

func num(v float64, format string) string {
	if math.IsNaN(v) || math.IsInf(v, 0) {
		return "-"
	}
	return fmt.Sprintf(format, v)
}

func pct(v float64) string {
	if math.IsNaN(v) || math.IsInf(v, 0) {
		return "-"
	}
	return fmt.Sprintf("%.1f%%", v)
}

// update receives one report from Distill.
func (pr *progress) update(p labeldistill.Progress) {
	pr.step = max(pr.step, p.Step)
	if strings.HasPrefix(p.Message, "warning") { // shown even with --quiet
		pr.finishBar()
		pr.line(p.Message)
		return
	}
	if pr.quiet {
		return
	}
	switch p.Phase {
	case "distill", "validate":
		if pr.tty {
			pr.barUpdate(p)
			return
		}
		if p.Phase == "validate" || time.Since(pr.last) >= plainEvery {
			pr.line(status(p))
		}
	default: // "test", "baseline" and anything later
		pr.finishBar()
		if p.Total > 0 {
			// The phase's models (test, baseline step search and test, teacher): a line
			// when a part starts, then every plainEvery, and at its end.
			key := p.Phase + " " + p.Message
			if key != pr.phase || p.Done == p.Total || time.Since(pr.last) >= plainEvery {
				what := "final test"
				if p.Phase == "baseline" {
					what = "baseline " + p.Message
				}
				// Units: training steps (and for test models, scoring blocks of 256 images).
				pr.line(fmt.Sprintf("%s: %.0f%% (%d/%d)", what, 100*float64(p.Done)/float64(p.Total), p.Done, p.Total))
			}
			pr.phase = key
			return
		}
		msg := p.Phase
		switch p.Phase {
		case "test":
			msg = "final test: " + p.Message
		case "baseline":
			// A baseline's start is its bare name; a message about it ("true: the result
			// finished before the resume ...") is shown as it is.
			msg = "baseline " + p.Message
			if !strings.Contains(p.Message, ":") {
				msg += ": step search and test models"
			}
		default:
			if p.Message != "" {
				msg += ": " + p.Message
			}
		}
		pr.line(msg)
	}
	pr.phase = p.Phase
}

// evalSteps shows the progress of `ldtorch evaluate`: training steps of all its models,
// a line every plainEvery and at the end.
func (pr *progress) evalSteps(done, total int) {
	if pr.quiet || (done != total && time.Since(pr.last) < plainEvery) {
		return
	}
	pr.line(fmt.Sprintf("%.0f%% (%d/%d training steps and scoring blocks of the models)", 100*float64(done)/float64(total), done, total))
}

// stageEpochs shows the progress of `ldtorch evaluate --protocol ddranking`: each
// training's stage and epochs, a line when a stage starts, every plainEvery and when it ends.
func (pr *progress) stageEpochs(stage string, done, total int) {
	if pr.quiet {
		return
	}
	if stage != pr.phase || done == total || time.Since(pr.last) >= plainEvery {
		pr.phase = stage
		pr.line(fmt.Sprintf("%s: epoch %d/%d", stage, done, total))
	}
}

func (pr *progress) barUpdate(p labeldistill.Progress) {
	if pr.bar == nil {
		if p.TotalSteps <= 0 {
			return
		}
		pr.bar = progressbar.NewOptions64(int64(p.TotalSteps),
			progressbar.OptionSetWriter(pr.w),
			progressbar.OptionSetDescription("distilling"),
			progressbar.OptionShowCount(),
			progressbar.OptionSetPredictTime(true),
			progressbar.OptionSetElapsedTime(true),
			progressbar.OptionThrottle(200*time.Millisecond),
			progressbar.OptionSetWidth(30), // shrinks to fit narrow terminals
			progressbar.OptionShowDescriptionAtLineEnd(),
			progressbar.OptionSetRenderBlankState(true),
		)
	}
	pr.bar.Describe(fmt.Sprintf("epoch %d/%d loss %s err %s resets %d T %d val %s",
		p.Epoch, p.Epochs, num(p.LabelLoss, "%.3g"), pct(p.MovingError), p.Resets, p.T, pct(p.ValidationAccuracy)))
	_ = pr.bar.Set64(int64(p.Step))
	if p.Phase == "validate" {
		// Keep a record of every validation above the bar.
		_ = pr.bar.Clear()
		fmt.Fprintf(pr.w, "validation after epoch %d: %s (T %d)\n", p.Epoch, pct(p.ValidationAccuracy), p.T)
		_ = pr.bar.RenderBlank()
		_ = pr.bar.Set64(int64(p.Step))
	}
}

func (pr *progress) finishBar() {
	if pr.bar != nil {
		_ = pr.bar.Finish()
		fmt.Fprintln(pr.w)
		pr.bar = nil
	}
}

// line prints a plain line with the elapsed time.
func (pr *progress) line(msg string) {
	fmt.Fprintf(pr.w, "[%s] %s%s\n", elapsed(time.Since(pr.start)), pr.tag, msg)
	pr.last = time.Now()
}

// note prints a line unless quiet.
func (pr *progress) note(format string, args ...any) {
	if !pr.quiet {
		pr.line(fmt.Sprintf(format, args...))
	}
}

// message prints a library's note unless quiet, and its warnings ("warning: …") always,
// as update does.
func (pr *progress) message(s string) {
	if strings.HasPrefix(s, "warning") {
		pr.line(s)
		return
	}
	pr.note("%s", s)
}

// done ends the progress display (after success or failure).
func (pr *progress) done() {
	if pr.bar != nil {
		_ = pr.bar.Exit()
		fmt.Fprintln(pr.w)
		pr.bar = nil
	}
}

// elapsed formats a duration as 1h02m03s / 2m03s / 3.2s.
func elapsed(d time.Duration) string {
	switch {
	case d >= time.Hour:
		return fmt.Sprintf("%dh%02dm%02ds", int(d.Hours()), int(d.Minutes())%60, int(d.Seconds())%60)
	case d >= time.Minute:
		return fmt.Sprintf("%dm%02ds", int(d.Minutes()), int(d.Seconds())%60)
	}
	return fmt.Sprintf("%.1fs", d.Seconds())
}
