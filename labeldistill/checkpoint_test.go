package labeldistill

// checkpoint_test.go: checkpoints and resume. The central test interrupts small real-MNIST
// runs (LD and RR, model resets and validations included) at arbitrary meta-steps by
// cancelling the context, resumes them, and requires labels and test accuracies that are
// bit-identical to an uninterrupted run; a second one kills a child process with SIGKILL
// mid-run. The rest cover corrupt, truncated and mismatched checkpoints, unwritable folders
// and non-finite runs.

import (
	"context"
	"crypto/sha256"
	"errors"
	"fmt"
	"math"
	"math/rand/v2"
	"os"
	"os/exec"
	"path/filepath"
	"reflect"
	"slices"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/ldtorch/ldtorch/labeldistill/checkpoint"
	"github.com/ldtorch/ldtorch/labeldistill/config"
	"github.com/ldtorch/ldtorch/labeldistill/engine"
	"github.com/ldtorch/ldtorch/labeldistill/internal/testkit"
	"github.com/ldtorch/ldtorch/labeldistill/rundir"
)

// requireSameResult compares everything a resumed run must reproduce exactly.
func requireSameResult(t *testing.T, what string, got, want *Result) {
	t.Helper()
	switch {
	case !testkit.SameBits(got.Labels, want.Labels):
		t.Fatalf("%s: labels differ from the uninterrupted run", what)
	case !testkit.SameFloat64Bits(got.TestAccuracies, want.TestAccuracies):
		t.Fatalf("%s: test accuracies %v, uninterrupted %v", what, got.TestAccuracies, want.TestAccuracies)
	case got.T != want.T || got.MetaSteps != want.MetaSteps || !reflect.DeepEqual(got.Resets, want.Resets):
		t.Fatalf("%s: T %d, steps %d, resets %v; uninterrupted %d, %d, %v", what, got.T, got.MetaSteps, got.Resets, want.T, want.MetaSteps, want.Resets)
	case !reflect.DeepEqual(got.Validations, want.Validations) || got.BestValidation != want.BestValidation:
		t.Fatalf("%s: validations %+v, uninterrupted %+v", what, got.Validations, want.Validations)
	}
}

func ckptFiles(t *testing.T, dir string) []int {
	t.Helper()
	paths, err := checkpoint.Files(dir)
	if err != nil {
		t.Fatal(err)
	}
	var steps []int
	for _, p := range paths {
		s, err := strconv.Atoi(strings.TrimSuffix(strings.TrimPrefix(filepath.Base(p), "ckpt-"), ".npz"))
		if err != nil {
			t.Fatal(err)
		}
		steps = append(steps, s)
	}
	return steps
}

// TestResumeBitIdentical interrupts runs at several meta-steps (mid-epoch, at an epoch's
// end with its validation pending, before and after model resets, twice in a row) and
// requires the resumed runs to end exactly as the uninterrupted one.
func TestResumeBitIdentical(t *testing.T) {
	testkit.RestoreThreads(t)
	ds := testkit.SmallDataset(t)
	for _, tc := range []struct {
		method string
		cuts   [][]int // each entry: the successive interruption steps of one resumed run
	}{
		{config.MethodLD, [][]int{{13}, {16, 21}}},
		{config.MethodRR, [][]int{{5, 19}}},
	} {
		t.Run(tc.method, func(t *testing.T) {
			cfg := testkit.SmallConfig(tc.method)
			want, err := Distill(context.Background(), cfg, WithData(ds))
			if err != nil {
				t.Fatal(err)
			}
			if len(want.Resets) < 2 || len(want.Validations) != 3 {
				t.Fatalf("the test wants model resets and validations to cross: resets %v, validations %d", want.Resets, len(want.Validations))
			}
			for _, cuts := range tc.cuts {
				dir := t.TempDir()
				for _, k := range cuts {
					var msgs []string
					ctx, progress := cancelAt(k, &msgs)
					opts := []RunOption{WithData(ds), progress, WithCheckpointDir(dir)}
					if k != cuts[0] {
						opts = append(opts, WithResume(dir))
					}
					if _, err := Distill(ctx, cfg, opts...); !errors.Is(err, context.Canceled) {
						t.Fatalf("cut at %d: got %v, want context.Canceled", k, err)
					}
					if steps := ckptFiles(t, dir); len(steps) == 0 || steps[0] != k || len(steps) > checkpoint.DefaultKeep {
						t.Fatalf("cut at %d: checkpoints %v: want the newest at %d and at most %d", k, steps, k, checkpoint.DefaultKeep)
					}
				}
				var msgs []string
				got, err := Distill(context.Background(), cfg, WithData(ds), WithResume(dir), WithProgress(func(p Progress) {
					if p.Phase == "resume" {
						msgs = append(msgs, p.Message)
					}
				}))
				if err != nil {
					t.Fatal(err)
				}
				last := cuts[len(cuts)-1]
				if len(msgs) != 1 || !strings.Contains(msgs[0], fmt.Sprintf("at meta-step %d", last)) {
					t.Fatalf("resume messages %q: want one naming meta-step %d", msgs, last)
				}
				requireSameResult(t, fmt.Sprintf("interrupted at %v", cuts), got, want)
				if len(cuts) == 1 {
					continue
				}
				// The finished run's final checkpoint resumes straight to the evaluation.
				again, err := Distill(context.Background(), cfg, WithData(ds), WithResume(dir))
				if err != nil {
					t.Fatal(err)
				}
				requireSameResult(t, "resumed after the end", again, want)
			}
		})
	}
}

// TestResumeSkipsCorruptCheckpoints: the newest checkpoint has a flipped byte, the next is
// truncated; resume warns about both, continues from the third, and still ends exactly like
// the uninterrupted run.
func TestResumeSkipsCorruptCheckpoints(t *testing.T) {
	testkit.RestoreThreads(t)
	ds := testkit.SmallDataset(t)
	cfg := testkit.SmallConfig(config.MethodLD)
	cfg.CheckpointEvery = 2
	want, err := Distill(context.Background(), cfg, WithData(ds))
	if err != nil {
		t.Fatal(err)
	}
	dir := t.TempDir()
	ctx, progress := cancelAt(13, nil)
	if _, err := Distill(ctx, cfg, WithData(ds), progress, WithCheckpointDir(dir)); !errors.Is(err, context.Canceled) {
		t.Fatalf("got %v, want context.Canceled", err)
	}
	if steps := ckptFiles(t, dir); !slices.Equal(steps, []int{13, 12, 10}) {
		t.Fatalf("checkpoints %v, want [13 12 10] (the newest 3)", steps)
	}
	p13, p12 := filepath.Join(dir, checkpoint.Name(13)), filepath.Join(dir, checkpoint.Name(12))
	b, err := os.ReadFile(p13)
	if err != nil {
		t.Fatal(err)
	}
	b[len(b)/2] ^= 0x10
	if err := os.WriteFile(p13, b, 0o644); err != nil {
		t.Fatal(err)
	}
	st, _ := os.Stat(p12)
	if err := os.Truncate(p12, st.Size()*2/3); err != nil {
		t.Fatal(err)
	}
	var warnings []string
	got, err := Distill(context.Background(), cfg, WithData(ds), WithResume(dir), WithProgress(func(p Progress) {
		if p.Phase == "resume" {
			warnings = append(warnings, p.Message)
		}
	}))
	if err != nil {
		t.Fatal(err)
	}
	if len(warnings) != 3 || !strings.Contains(warnings[0], "skipping") || !strings.Contains(warnings[0], checkpoint.Name(13)) ||
		!strings.Contains(warnings[1], "skipping") || !strings.Contains(warnings[1], checkpoint.Name(12)) ||
		!strings.Contains(warnings[2], "meta-step 10") {
		t.Fatalf("resume messages:\n%s", strings.Join(warnings, "\n"))
	}
	t.Logf("resume messages:\n%s", strings.Join(warnings, "\n"))
	requireSameResult(t, "resumed past two corrupt checkpoints", got, want)
}

// ckptCancelled makes a checkpoint folder of a run cancelled after meta-step k.
func ckptCancelled(t *testing.T, cfg config.Config, ds *Data, k int) string {
	t.Helper()
	dir := t.TempDir()
	ctx, progress := cancelAt(k, nil)
	if _, err := Distill(ctx, cfg, WithData(ds), progress, WithCheckpointDir(dir)); !errors.Is(err, context.Canceled) {
		t.Fatalf("got %v, want context.Canceled", err)
	}
	return dir
}

// TestResumeRefusesOtherConfigOrData: differences that change the computation are refused
// with an error naming them; operational ones (threads, out, checkpoint_every) are not.
func TestResumeRefusesOtherConfigOrData(t *testing.T) {
	testkit.RestoreThreads(t)
	ds := testkit.SmallDataset(t)
	cfg := testkit.SmallConfig(config.MethodLD)
	dir := ckptCancelled(t, cfg, ds, 3)

	other := cfg
	other.LabelLR, other.Epochs = 2e-3, 2 // fewer epochs: refused (more would extend the run)
	_, err := Distill(context.Background(), other, WithData(ds), WithResume(dir))
	if err == nil || !strings.Contains(err.Error(), "label_lr: 0.001 -> 0.002") || !strings.Contains(err.Error(), "epochs: 3 -> 2") ||
		!strings.Contains(err.Error(), "different configuration") {
		t.Fatalf("changed label_lr and epochs: got %v", err)
	}

	changed := *ds
	changed.TargetSet.Images = slices.Clone(ds.TargetSet.Images)
	changed.TargetSet.Images[12345] += 0.5
	_, err = Distill(context.Background(), cfg, WithData(&changed), WithResume(dir))
	if err == nil || !strings.Contains(err.Error(), "different data") {
		t.Fatalf("changed a pixel: got %v", err)
	}
	files := *ds
	files.Files = map[string]string{"mnist/train-images-idx3-ubyte.gz": "00ff"}
	_, err = Distill(context.Background(), cfg, WithData(&files), WithResume(dir))
	if err == nil || !strings.Contains(err.Error(), "train-images-idx3-ubyte.gz: used by") && !strings.Contains(err.Error(), "train-images-idx3-ubyte.gz: not used") {
		t.Fatalf("changed data files: got %v", err)
	}

	ops := cfg
	ops.Out, ops.CheckpointEvery, ops.Epochs = "elsewhere", 7, cfg.Epochs
	ops.Baselines = []string{}
	res, err := Distill(context.Background(), ops, WithData(ds), WithResume(dir))
	if err != nil {
		t.Fatalf("operational differences must be allowed: %v", err)
	}
	if res.MetaSteps != 24 {
		t.Fatalf("resumed run ended after %d meta-steps, want 24", res.MetaSteps)
	}
}

// TestCheckpointFolderProblems: an unwritable checkpoint folder fails before any meta-step;
// resuming from a missing or empty folder fails clearly.
func TestCheckpointFolderProblems(t *testing.T) {
	ds := testkit.SmallDataset(t)
	cfg := testkit.SmallConfig(config.MethodLD)
	file := filepath.Join(t.TempDir(), "file")
	if err := os.WriteFile(file, []byte("x"), 0o644); err != nil {
		t.Fatal(err)
	}
	steps := 0
	progress := WithProgress(func(p Progress) { steps += p.Step })
	_, err := Distill(context.Background(), cfg, WithData(ds), progress, WithCheckpointDir(filepath.Join(file, "checkpoints")))
	if err == nil || !strings.Contains(err.Error(), "not writable") || steps != 0 {
		t.Fatalf("checkpoint folder under a file: err %v after %d steps", err, steps)
	}
	if _, err := Distill(context.Background(), cfg, WithData(ds), WithResume(filepath.Join(t.TempDir(), "missing"))); err == nil || !strings.Contains(err.Error(), "not a folder") {
		t.Fatalf("missing resume folder: %v", err)
	}
	if _, err := Distill(context.Background(), cfg, WithData(ds), WithResume(t.TempDir())); err == nil || !strings.Contains(err.Error(), "no checkpoint") {
		t.Fatalf("empty resume folder: %v", err)
	}
	// Only corrupt checkpoints: an error listing them.
	dir := t.TempDir()
	if err := os.WriteFile(filepath.Join(dir, checkpoint.Name(5)), []byte("PK\x03\x04 not really"), 0o644); err != nil {
		t.Fatal(err)
	}
	if _, err := Distill(context.Background(), cfg, WithData(ds), WithResume(dir)); err == nil || !strings.Contains(err.Error(), "no valid checkpoint") {
		t.Fatalf("only a corrupt checkpoint: %v", err)
	}
}

// TestCheckpointCorruptionDetected flips bytes throughout a real checkpoint and truncates it
// at many lengths: every truncation fails to load, and every flip either fails or leaves the
// verified content identical (zip fields outside the payload, such as timestamps).
func TestCheckpointCorruptionDetected(t *testing.T) {
	testkit.RestoreThreads(t)
	ds := testkit.SmallDataset(t)
	cfg := testkit.SmallConfig(config.MethodRR)
	dir := ckptCancelled(t, cfg, ds, 11)
	path := filepath.Join(dir, checkpoint.Name(11))
	orig, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	ref, meta, err := rundir.ReadCheckpoint(path)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := ref.Array("epoch_order"); meta.Step != 11 || meta.Epoch != 2 || meta.NextBatch != 3 || meta.Reason != "cancelled" || err != nil {
		t.Fatalf("meta %+v, epoch_order: %v", meta, err)
	}
	content := func(f *checkpoint.File) map[string]any {
		out := map[string]any{}
		for _, n := range f.Names() {
			a, _ := f.Array(n)
			out[n] = a
		}
		return out
	}
	bad := filepath.Join(t.TempDir(), checkpoint.Name(11))
	try := func(b []byte) error {
		if err := os.WriteFile(bad, b, 0o644); err != nil {
			t.Fatal(err)
		}
		c, _, err := rundir.ReadCheckpoint(bad)
		if err != nil {
			return err
		}
		if !reflect.DeepEqual(content(c), content(ref)) {
			t.Fatalf("a corrupted file loaded with different content")
		}
		return nil
	}
	flipsCaught := 0
	positions := []int{}
	for p := 0; p < len(orig); p += max(1, len(orig)/400) {
		positions = append(positions, p)
	}
	positions = append(positions, len(orig)-1, len(orig)-22, len(orig)-40)
	for _, p := range positions {
		b := slices.Clone(orig)
		b[p] ^= 1 << (p % 8)
		if try(b) != nil {
			flipsCaught++
		}
	}
	for _, n := range []int{0, 1, 4, 30, 100, len(orig) / 3, len(orig) / 2, len(orig) - 100, len(orig) - 23, len(orig) - 1} {
		if err := try(orig[:n]); err == nil {
			t.Fatalf("truncated to %d of %d bytes: loaded", n, len(orig))
		}
	}
	t.Logf("%d-byte checkpoint: %d of %d bit flips detected (the rest touched no payload); all truncations detected", len(orig), flipsCaught, len(positions))
	if flipsCaught < len(positions)*9/10 {
		t.Fatalf("only %d of %d flips detected", flipsCaught, len(positions))
	}
}

// TestNonFiniteRunKeepsLastGoodCheckpoint puts a NaN pixel in the target image that meta-step
// 4 trains on: the run stops with a *NonFiniteError naming step 4 and the label loss,
// returns no result (so no artifact can be written), and leaves checkpoints 1–3 intact.
func TestNonFiniteRunKeepsLastGoodCheckpoint(t *testing.T) {
	testkit.RestoreThreads(t)
	ds := testkit.SmallDataset(t)
	cfg := testkit.SmallConfig(config.MethodLD)
	cfg.CheckpointEvery = 1
	bad := *ds
	bad.TargetSet.Images = slices.Clone(ds.TargetSet.Images)
	// The first epoch's order is the first draw of the run's Go random stream (setup).
	order := rand.New(engine.NewRunPCG(uint64(cfg.Seed))).Perm(ds.TargetSet.N)
	img := order[3*cfg.OuterBatch+17]
	size := ds.ImageSize()
	bad.TargetSet.Images[img*size+300] = float32(math.NaN())

	dir := t.TempDir()
	res, err := Distill(context.Background(), cfg, WithData(&bad), WithCheckpointDir(dir), WithCheckpointKeep(0))
	var nf *NonFiniteError
	if res != nil || !errors.As(err, &nf) || nf.Step != 4 || nf.Quantity != "label loss" || !strings.Contains(err.Error(), "meta-step 4") {
		t.Fatalf("got result %v, error %v; want a NonFiniteError at meta-step 4 for the label loss", res != nil, err)
	}
	t.Logf("error: %v", err)
	if steps := ckptFiles(t, dir); !slices.Equal(steps, []int{3, 2, 1}) {
		t.Fatalf("checkpoints %v, want [3 2 1]", steps)
	}
	if _, _, err := rundir.ReadCheckpoint(filepath.Join(dir, checkpoint.Name(3))); err != nil {
		t.Fatal(err)
	}
}

// TestCheckpointKill9 runs a distillation in a child process (this test binary), kills it
// with SIGKILL while it writes a checkpoint after every meta-step, resumes in this process
// and requires the uninterrupted run's exact labels.
func TestCheckpointKill9(t *testing.T) {
	if dir := os.Getenv("LDTORCH_KILL9_CHILD"); dir != "" {
		ds := testkit.SmallDataset(t)
		cfg := testkit.SmallConfig(config.MethodRR)
		cfg.CheckpointEvery = 1
		_, err := Distill(context.Background(), cfg, WithData(ds), WithCheckpointDir(dir), WithProgress(func(p Progress) {
			if p.Phase == "distill" {
				time.Sleep(20 * time.Millisecond) // leave the parent time to kill mid-run
			}
		}))
		if err != nil {
			t.Fatal(err)
		}
		return
	}
	if testing.Short() {
		t.Skip("spawns a child process")
	}
	testkit.RestoreThreads(t)
	ds := testkit.SmallDataset(t)
	cfg := testkit.SmallConfig(config.MethodRR)
	cfg.CheckpointEvery = 1
	want, err := Distill(context.Background(), cfg, WithData(ds))
	if err != nil {
		t.Fatal(err)
	}
	dir := t.TempDir()
	cmd := exec.Command(os.Args[0], "-test.run=^TestCheckpointKill9$", "-test.count=1")
	cmd.Env = append(os.Environ(), "LDTORCH_KILL9_CHILD="+dir)
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	deadline := time.Now().Add(2 * time.Minute)
	for {
		if steps := ckptFiles(t, dir); len(steps) > 0 && steps[0] >= 10 {
			break
		}
		if time.Now().After(deadline) {
			cmd.Process.Kill()
			t.Fatal("the child wrote no checkpoint beyond step 10 within 2 minutes")
		}
		time.Sleep(5 * time.Millisecond)
	}
	if err := cmd.Process.Signal(syscall.SIGKILL); err != nil {
		t.Fatal(err)
	}
	werr := cmd.Wait()
	steps := ckptFiles(t, dir)
	t.Logf("child killed (%v) with checkpoints %v", werr, steps)
	got, err := Distill(context.Background(), cfg, WithData(ds), WithResume(dir))
	if err != nil {
		t.Fatal(err)
	}
	requireSameResult(t, "resumed after kill -9 at step "+strconv.Itoa(steps[0]), got, want)
}

// cancelAt returns options that cancel ctx right after meta-step k, and collect messages.
func cancelAt(k int, msgs *[]string) (context.Context, RunOption) {
	ctx, cancel := context.WithCancel(context.Background())
	return ctx, WithProgress(func(p Progress) {
		if p.Message != "" && msgs != nil {
			*msgs = append(*msgs, p.Phase+": "+p.Message)
		}
		if k > 0 && p.Phase == "distill" && p.Step == k {
			cancel()
		}
	})
}

// TestResumeRefusesChangedTorchScriptFile: a run through a TorchScript network records the
// file's SHA-256 in each checkpoint and its result; resuming after the file has changed
// (another module under the same name) is refused with both digests, and goes on once the
// file is restored.
func TestResumeRefusesChangedTorchScriptFile(t *testing.T) {
	testkit.RestoreThreads(t)
	ds := testkit.SmallDataset(t)
	testdata := filepath.Join("..", "testdata", "torchscript")
	file := filepath.Join(t.TempDir(), "net.pt")
	copyTo := func(src string) string {
		b, err := os.ReadFile(filepath.Join(testdata, src))
		if err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(file, b, 0o644); err != nil {
			t.Fatal(err)
		}
		return fmt.Sprintf("%x", sha256.Sum256(b))
	}
	lenet := copyTo("lenet.pt")
	cfg := testkit.SmallConfig(config.MethodRR)
	cfg.Arch = config.TorchScriptPrefix + file
	dir := ckptCancelled(t, cfg, ds, 3)

	other := copyTo("nodouble_mnist.pt")
	_, err := Distill(context.Background(), cfg, WithData(ds), WithResume(dir))
	if err == nil || !strings.Contains(err.Error(), "has changed since") || !strings.Contains(err.Error(), lenet+" -> "+other) {
		t.Fatalf("resumed through a changed file: got %v", err)
	}
	copyTo("lenet.pt")
	res, err := Distill(context.Background(), cfg, WithData(ds), WithResume(dir))
	if err != nil {
		t.Fatalf("resumed through the restored file: %v", err)
	}
	if got := res.NetworkSHA256[cfg.Arch]; got != lenet || len(res.NetworkSHA256) != 1 {
		t.Fatalf("result records %v, want %s for %s", res.NetworkSHA256, lenet, cfg.Arch)
	}
}
