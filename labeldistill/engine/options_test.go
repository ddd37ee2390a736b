package engine

// options_test.go: labeldistill's run options over Options, for the tests of this package.

import (
	"context"
	"testing"
	"time"

	"github.com/ldtorch/ldtorch/labeldistill/config"
	"github.com/ldtorch/ldtorch/labeldistill/data"
	"github.com/ldtorch/ldtorch/torch"
	"github.com/ldtorch/ldtorch/torch/dist"
)

type RunOption func(*Options)

func WithProgress(f func(Progress)) RunOption { return func(o *Options) { o.Progress = f } }
func WithData(d *Data) RunOption              { return func(o *Options) { o.Dataset = d } }
func WithSaveModels(dir string) RunOption     { return func(o *Options) { o.SaveModels = dir } }
func WithGroup(g *dist.Group) RunOption       { return func(o *Options) { o.Group = g } }
func WithBaseSplit(s BaseSplit) RunOption     { return func(o *Options) { o.BaseSplit = s } }
func WithBaseFile(f *data.BaseFile) RunOption { return func(o *Options) { o.BaseFile = f } }

// testDistill is labeldistill.Distill: Distill under options, inside the panic barrier.
func testDistill(ctx context.Context, cfg config.Config, opts ...RunOption) (*Result, error) {
	o := Options{Start: time.Now()}
	for _, f := range opts {
		f(&o)
	}
	r, err := config.Resolve(cfg)
	if err != nil {
		return nil, err
	}
	return torch.Guard("labeldistill", func() (*Result, error) { return Distill(ctx, r, o) })
}

// resolved is cfg resolved, stopping the test on an error.
func resolved(t testing.TB, cfg config.Config) config.Resolved {
	t.Helper()
	r, err := config.Resolve(cfg)
	if err != nil {
		t.Fatal(err)
	}
	return r
}
