package labeldistill

import "github.com/ldtorch/ldtorch/labeldistill/data"

// WithBaseFile says that cfg.BaseIndices were read from f: the run checks that they are
// f's indices and, when f has a select-base header, that it was chosen from the run's
// source dataset under the run's base seed and validation size, and records the file,
// its SHA-256 and its strategy in Record.BaseOrigin. A resumed run without this option keeps
// the checkpoint's record of the file.
func WithBaseFile(f *data.BaseFile) RunOption { return func(o *runOptions) { o.baseFile = f } }
