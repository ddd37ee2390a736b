package main

import (
	"crypto/sha256"
	"errors"
	"io"
	"io/fs"
	"os"
	"path/filepath"

	"github.com/ldtorch/ldtorch/labeldistill/artifact"
	"github.com/ldtorch/ldtorch/labeldistill/report"
	"github.com/ldtorch/ldtorch/torch"
	"github.com/ldtorch/ldtorch/torch/fileio/atomicfile"
)

// folders.go: the command's folders: writable, locked by one process at a time, and the
// libtorch runtime and device checked before any work.

// checkWritable creates dir if needed and proves it writable (atomicfile.EnsureWritableDir).
func checkWritable(dir string) error {
	if fi, err := os.Lstat(dir); err == nil && fi.Mode()&fs.ModeSymlink != 0 {
		if _, err := os.Stat(dir); err != nil {
			return usageErrorf("--out: %s", unreadable(dir, err))
		}
	}
	err := atomicfile.EnsureWritableDir(dir)
	if err == nil {
		return nil
	}
	var pe *fs.PathError
	if errors.As(err, &pe) {
		err = pe.Err
	}
	return usageErrorf("--out: output folder %s is not writable: %v", dir, err)
}

// checkRuntime verifies the libtorch runtime (the shim's ABI) and the device.
func checkRuntime(device string) (torch.Info, error) {
	info, err := torch.RuntimeInfo()
	if err != nil {
		return info, failuref("%v", err)
	}
	dev, err := torch.ParseDevice(device)
	if err != nil {
		return info, usageErrorf("--device: %v", err)
	}
	if dev.IsCUDA() {
		switch {
		case !info.CUDA:
			return info, usageErrorf("--device %s: CUDA is not available (libtorch %s, %s)", device, info.TorchVersion, info.Build)
		case dev.Index >= info.CUDADevices:
			return info, usageErrorf("--device %s: only %d CUDA device(s) present", device, info.CUDADevices)
		}
	}
	return info, nil
}

func fileExists(path string) bool {
	_, err := os.Lstat(path)
	return err == nil
}

// lockFile is the lock of an output folder, held by the run writing into it.
const lockFile = atomicfile.LockFile

// noArtifactError is the usage error of a folder dir (given by flag, "": an argument) without
// a distilled.npz: one whose run is still going says so and when the artifact comes; other
// folders get why, the reader's own words.
func noArtifactError(flag, dir, why string) error {
	prefix := ""
	if flag != "" {
		prefix = flag + ": "
	}
	if holder, held := atomicfile.HeldBy(dir); held {
		return usageErrorf("%s%s has no %s yet: a run is writing into it (%s holds %s); its artifact is written when the run ends", prefix, dir, artifact.DistilledFile, holder, filepath.Join(dir, lockFile))
	}
	return usageErrorf("%s%s %s", prefix, dir, why)
}

// lockOut takes the lock of the folder dir, given by flag ("": an argument), (atomicfile.LockDir) and returns the
// function that releases it. A folder locked by another process is a usage error naming
// the folder and that process.
func lockOut(flag, dir string) (func(), error) {
	unlock, err := atomicfile.LockDir(dir)
	prefix := ""
	if flag != "" {
		prefix = flag + ": "
	}
	var le *atomicfile.LockedError
	switch {
	case errors.As(err, &le):
		how := "wait for it to end"
		if flag == "--out" {
			how += ", or choose another --out"
		}
		return nil, usageErrorf("%s%s is in use by another run (%s holds %s); %s", prefix, dir, le.Holder(), le.Path, how)
	case err != nil:
		var pe *fs.PathError
		if errors.As(err, &pe) {
			return nil, usageErrorf("%scannot create the lock file %s: %v", prefix, pe.Path, pe.Err)
		}
		return nil, failuref("%s%v", prefix, err)
	}
	return unlock, nil
}

// unwrapPath returns the cause of a *fs.PathError (the path is named by the caller).
func unwrapPath(err error) error {
	var pe *fs.PathError
	if errors.As(err, &pe) {
		return pe.Err
	}
	return err
}

// madeFromArtifact are what the commands make from an artifact inside its folder: the
// report and its figures (report), the studies (study), the evaluations and their progress
// (evaluate, evaluate --protocol ddranking) and the gradient variance (gradvar).
var madeFromArtifact = []string{report.HTMLFile, report.FiguresDir, "studies", artifact.EvaluationsFolder, report.GradVarJSON}

// artifactSum is the SHA-256 of dir's distilled.npz ("" when it cannot be read).
func artifactSum(dir string) string {
	f, err := os.Open(filepath.Join(dir, artifact.DistilledFile))
	if err != nil {
		return ""
	}
	defer f.Close()
	if st, err := f.Stat(); err != nil || !st.Mode().IsRegular() {
		return ""
	}
	h := sha256.New()
	if _, err := io.Copy(h, f); err != nil {
		return ""
	}
	return string(h.Sum(nil))
}

// removeStale removes from dir what was made from an artifact that a new one (of another
// SHA-256 than old) has replaced: a report, studies and evaluations of the old artifact
// would otherwise sit beside the new one as its own (report.html showed the old seed). It
// returns what it removed.
func removeStale(dir, old string) []string {
	if old == "" || artifactSum(dir) == old {
		return nil // the same artifact (a finished run resumed writes the same bytes)
	}
	var removed []string
	for _, name := range madeFromArtifact {
		p := filepath.Join(dir, name)
		if _, err := os.Lstat(p); err != nil {
			continue
		}
		if err := os.RemoveAll(p); err == nil {
			removed = append(removed, name)
		}
	}
	return removed
}
