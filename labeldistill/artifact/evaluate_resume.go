package artifact

// evaluate_resume.go: an evaluation under the paper's protocol (Evaluate) that stops
// (killed, interrupted, a machine's time limit) goes on, run again with the same settings,
// after the last model it scored: ConvNet-3 models on the CPU take hours for 20 models. Its
// progress is a folder beside the other evaluations, evaluations/evaluate-partial-<digest of
// the settings>/, whose state.json lists each scored model's accuracy in model order; it is
// removed when the evaluation ends. Models are recorded one at a time only where that gives
// the same bits as training them together: on the CPU, whose models run one after another
// either way (train.Mode), and not when they are saved (SaveModels).

import (
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"time"

	"github.com/ldtorch/ldtorch/labeldistill/data"
	"github.com/ldtorch/ldtorch/labeldistill/train"
	"github.com/ldtorch/ldtorch/torch"
	"github.com/ldtorch/ldtorch/torch/fileio/atomicfile"
)

const evalPartialPrefix = "evaluate-partial-"

const evalPartialFormat = "ldtorch evaluate progress 1"

// evalKey is everything an evaluation's models depend on: progress is taken only by an
// evaluation with the same key.
type evalKey struct {
	Format string `json:"format"`
	Recipe string `json:"recipe"`
	Arch   string `json:"arch"`
	// ArchSHA256: a TorchScript network's file (another file under the same name is
	// another network).
	ArchSHA256 string    `json:"arch_sha256,omitempty"`
	Optimizer  string    `json:"optimizer"`
	LR         float64   `json:"lr"`
	Momentum   float64   `json:"momentum"`
	Steps      int       `json:"steps"`
	Models     int       `json:"models"`
	Batch      int       `json:"batch"`
	RR         bool      `json:"rr"`
	Seed       int64     `json:"seed"`
	Device     string    `json:"device"`
	AllowTF32  bool      `json:"allow_tf32"`
	Threads    int       `json:"threads"` // the thread count changes floating-point results
	StepLRs    []float32 `json:"step_lrs,omitempty"`
	// Distilled digests the images and labels trained on; Test the test split.
	Distilled string `json:"distilled_sha256"`
	Test      string `json:"test_sha256"`
}

// evalState is state.json: each scored model's accuracy in model order (null: diverged).
type evalState struct {
	Key      evalKey    `json:"key"`
	Accuracy []*float64 `json:"accuracies"`
	Seconds  float64    `json:"seconds"` // wall time of the evaluation up to its last record
}

// evalProgress is an evaluation's progress folder; the zero value (dir "") keeps nothing.
type evalProgress struct {
	dir    string
	unlock func()
	state  evalState
	start  time.Time
	onNote func(string)
	warned bool
}

// openEvalProgress finds or makes the progress folder of ec's evaluation under evalDir
// (archSHA256: the network file's, nets.Net.FileSHA256). A folder that cannot be made is a
// note, and the evaluation keeps nothing.
func openEvalProgress(evalDir string, art *Artifact, test *data.Split, ec EvalConfig, archSHA256 string) (*evalProgress, error) {
	key := evalKey{Format: evalPartialFormat, Recipe: ec.Recipe, Arch: ec.Arch, ArchSHA256: archSHA256, Optimizer: ec.Optimizer, LR: ec.LR,
		Momentum: ec.Momentum, Steps: ec.Steps, Models: ec.Models, Batch: ec.Batch, RR: *ec.RR, Seed: ec.Seed,
		Device: ec.Device, AllowTF32: ec.AllowTF32, Threads: torch.NumThreads(),
		Distilled: distilledDigest(art, nil), Test: splitsDigest(test)}
	if ec.Recipe == RecipeDD {
		key.StepLRs = art.StepLRs
	}
	p := &evalProgress{start: time.Now(), onNote: ec.Notes, state: evalState{Key: key}}
	dir, unlock, raw, err := openKeyedProgress(evalDir, evalPartialPrefix, key)
	if err != nil {
		if le := (*atomicfile.LockedError)(nil); errors.As(err, &le) {
			return nil, err // the same evaluation is running
		}
		p.note(fmt.Sprintf("warning: %v; a stopped evaluation will start again", err))
		return p, nil
	}
	p.dir, p.unlock = dir, unlock
	if raw == nil {
		return p, nil
	}
	var st evalState
	want, _ := json.Marshal(key)
	if json.Unmarshal(raw, &st) != nil || len(st.Accuracy) > ec.Models {
		p.note(fmt.Sprintf("%s is unreadable: its models are trained again", p.statePath()))
		return p, nil
	}
	if got, _ := json.Marshal(st.Key); string(got) != string(want) {
		p.note(fmt.Sprintf("%s records other settings: its models are trained again", p.statePath()))
		return p, nil
	}
	for i, a := range st.Accuracy {
		if a != nil && !(*a >= 0 && *a <= 100) {
			p.note(fmt.Sprintf("%s: model %d's accuracy %v is not a percentage: its models are trained again", p.statePath(), i, *a))
			return p, nil
		}
	}
	p.state = st
	if n := len(st.Accuracy); n > 0 {
		p.note(fmt.Sprintf("resuming: %d of the %d models were scored by an earlier, stopped run of this evaluation (%s)", n, ec.Models, p.dir))
	}
	return p, nil
}

func (p *evalProgress) statePath() string { return filepath.Join(p.dir, progressStateFile) }

func (p *evalProgress) note(s string) {
	if p.onNote != nil {
		p.onNote(s)
	}
}

// close releases the progress folder.
func (p *evalProgress) close() {
	if p.unlock != nil {
		p.unlock()
		p.unlock = nil
	}
}

// accuracies are the models scored earlier (NaN: diverged), in model order.
func (p *evalProgress) accuracies() []float64 { return train.FromNullable(p.state.Accuracy) }

// scored records models scored after those recorded (train.Trainer.Scored); a failure to
// save is a warning, given once.
func (p *evalProgress) scored(_ int, accs []float64) error {
	p.state.Accuracy = append(p.state.Accuracy, train.Nullable(accs)...)
	if p.dir == "" {
		return nil
	}
	st := p.state
	st.Seconds += time.Since(p.start).Seconds()
	b, err := json.MarshalIndent(st, "", "  ")
	if err == nil {
		err = atomicfile.WriteFile(p.statePath(), append(b, '\n'))
	}
	if err != nil && !p.warned {
		p.warned = true
		p.note(fmt.Sprintf("warning: keeping the evaluation's progress: %v", err))
	}
	return nil
}

// finish removes the progress folder once the evaluation has ended.
func (p *evalProgress) finish() error {
	if p.dir == "" {
		return nil
	}
	if err := os.RemoveAll(p.dir); err != nil {
		return fmt.Errorf("removing the finished evaluation's progress %s: %w", p.dir, err)
	}
	os.Remove(filepath.Dir(p.dir)) // evaluations/, when nothing else is in it
	return nil
}
