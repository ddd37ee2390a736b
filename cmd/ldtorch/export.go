// export.go: `ldtorch export DIR`: write DIR/distilled.pt, the artifact's arrays in
// PyTorch's format, for an artifact written before ldtorch distill wrote it itself.

package main

import (
	"fmt"

	"github.com/urfave/cli/v2"

	"github.com/ldtorch/ldtorch/labeldistill/artifact"
)

func (e *env) exportCommand() *cli.Command {
	return &cli.Command{
		Name:      "export",
		Usage:     "write DIR/distilled.pt (the artifact's arrays for PyTorch's torch.load) for an older artifact",
		UsageText: "ldtorch export DIR",
		Description: "Reads and checks the artifact in DIR (distilled.npz, report.json) and writes DIR/distilled.pt: " +
			"the same arrays (images, labels, base_indices, base_classes) as a dict of tensors in libtorch's " +
			"pickle format, so that Python's torch.load(\"DIR/distilled.pt\") reads them without NumPy. " +
			"ldtorch distill writes it itself; an artifact whose report already names it is left as it is.",
		Action: e.exportAction,
	}
}

func (e *env) exportAction(c *cli.Context) error {
	dir, err := oneDirArg(c)
	if err != nil {
		return err
	}
	path, wrote, err := artifact.Export(dir)
	if err != nil {
		return failuref("%s is not a valid ldtorch artifact: %v", dir, err)
	}
	if !wrote {
		fmt.Fprintf(e.stdout, "%s: already written with the artifact (its report names it); nothing to do\n", path)
		return nil
	}
	fmt.Fprintf(e.stdout, "wrote %s: in Python, torch.load(%q) gives a dict of tensors with the names of %s\n", path, path, artifact.DistilledFile)
	return nil
}
