package artifact

// ddranking_resume.go: an evaluation under the DD-Ranking protocol that stops (killed,
// interrupted, a machine's time limit) goes on from where it was when it is run again with
// the same settings. Its progress is a folder beside ddranking.json,
// evaluations/ddranking-partial-<digest of the settings>/: state.json records each finished
// training (one learning rate of one training set for a group of models) and training.npz
// the training under way (train.EpochCheckpoint); the full-data model's training is saved
// beside its cache entry, where another evaluation needing the same model finds it. The
// folder is removed when ddranking.json is written. An evaluation with other settings has
// another folder: nothing of one is used by another.

import (
	"crypto/sha256"
	"encoding/binary"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"io/fs"
	"math"
	"os"
	"path/filepath"
	"time"

	"github.com/ldtorch/ldtorch/labeldistill/train"
	"github.com/ldtorch/ldtorch/torch/fileio/atomicfile"
	"github.com/ldtorch/ldtorch/torch/fileio/boundedread"
)

// DDRankingCheckpointEvery is how often, by default, a training under way is saved.
const DDRankingCheckpointEvery = 5 * time.Minute

// ddrPartialPrefix starts the name of an evaluation's progress folder.
const ddrPartialPrefix = "ddranking-partial-"

// ddrKey is everything an evaluation's trainings depend on: a progress folder is resumed
// only by an evaluation with the same key.
type ddrKey struct {
	Format    string          `json:"format"`
	Dataset   string          `json:"dataset"`
	Arch      string          `json:"arch"`
	Models    int             `json:"models"`
	Seed      int64           `json:"seed"`
	Device    string          `json:"device"`
	AllowTF32 bool            `json:"allow_tf32"`
	Syn       DDRankingRecipe `json:"recipe"`
	Full      DDRankingRecipe `json:"full_data_recipe"`
	Augment   string          `json:"augment"`
	// Distilled digests the images and labels evaluated and the hard labels drawn from them;
	// Data the target set, validation and test splits; Group is how many models train
	// together (train.MaxTogether).
	Distilled string `json:"distilled_sha256"`
	Data      string `json:"data_sha256"`
	Group     int    `json:"group"`
}

const ddrPartialFormat = "ldtorch ddranking progress 1"

// ddrTrained is one finished training's outcome per model (null: diverged before its
// first validation).
type ddrTrained struct {
	Validation []*float64 `json:"validation"`
	Epochs     []int      `json:"epochs"`
	Test       []*float64 `json:"test"`
}

// ddrState is state.json.
type ddrState struct {
	Key     ddrKey                `json:"key"`
	Done    map[string]ddrTrained `json:"done"`
	Seconds float64               `json:"seconds"` // wall time of the evaluation up to its last save
}

// ddrProgress is an evaluation's progress folder; the zero value (dir "") keeps nothing.
type ddrProgress struct {
	dir     string
	every   time.Duration
	state   ddrState
	resumed bool // something came from an earlier part
	start   time.Time
	onNote  func(string)
	unlock  func() // releases the folder's lock (nil: none held)
}

// close releases the progress folder.
func (p *ddrProgress) close() {
	if p.unlock != nil {
		p.unlock()
		p.unlock = nil
	}
}

// openProgress finds or makes the progress folder of key under evalDir.
func openProgress(evalDir string, key ddrKey, every time.Duration, note func(string)) (*ddrProgress, error) {
	p := &ddrProgress{every: every, start: time.Now(), onNote: note, state: ddrState{Key: key, Done: map[string]ddrTrained{}}}
	if every < 0 {
		return p, nil
	}
	var raw []byte
	var err error
	if p.dir, p.unlock, raw, err = openKeyedProgress(evalDir, ddrPartialPrefix, key); err != nil {
		return nil, err
	}
	if raw == nil {
		return p, nil
	}
	var st ddrState
	want, _ := json.Marshal(key)
	if json.Unmarshal(raw, &st) != nil || st.Done == nil {
		p.note(fmt.Sprintf("%s is unreadable: its trainings are done again", p.statePath()))
		return p, nil
	}
	if got, _ := json.Marshal(st.Key); string(got) != string(want) {
		p.note(fmt.Sprintf("%s records other settings: its trainings are done again", p.statePath()))
		return p, nil
	}
	p.state = st
	if n := len(st.Done); n > 0 {
		p.resumed = true
		p.note(fmt.Sprintf("resuming: %d trainings finished earlier are taken from %s", n, p.dir))
	}
	return p, nil
}

// openKeyedProgress makes (or finds) the progress folder of an evaluation with settings key
// under evalDir, named prefix and a digest of key, and locks it; state is its state.json
// (nil when there is none; unreadable: an empty, non-nil slice).
func openKeyedProgress(evalDir, prefix string, key any) (dir string, unlock func(), state []byte, err error) {
	b, err := json.Marshal(key)
	if err != nil {
		return "", nil, nil, err
	}
	sum := sha256.Sum256(b)
	dir = filepath.Join(evalDir, prefix+hex.EncodeToString(sum[:8]))
	if err := atomicfile.EnsureWritableDir(dir); err != nil {
		return "", nil, nil, fmt.Errorf("cannot keep the evaluation's progress in %s: %w", dir, err)
	}
	// One evaluation per settings at a time: a second one would record into, and at its end
	// remove, the folder the first is using.
	if unlock, err = atomicfile.LockDir(dir); err != nil {
		var le *atomicfile.LockedError
		if errors.As(err, &le) {
			return "", nil, nil, fmt.Errorf("the same evaluation (same artifact, data and settings) is running: %w", err)
		}
		return "", nil, nil, err
	}
	state, err = boundedread.ReadRegularFile(filepath.Join(dir, progressStateFile), 16<<20, "an evaluation's progress")
	switch {
	case errors.Is(err, fs.ErrNotExist):
		state = nil
	case err != nil:
		state = []byte{}
	}
	return dir, unlock, state, nil
}

// progressStateFile is the state of an evaluation's progress folder.
const progressStateFile = "state.json"

func (p *ddrProgress) statePath() string { return filepath.Join(p.dir, progressStateFile) }

func (p *ddrProgress) note(s string) {
	if p.onNote != nil {
		p.onNote(s)
	}
}

// done is the outcome of the training name when an earlier part finished it.
func (p *ddrProgress) done(name string, models int) (val []float64, epochs []int, test []float64, ok bool) {
	d, ok := p.state.Done[name]
	if !ok || len(d.Validation) != models || len(d.Epochs) != models || len(d.Test) != models {
		return nil, nil, nil, false
	}
	for i := range models {
		v, t := math.NaN(), math.NaN()
		if d.Validation[i] != nil && d.Test[i] != nil {
			v, t = *d.Validation[i], *d.Test[i]
		}
		val, test = append(val, v), append(test, t)
	}
	return val, append([]int(nil), d.Epochs...), test, true
}

// checkpoint is where the training name is saved while under way (nil: nowhere).
func (p *ddrProgress) checkpoint(name string) *train.EpochCheckpoint {
	if p.dir == "" {
		return nil
	}
	return p.trainingCheckpoint(filepath.Join(p.dir, "training.npz"), name, name)
}

// trainingCheckpoint saves the training tag (name: in the notes) at path, telling the
// notes when it resumes.
func (p *ddrProgress) trainingCheckpoint(path, tag, name string) *train.EpochCheckpoint {
	return &train.EpochCheckpoint{Path: path, Every: p.every, Tag: tag, Resumed: func(epochs, total int) {
		p.resumed = true
		p.note(fmt.Sprintf("resuming %s from epoch %d of %d (%s)", name, epochs, total, path))
	}, Saved: p.save} // the wall time so far, with each save
}

// record keeps a finished training's outcome, then drops its checkpoint.
func (p *ddrProgress) record(name string, val []float64, epochs []int, test []float64) error {
	if p.dir == "" {
		return nil
	}
	d := ddrTrained{Epochs: epochs}
	for i := range val {
		var v, t *float64
		if !math.IsNaN(val[i]) {
			v, t = &val[i], &test[i]
		}
		d.Validation, d.Test = append(d.Validation, v), append(d.Test, t)
	}
	p.state.Done[name] = d
	if err := p.save(); err != nil {
		return err
	}
	return train.RemoveEpochCheckpoint(filepath.Join(p.dir, "training.npz"))
}

// save writes state.json, with the wall time so far.
func (p *ddrProgress) save() error {
	if p.dir == "" {
		return nil
	}
	st := p.state
	st.Seconds = p.seconds()
	b, err := json.MarshalIndent(st, "", "  ")
	if err != nil {
		return err
	}
	if err := atomicfile.WriteFile(p.statePath(), append(b, '\n')); err != nil {
		return fmt.Errorf("keeping the evaluation's progress: %w", err)
	}
	return nil
}

// seconds is the evaluation's wall time so far, over its parts.
func (p *ddrProgress) seconds() float64 { return p.state.Seconds + time.Since(p.start).Seconds() }

// finish removes the progress folder once the evaluation is written.
func (p *ddrProgress) finish() error {
	if p.dir == "" {
		return nil
	}
	if err := os.RemoveAll(p.dir); err != nil && !errors.Is(err, fs.ErrNotExist) {
		return fmt.Errorf("removing the finished evaluation's progress %s: %w", p.dir, err)
	}
	return nil
}

// distilledDigest is the SHA-256 of the evaluated images, labels and hard labels.
func distilledDigest(art *Artifact, hard []int64) string {
	h := sha256.New()
	var buf []byte
	for _, s := range art.Shape {
		buf = binary.LittleEndian.AppendUint64(buf, uint64(s))
	}
	for _, v := range art.Images {
		buf = binary.LittleEndian.AppendUint32(buf, math.Float32bits(v))
	}
	for _, v := range art.Labels {
		buf = binary.LittleEndian.AppendUint32(buf, math.Float32bits(v))
	}
	for _, v := range hard {
		buf = binary.LittleEndian.AppendUint64(buf, uint64(v))
	}
	h.Write(buf)
	return hex.EncodeToString(h.Sum(nil))
}

// DDRankingInProgress describes the unfinished DD-Ranking evaluations kept in the artifact
// folder dir (their progress folders), one sentence each, for reports: interrupted, or
// still running where another process holds the folder's lock; nil when there are none.
func DDRankingInProgress(dir string) []string {
	folders, _ := filepath.Glob(filepath.Join(dir, EvaluationsFolder, ddrPartialPrefix+"*"))
	var out []string
	for _, f := range folders {
		rel := filepath.Join(EvaluationsFolder, filepath.Base(f))
		what, next := "an interrupted DD-Ranking evaluation", "; ldtorch evaluate --protocol ddranking with the same settings goes on from it"
		if holder, held := atomicfile.HeldBy(f); held {
			what, next = "a DD-Ranking evaluation running in "+holder, ""
		}
		raw, err := boundedread.ReadRegularFile(filepath.Join(f, "state.json"), 16<<20, "an evaluation's progress")
		var st ddrState
		if err != nil || json.Unmarshal(raw, &st) != nil || st.Key.Models < 1 || st.Key.Group < 1 {
			out = append(out, fmt.Sprintf("%s: %s, nothing finished yet", rel, what))
			continue
		}
		k := st.Key
		total := 3 * len(k.Syn.LRs) * ((k.Models + k.Group - 1) / k.Group)
		out = append(out, fmt.Sprintf("%s: %s (%s, %d epochs, %d runs, seed %d, augmentation %s): %d of %d trainings finished%s",
			rel, what, k.Arch, k.Syn.Epochs, k.Models, k.Seed, k.Augment, min(len(st.Done), total), total, next))
	}
	return out
}
