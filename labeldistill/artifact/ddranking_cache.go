package artifact

// ddranking_cache.go: the full-data model of the DD-Ranking protocol, trained once per
// dataset, architecture, data split, seed and recipe and kept in a cache folder (by
// default the data folder's ddranking/): a JSON entry naming everything it was trained
// on and with, and its parameters (npz). An entry whose key differs (another recipe, other
// data) is never used: a changed recipe trains a new model.

import (
	"bytes"
	"crypto/sha256"
	"encoding/binary"
	"encoding/hex"
	"encoding/json"
	"fmt"
	"hash"
	"math"
	"path/filepath"
	"regexp"

	"github.com/ldtorch/ldtorch/labeldistill"
	"github.com/ldtorch/ldtorch/labeldistill/data"
	"github.com/ldtorch/ldtorch/labeldistill/train"
	"github.com/ldtorch/ldtorch/torch"
	"github.com/ldtorch/ldtorch/torch/fileio/atomicfile"
	"github.com/ldtorch/ldtorch/torch/fileio/boundedread"
	"github.com/ldtorch/ldtorch/torch/fileio/npz"
)

// DDRankingCacheFolder is the cache folder's name inside the data folder.
const DDRankingCacheFolder = "ddranking"

// fullDataKey is everything a full-data model depends on.
type fullDataKey struct {
	Format     string          `json:"format"`
	Dataset    string          `json:"dataset"`
	Arch       string          `json:"arch"`
	Shape      [3]int64        `json:"image_shape"`
	Classes    int             `json:"classes"`
	Seed       uint64          `json:"seed"` // the model's initialisation, batches and augmentation
	Recipe     DDRankingRecipe `json:"recipe"`
	Images     int             `json:"images"`
	Validation int             `json:"validation_images"`
	Test       int             `json:"test_images"`
	// DataSHA256 digests the target set, validation and test splits exactly as trained and
	// scored on (normalised images and labels, in order).
	DataSHA256 string `json:"data_sha256"`
	DType      string `json:"dtype"`
}

// fullDataEntry is a cache entry (the JSON file).
type fullDataEntry struct {
	Key            fullDataKey       `json:"key"`
	Result         DDRankingFullData `json:"result"`
	Params         []string          `json:"params"` // the parameter names, in order
	ParamsSHA256   string            `json:"params_sha256"`
	LdtorchVersion string            `json:"ldtorch_version"`
}

const fullDataFormat = "ldtorch ddranking full-data model 1"

// cacheStem is the entry's file name without extension: dataset, architecture and a
// digest of the whole key.
func cacheStem(k fullDataKey) (string, error) {
	b, err := json.Marshal(k)
	if err != nil {
		return "", err
	}
	sum := sha256.Sum256(b)
	name := regexp.MustCompile(`[^A-Za-z0-9_.-]+`).ReplaceAllString(k.Dataset, "_")
	if len(name) > 40 {
		name = name[:40]
	}
	return fmt.Sprintf("fulldata-%s-%s-%s", name, k.Arch, hex.EncodeToString(sum[:8])), nil
}

// splitsDigest is the SHA-256 of the splits' shapes, normalised images and labels.
func splitsDigest(splits ...*data.Split) string {
	h := sha256.New()
	buf := make([]byte, 0, 1<<16)
	flush := func(h hash.Hash) {
		h.Write(buf)
		buf = buf[:0]
	}
	put := func(v uint64) {
		buf = binary.LittleEndian.AppendUint64(buf, v)
		if len(buf) >= 1<<16-8 {
			flush(h)
		}
	}
	for _, s := range splits {
		for _, v := range []int{s.N, s.C, s.H, s.W, s.Classes} {
			put(uint64(v))
		}
		for _, v := range s.Images {
			buf = binary.LittleEndian.AppendUint32(buf, math.Float32bits(v))
			if len(buf) >= 1<<16-8 {
				flush(h)
			}
		}
		for _, v := range s.Labels {
			put(uint64(v))
		}
	}
	flush(h)
	return hex.EncodeToString(h.Sum(nil))
}

// fullData trains (or reads from the cache) the full-data model: one model, hard labels,
// the full-data recipe, its epoch chosen on validation. It returns the model (the caller
// closes it) and its result.
//
// Its training is saved as it goes (dataDigest: splitsDigest of the three splits): beside
// the cache entry it will become, where any evaluation needing the same model resumes it,
// or, without a cache, in the evaluation's progress folder.
func (e *ddrEval) fullData(d *labeldistill.Data, fx, fy *torch.Tensor, dataDigest string) (*train.Models, DDRankingFullData, error) {
	seed := train.Seed(uint64(e.dc.Seed), "ddranking full data", 0)
	key := fullDataKey{Format: fullDataFormat, Dataset: e.dc.Dataset, Arch: e.dc.Arch, Shape: d.Shape, Classes: d.Classes,
		Seed: seed, Recipe: e.full, Images: d.TargetSet.N, Validation: d.Validation.N, Test: d.Test.N,
		DataSHA256: dataDigest, DType: "float32"}
	stem, err := cacheStem(key)
	if err != nil {
		return nil, DDRankingFullData{}, err
	}
	// Without a cache folder, or with one that cannot be written, the evaluation's progress
	// folder keeps the model until the evaluation is written.
	if c := e.dc.CacheDir; c != "" && e.cacheReadOnly {
		if m, r, err := e.readFullData(filepath.Join(c, stem+".json"), filepath.Join(c, stem+".npz"), key); err == nil {
			r.Cached, r.CacheFile = true, filepath.Join(c, stem+".json")
			return m, r, nil
		}
		if e.dc.Notes != nil {
			e.dc.Notes(fmt.Sprintf("warning: the full-data cache %s cannot be written and holds no model for this evaluation: it is trained here and not kept", c))
		}
	}
	dir := e.dc.CacheDir
	if dir == "" || e.cacheReadOnly {
		dir = e.progress.dir
	}
	var jsonPath, npzPath string
	var ck *train.EpochCheckpoint
	if dir != "" {
		jsonPath, npzPath = filepath.Join(dir, stem+".json"), filepath.Join(dir, stem+".npz")
		if m, r, err := e.readFullData(jsonPath, npzPath, key); err == nil {
			if dir == e.dc.CacheDir {
				r.Cached, r.CacheFile = true, jsonPath
			}
			return m, r, nil
		}
		// Missing, unreadable or made for another key: trained again and replaced.
		if e.progress.dir != "" {
			ck = e.progress.trainingCheckpoint(filepath.Join(dir, stem+".training.npz"), stem, "the full-data model")
		}
	}
	var c torch.Chain
	table := c.T(c.T(torch.OneHot(fy, int64(d.Classes))).ToDType(torch.Float))
	if c.Err() != nil {
		return nil, DDRankingFullData{}, c.Err()
	}
	models, val, epochs, seconds, err := e.trainModels("full data", fx, table, false, e.full.epochRecipe(DDRankingFullLR, e.dc.Augment == AugmentDSA), []uint64{seed}, ck)
	if err != nil {
		return nil, DDRankingFullData{}, err
	}
	fail := func(err error) (*train.Models, DDRankingFullData, error) {
		models.Close()
		return nil, DDRankingFullData{}, err
	}
	if math.IsNaN(val[0]) {
		return fail(&labeldistill.DivergedError{Purpose: "ddranking full data", Models: 1, Steps: e.full.Epochs, Field: "lr", LR: DDRankingFullLR})
	}
	acc, err := models.Accuracy(e.ctx, e.tx, e.ty)
	if err != nil {
		return fail(err)
	}
	r := DDRankingFullData{Accuracy: acc / 100, Validation: val[0], Epoch: epochs[0], Images: d.TargetSet.N, Seed: seed,
		WallSeconds: seconds}
	if jsonPath != "" {
		if err := writeFullData(jsonPath, npzPath, key, r, models); err != nil {
			return fail(err)
		}
		if dir == e.dc.CacheDir {
			r.CacheFile = jsonPath
		}
	}
	if ck != nil {
		if err := train.RemoveEpochCheckpoint(ck.Path); err != nil {
			return fail(err)
		}
	}
	if err := e.progress.save(); err != nil { // its wall time
		return fail(err)
	}
	return models, r, nil
}

// writeFullData writes the parameters (npz), then the entry naming their SHA-256, both
// atomically: a reader sees a whole entry or none.
func writeFullData(jsonPath, npzPath string, key fullDataKey, r DDRankingFullData, m *train.Models) error {
	var arrays []*npz.Array
	var names []string
	for j, spec := range m.Specs {
		p := m.Params[0][j]
		var c torch.Chain
		cpu := c.T(c.T(p.To(torch.CPU)).Contiguous())
		if c.Err() != nil {
			return c.Err()
		}
		v, err := cpu.Float32s()
		if err != nil {
			return err
		}
		shape := make([]int, len(spec.Shape))
		for i, s := range spec.Shape {
			shape[i] = int(s)
		}
		a, err := npz.New(spec.Name, shape, v)
		if err != nil {
			return err
		}
		arrays = append(arrays, a)
		names = append(names, spec.Name)
	}
	if err := npz.WriteFile(npzPath, arrays); err != nil {
		return fmt.Errorf("full-data cache: %w", err)
	}
	sum, err := fileSHA256(npzPath)
	if err != nil {
		return err
	}
	entry := fullDataEntry{Key: key, Result: r, Params: names, ParamsSHA256: sum, LdtorchVersion: labeldistill.Version}
	b, err := json.MarshalIndent(entry, "", "  ")
	if err != nil {
		return err
	}
	if err := atomicfile.WriteFile(jsonPath, append(b, '\n')); err != nil {
		return fmt.Errorf("full-data cache: %s: %w", jsonPath, err)
	}
	return nil
}

// readFullData reads the entry for key: its JSON must name exactly key, and the
// parameters must be the file it names, with the network's names and shapes.
func (e *ddrEval) readFullData(jsonPath, npzPath string, key fullDataKey) (*train.Models, DDRankingFullData, error) {
	none := DDRankingFullData{}
	b, err := boundedread.ReadRegularFile(jsonPath, 1<<20, "a full-data cache entry")
	if err != nil {
		return nil, none, errNoCache
	}
	var entry fullDataEntry
	if err := json.Unmarshal(b, &entry); err != nil {
		return nil, none, errNoCache
	}
	want, _ := json.Marshal(key)
	got, _ := json.Marshal(entry.Key)
	if string(want) != string(got) || math.IsNaN(entry.Result.Accuracy) || entry.Result.Accuracy < 0 || entry.Result.Accuracy > 1 {
		return nil, none, errNoCache
	}
	// Read once, through a bound: a device or an endless stream put in place of the
	// parameters is a missing entry, not an out-of-memory crash.
	raw, err := boundedread.ReadRegularFile(npzPath, data.MaxDistilledBytes, "full-data cache file")
	if err != nil {
		return nil, none, errNoCache
	}
	if sum := sha256.Sum256(raw); hex.EncodeToString(sum[:]) != entry.ParamsSHA256 {
		return nil, none, errNoCache
	}
	arc, err := npz.Read(bytes.NewReader(raw), int64(len(raw)))
	if err != nil {
		return nil, none, errNoCache
	}
	spec := train.OptSpec{Kind: "sgd", LR: DDRankingFullLR}
	m, err := train.NewModels(e.net, false, e.cfg, spec, []uint64{key.Seed}, e.dev, torch.Float, train.Mode(e.dev))
	if err != nil {
		return nil, none, err
	}
	err = torch.NoGrad(func() error {
		for j, ps := range m.Specs {
			a := arc.Get(ps.Name)
			if a == nil || len(entry.Params) != len(m.Specs) || entry.Params[j] != ps.Name {
				return errNoCache
			}
			v, err := a.Float32s()
			if err != nil || len(v) != int(m.Params[0][j].Numel()) {
				return errNoCache
			}
			var c torch.Chain
			t := c.T(onDevice(c.T(torch.FromFloat32(v, ps.Shape...)), e.dev))
			if c.Err() != nil {
				return c.Err()
			}
			if err := m.Params[0][j].Copy_(t); err != nil {
				return err
			}
		}
		return nil
	})
	if err != nil {
		m.Close()
		return nil, none, err
	}
	return m, entry.Result, nil
}

// fileSHA256 is the hex SHA-256 of a file's bytes (the parameters just written).
func fileSHA256(path string) (string, error) {
	b, err := boundedread.ReadRegularFile(path, data.MaxDistilledBytes, "full-data cache file")
	if err != nil {
		return "", err
	}
	sum := sha256.Sum256(b)
	return hex.EncodeToString(sum[:]), nil
}

// DefaultDDRankingCache is the cache folder inside a data folder.
func DefaultDDRankingCache(dataDir string) string {
	return filepath.Join(dataDir, DDRankingCacheFolder)
}
