package data

// basefile.go: base-index files, the positions of base examples in a source's train file as
// `distill --base-indices` and a sweep's base_file take them: an .npy array, an .npz
// archive holding base_indices (an artifact's distilled.npz) or a text list, each read once
// through its bound; the header line `ldtorch select-base` writes (BaseFileHeader) and
// FormatBaseFile, which writes the whole file.

import (
	"bytes"
	"context"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"unicode"

	"github.com/ldtorch/ldtorch/torch/fileio/boundedread"
	"github.com/ldtorch/ldtorch/torch/fileio/npz"
)

// MaxDistilledBytes bounds an artifact's distilled.npz (images and labels, float32): 2 GiB
// holds the images of 160,000 colour 32×32 base examples, more than any registered train
// set has. labeldistill/artifact reads an artifact's distilled.npz through it, and
// ReadBaseIndices an .npz archive given as a base-index file.
const MaxDistilledBytes = 2 << 30

// MaxBaseIndexBytes bounds a base-index file given as text or .npy: a million indices, far
// more than the largest train set (K-49's 232,365 images).
const MaxBaseIndexBytes = 16 << 20

// ReadBaseIndices reads base-example indices (positions in the source's train file) from
// an .npy file (one integer array), an .npz archive holding base_indices (an artifact's
// distilled.npz), or a text file of integers separated by spaces, commas or new lines
// ('#' starts a comment). A text or .npy file is read through MaxBaseIndexBytes, an .npz
// archive through MaxDistilledBytes (an endless stream given as the file is an error
// naming it and the bound).
func ReadBaseIndices(path string) ([]int64, error) {
	return ReadBaseIndicesContext(context.Background(), path)
}

// ReadBaseIndicesContext is ReadBaseIndices that gives up when ctx ends while a named
// pipe given as the file waits for its writer.
func ReadBaseIndicesContext(ctx context.Context, path string) ([]int64, error) {
	raw, err := readBaseIndexFile(ctx, path)
	if err != nil {
		return nil, err
	}
	return parseBaseIndices(path, raw)
}

// readBaseIndexFile reads a base-index file's bytes through its bound (ReadBaseIndices).
func readBaseIndexFile(ctx context.Context, path string) ([]byte, error) {
	limit := int64(MaxBaseIndexBytes)
	if st, err := os.Stat(path); err == nil && st.Mode().IsRegular() && st.Size() > limit {
		if magic, _ := readMagic(path); bytes.HasPrefix(magic, []byte("PK\x03\x04")) {
			limit = MaxDistilledBytes // an artifact's distilled.npz
		}
	}
	return boundedread.ReadFileContext(ctx, path, limit, "base-index file")
}

// parseBaseIndices parses the bytes of the base-index file at path (ReadBaseIndices).
func parseBaseIndices(path string, raw []byte) ([]int64, error) {
	if bytes.HasPrefix(raw, []byte("\x93NUMPY")) || bytes.HasPrefix(raw, []byte("PK\x03\x04")) {
		arc, err := npz.Read(bytes.NewReader(raw), int64(len(raw)))
		if err != nil {
			return nil, fmt.Errorf("%s: %w", path, err)
		}
		arr := arc.Get("base_indices")
		if arr == nil && len(arc.Arrays) == 1 {
			arr = arc.Arrays[0]
		}
		if arr == nil {
			return nil, fmt.Errorf("%s: no base_indices array (found %s)", path, strings.Join(arc.Names(), ", "))
		}
		if len(arr.Shape) != 1 {
			return nil, fmt.Errorf("%s: base indices must be a 1-d array, got shape %v", path, arr.Shape)
		}
		if arr.Shape[0] == 0 {
			return nil, fmt.Errorf("%s: its base_indices are empty: an artifact of learnt images (method dd) names no real base examples", path)
		}
		switch v := arr.Data.(type) {
		case []int64:
			return v, nil
		case []int32:
			out := make([]int64, len(v))
			for i, x := range v {
				out[i] = int64(x)
			}
			return out, nil
		}
		return nil, fmt.Errorf("%s: base indices must be int32 or int64, got %s", path, arr.DType)
	}
	var out []int64
	for ln, line := range strings.Split(string(raw), "\n") {
		line, _, _ = strings.Cut(line, "#")
		for _, f := range strings.FieldsFunc(line, func(r rune) bool { return r == ',' || unicode.IsSpace(r) }) {
			v, err := strconv.ParseInt(f, 10, 64)
			if err != nil {
				return nil, fmt.Errorf("%s: line %d: %q is not an integer index", path, ln+1, f)
			}
			out = append(out, v)
		}
	}
	if len(out) == 0 {
		return nil, fmt.Errorf("%s: no indices", path)
	}
	return out, nil
}

// readMagic returns the first 4 bytes of the file at path.
func readMagic(path string) ([]byte, error) {
	f, err := os.Open(path)
	if err != nil {
		return nil, err
	}
	defer f.Close()
	b := make([]byte, 4)
	n, err := io.ReadFull(f, b)
	return b[:n], err
}

// BaseFileMarker starts the header line `ldtorch select-base` writes at the top of an index
// file; the JSON of a BaseFileHeader follows it on the same line. The line is a comment to
// ReadBaseIndices.
const BaseFileMarker = "# ldtorch select-base "

// BaseFileHeader is what a select-base index file says about its indices: the strategy and
// its settings, and the data they were chosen from (the source dataset, the base seed that
// split its train set, the validation size asked for).
type BaseFileHeader struct {
	Strategy       string          `json:"strategy"`
	Settings       json.RawMessage `json:"settings,omitempty"`
	Dataset        string          `json:"dataset"`
	BaseExamples   int             `json:"base_examples"`
	BaseSeed       int64           `json:"base_seed"`
	ValidationSize int             `json:"validation_size"`
}

// BaseFile is an index file as read for a run.
type BaseFile struct {
	Path    string
	SHA256  string
	Indices []int64
	Header  *BaseFileHeader // nil: the file has no select-base header
	// Run: for an artifact's distilled.npz whose report.json beside it names it, the data
	// its base examples were drawn from, as a select-base header records them (Strategy
	// empty); nil otherwise.
	Run *BaseFileHeader
}

// artifactReport is what an artifact's report.json says of its base examples' data.
type artifactReport struct {
	Source string `json:"source"`
	Config struct {
		BaseSeed       int64 `json:"base_seed"`
		ValidationSize int   `json:"validation_size"`
	} `json:"config"`
	Distilled struct {
		SHA256 string `json:"sha256"`
	} `json:"distilled"`
}

// artifactRun is the data of the run whose distilled.npz (SHA-256 sum, n base examples) is
// at path, from the report.json beside it; nil where there is none, it cannot be read or it
// names another distilled.npz (a file copied out of its folder checks nothing).
func artifactRun(path, sum string, n int) *BaseFileHeader {
	raw, err := boundedread.ReadRegularFile(filepath.Join(filepath.Dir(path), "report.json"), MaxBaseIndexBytes, "report of an artifact")
	if err != nil {
		return nil
	}
	var rep artifactReport
	if json.Unmarshal(raw, &rep) != nil || rep.Distilled.SHA256 != sum || rep.Source == "" {
		return nil
	}
	return &BaseFileHeader{Dataset: rep.Source, BaseExamples: n, BaseSeed: rep.Config.BaseSeed, ValidationSize: rep.Config.ValidationSize}
}

// ReadBaseFile reads an index file (any format ReadBaseIndices takes), its SHA-256 and,
// for a text file, its select-base header line when it has one.
func ReadBaseFile(path string) (*BaseFile, error) {
	return ReadBaseFileContext(context.Background(), path)
}

// ReadBaseFileContext is ReadBaseFile that gives up when ctx ends while a named pipe given
// as the file waits for its writer. The file is read once, through ReadBaseIndices' bounds.
func ReadBaseFileContext(ctx context.Context, path string) (*BaseFile, error) {
	raw, err := readBaseIndexFile(ctx, path)
	if err != nil {
		return nil, err
	}
	idx, err := parseBaseIndices(path, raw)
	if err != nil {
		return nil, err
	}
	sum := sha256.Sum256(raw)
	f := &BaseFile{Path: path, SHA256: hex.EncodeToString(sum[:]), Indices: idx}
	if bytes.HasPrefix(raw, []byte("PK\x03\x04")) {
		f.Run = artifactRun(path, f.SHA256, len(idx))
	}
	for _, line := range bytes.Split(raw, []byte("\n")) {
		if h, ok := bytes.CutPrefix(line, []byte(BaseFileMarker)); ok {
			var hdr BaseFileHeader
			dec := json.NewDecoder(bytes.NewReader(h))
			dec.DisallowUnknownFields()
			if err := dec.Decode(&hdr); err != nil {
				return nil, fmt.Errorf("%s: select-base header: %w", path, err)
			}
			if hdr.Strategy == "" {
				return nil, fmt.Errorf("%s: select-base header names no strategy", path)
			}
			if hdr.BaseExamples != len(idx) {
				return nil, fmt.Errorf("%s: the select-base header says %d base examples, the file lists %d indices", path, hdr.BaseExamples, len(idx))
			}
			f.Header = &hdr
			break
		}
	}
	return f, nil
}

// FormatBaseFile is the text of an index file: the header line, a comment line per entry
// of notes, then one index per line with its class as a comment.
func FormatBaseFile(h BaseFileHeader, notes []string, indices, classes []int64) ([]byte, error) {
	if len(classes) != len(indices) {
		return nil, fmt.Errorf("%d classes for %d indices", len(classes), len(indices))
	}
	hj, err := json.Marshal(h)
	if err != nil {
		return nil, err
	}
	if bytes.ContainsAny(hj, "\n") {
		return nil, fmt.Errorf("select-base header spans lines")
	}
	var b bytes.Buffer
	b.WriteString(BaseFileMarker)
	b.Write(hj)
	b.WriteByte('\n')
	for _, n := range notes {
		for _, line := range strings.Split(n, "\n") {
			b.WriteString("# " + line + "\n")
		}
	}
	for i, v := range indices {
		fmt.Fprintf(&b, "%d  # class %d\n", v, classes[i])
	}
	return b.Bytes(), nil
}
