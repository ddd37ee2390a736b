package engine

// prepare.go: a run's inputs, prepared once from its configuration and options: the
// process settings applied, the data loaded (or given) and checked, then on the device.

import (
	"context"

	"github.com/ldtorch/ldtorch/labeldistill/config"
	"github.com/ldtorch/ldtorch/labeldistill/data"
)

// prepareRun takes the inputs of a run of r (ds, else cfg's data loaded
// from disk; baseFile: where cfg's base indices were read from, or nil) onto its device,
// with the thread count applied.
func prepareRun(r config.Resolved, ds *Data, baseFile *data.BaseFile) (*Inputs, error) {
	return prepareRunContext(context.Background(), r, ds, baseFile)
}

// prepareRunContext is prepareRun whose loading of the data ends early, with ctx's error,
// once ctx is done (a signal).
func prepareRunContext(ctx context.Context, r config.Resolved, ds *Data, baseFile *data.BaseFile) (*Inputs, error) {
	cfg := r.Config
	dev, err := Setup(cfg)
	if err != nil {
		return nil, err
	}
	if baseFile != nil { // before the data: a file of another split names the setting
		if err := CheckBaseFile(cfg, baseFile); err != nil {
			return nil, err
		}
	}
	if ds == nil {
		if ds, err = LoadDataContext(ctx, cfg); err != nil {
			return nil, err
		}
	}
	return NewInputs(cfg, ds, dev, baseOrigin(cfg, ds, baseFile))
}

// Prepare is prepareRun for the packages that run on a distillation's inputs without its
// meta-loop (the gradient-variance measurement, the benchmarks).
func Prepare(r config.Resolved, ds *Data, baseFile *data.BaseFile) (*Inputs, error) {
	return prepareRun(r, ds, baseFile)
}
