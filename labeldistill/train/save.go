package train

// save.go: trained fresh models out, as PyTorch state dicts. A model is saved under the
// names and in the order of the state_dict() of its PyTorch module in docs/ARTIFACT.md
// (nets.Net.TorchNames), so that model.load_state_dict(torch.load("model-K.pt")) loads it;
// a folder of saved models also holds models.json, which says what they are.

import (
	"encoding/json"
	"errors"
	"fmt"
	"io/fs"
	"math"
	"os"
	"path/filepath"
	"strings"

	"github.com/ldtorch/ldtorch/nets"
	"github.com/ldtorch/ldtorch/torch"
	"github.com/ldtorch/ldtorch/torch/fileio/atomicfile"
)

// ManifestFile is the description of a folder of saved models (SavedModels as JSON).
const ManifestFile = "models.json"

// ModelFile is the file name of saved model k (k as in Seed(seed, purpose, k)).
func ModelFile(k int) string { return fmt.Sprintf("model-%d.pt", k) }

// RR head entries of a saved RR model: the ridge weights W ((d+1)×classes; a prediction is
// argmax [f(x), 1]·W) and the training-time logit scale s (shape (1)).
const (
	RRWeightName = "rr.W"
	RRScaleName  = "rr.scale"
)

// StateDict returns model i's parameters and buffers under their PyTorch names, in the
// order of its module's state_dict(): each submodule's parameters, then its buffers; a
// BatchNorm's running statistics are followed by num_batches_tracked (int64, 0-d: the
// training steps the model took). An RR model has no classifier layer; its ridge head
// (RRScaleName, RRWeightName) comes last. The tensors are the model's own, except the
// num_batches_tracked scalars: new tensors in the current scope (call it inside one).
func (l *Models) StateDict(i int) ([]string, []*torch.Tensor, error) {
	if i < 0 || i >= len(l.Params) {
		return nil, nil, fmt.Errorf("state dict: model %d of %d", i, len(l.Params))
	}
	net := l.Batched.Net
	pNames, bNames := net.TorchNames()
	pNames = pNames[:len(l.Specs)] // an RR model's body alone
	type group struct {
		names []string
		ts    []*torch.Tensor
	}
	var order []string
	groups := map[string]*group{}
	add := func(name string, t *torch.Tensor) {
		module := name[:max(strings.LastIndexByte(name, '.'), 0)] // "layer1.0.bn1.weight" → "layer1.0.bn1"
		g := groups[module]
		if g == nil {
			g = &group{}
			groups[module] = g
			order = append(order, module)
		}
		g.names = append(g.names, name)
		g.ts = append(g.ts, t)
	}
	for j, t := range l.Params[i] {
		add(pNames[j], t)
	}
	for j, t := range l.Buffers[i] {
		add(bNames[j], t)
		if strings.HasSuffix(bNames[j], ".running_var") {
			tracked, err := torch.FromInt64([]int64{int64(l.steps)})
			if err != nil {
				return nil, nil, err
			}
			add(strings.TrimSuffix(bNames[j], "running_var")+"num_batches_tracked", tracked)
		}
	}
	if l.RR {
		add(RRScaleName, l.Scale[i])
		add(RRWeightName, l.W[i])
	}
	var names []string
	var ts []*torch.Tensor
	for _, m := range order {
		names = append(names, groups[m].names...)
		ts = append(ts, groups[m].ts...)
	}
	return names, ts, nil
}

// Save writes model i's StateDict to path (torch.SavePickle: atomically, on the CPU).
func (l *Models) Save(i int, path string) error {
	return torch.WithScope(func(*torch.Scope) error {
		names, ts, err := l.StateDict(i)
		if err != nil {
			return err
		}
		return torch.SavePickle(path, names, ts)
	})
}

// SavedModels is models.json: what a folder of saved models holds.
type SavedModels struct {
	// Arch is the network (nets.Archs); Module its PyTorch module in docs/ARTIFACT.md.
	Arch    string   `json:"arch"`
	Module  string   `json:"module"`
	InShape [3]int64 `json:"in_shape"` // C, H, W
	Classes int64    `json:"classes"`
	// RR: the models have the ridge-regression head (rr.W, rr.scale) instead of a
	// classifier layer.
	RR     bool         `json:"rr"`
	Steps  int          `json:"steps"`
	Models []SavedModel `json:"models"`
}

// SavedModel is one model of a SavedModels.
type SavedModel struct {
	File string `json:"file"`
	// TestAccuracy is the model's test accuracy (%) as ldtorch scored it; absent for a
	// diverged model (non-finite parameters).
	TestAccuracy *float64 `json:"test_accuracy,omitempty"`
	Diverged     bool     `json:"diverged,omitempty"`
}

// moduleNames are the PyTorch modules of docs/ARTIFACT.md by architecture.
var moduleNames = map[string]string{"lenet": "LeNet", "alexnet": "AlexCifarNet", "resnet": "ResNet", "convnet": "ConvNet3"}

// moduleName is the PyTorch module of arch: docs/ARTIFACT.md's, or for a TorchScript file
// the architecture itself (its state dict keeps the file's own names).
func moduleName(arch string) string {
	if nets.IsTorchScript(arch) {
		return arch
	}
	return moduleNames[arch]
}

// ModelSaver keeps the models a Trainer trains: set a Trainer's Trained to its Save, then
// call WriteManifest with the accuracies.
type ModelSaver struct {
	Dir string
}

// NewModelSaver prepares dir (created if needed, proved writable) for saved models. A
// folder that already holds saved models (models.json or model-*.pt) is refused: the new
// ones would mix with them. Its errors name dir, for the caller to name the setting.
func NewModelSaver(dir string) (*ModelSaver, error) {
	if dir == "" {
		return nil, errors.New("no folder given for the saved models")
	}
	if err := atomicfile.EnsureWritableDir(dir); err != nil {
		var pe *fs.PathError
		if errors.As(err, &pe) {
			err = pe.Err
		}
		return nil, fmt.Errorf("folder %s is not writable: %w", dir, err)
	}
	old, err := filepath.Glob(filepath.Join(dir, "model-*.pt"))
	if err != nil {
		return nil, err
	}
	if _, err := os.Lstat(filepath.Join(dir, ManifestFile)); err == nil {
		old = append(old, filepath.Join(dir, ManifestFile))
	}
	if len(old) > 0 {
		return nil, fmt.Errorf("%s already holds saved models (%s%s); remove them or choose another folder",
			dir, filepath.Base(old[0]), map[bool]string{true: ", …"}[len(old) > 1])
	}
	return &ModelSaver{Dir: dir}, nil
}

// Save writes every model of l as Dir/model-K.pt, K = first + its index in l: a Trainer's
// Trained hook.
func (s *ModelSaver) Save(first int, l *Models) error {
	for i := range l.Params {
		if err := l.Save(i, filepath.Join(s.Dir, ModelFile(first+i))); err != nil {
			return fmt.Errorf("save models: %w", err)
		}
	}
	return nil
}

// WriteManifest writes Dir/models.json for the models 0..len(accs)-1 of net (RR head when
// rr) trained for steps: accs[k] is model k's test accuracy, NaN for a diverged model.
func (s *ModelSaver) WriteManifest(net *nets.Net, rr bool, steps int, accs []float64) error {
	m := SavedModels{Arch: net.Arch, Module: moduleName(net.Arch), InShape: net.InShape, Classes: net.Classes, RR: rr, Steps: steps,
		Models: make([]SavedModel, len(accs))}
	for k, a := range accs {
		m.Models[k].File = ModelFile(k)
		if math.IsNaN(a) || math.IsInf(a, 0) {
			m.Models[k].Diverged = true
		} else {
			m.Models[k].TestAccuracy = &a
		}
	}
	js, err := json.MarshalIndent(m, "", "  ")
	if err != nil {
		return err
	}
	if err := atomicfile.WriteFile(filepath.Join(s.Dir, ManifestFile), append(js, '\n')); err != nil {
		return fmt.Errorf("save models: %w", err)
	}
	return nil
}
