package config

// limits.go: the bounds of every count a user gives that spawns work or memory (models,
// steps, processes, threads, batches, grid cells, study settings), and the one message
// shape of a count outside them, used by every command: "must be between 1 and 1000, got
// 5000 (why)".

import (
	"fmt"
	"runtime"
	"strconv"
)

// MaxEvalModels bounds eval_models, and the fresh models of evaluate, study and gradvar:
// the paper uses 20; thousands would run for hours and add nothing to the mean.
const MaxEvalModels = 1000

// MaxTrainSteps bounds the training steps of one fresh model that evaluate and study take
// from the command line: the paper's T is in the hundreds and its baselines search up to
// 1,700; a million LeNet steps already take hours on a CPU.
const MaxTrainSteps = 1_000_000

// MaxEvalEpochs bounds the training epochs of the benchmark protocol's models (evaluate
// --protocol ddranking --epochs): its recipe trains 1,000; a hundred thousand already take
// days on a CPU.
const MaxEvalEpochs = 100_000

// MaxGradVarBatches bounds gradvar's fixed (base, target) batch pairs: each trains every
// model anew; the paper's figure uses a handful.
const MaxGradVarBatches = 1000

// MaxGridCells bounds a sweep's rows × columns: each cell is a whole distillation (minutes
// to hours); the paper's largest table has 12.
const MaxGridCells = 1000

// MaxStudySettings bounds the settings of one study (step counts, learning rates × momenta,
// architectures): each trains M models.
const MaxStudySettings = 200

// MaxSelectCandidates bounds select-base's paper strategy candidates: each is a base set
// trained --repeats times up to its max steps; the paper draws 50.
const MaxSelectCandidates = 10_000

// MaxDDUnrolledSteps bounds method dd's T = dd_steps × dd_epochs, the steps unrolled at
// every meta-step: each keeps a copy of the network's parameters until the backward pass
// reaches it (about 0.4 MB for LeNet under dd_backward recompute, measured: 565 MB of
// resident memory at 10 steps, 945 MB at 1,000, 1,744 MB at 3,000), its whole graph under
// graph (1.25 MB a step for LeNet on 10 images), and every fresh model trains T steps.
// Wang et al. unroll 30; 10,000 keep LeNet within about 4 GB. The engine also checks T
// against the parameters of the run's network and this machine's memory.
const MaxDDUnrolledSteps = 10_000

// WhyDDUnrolled is the reason of the bound on dd_steps × dd_epochs.
const WhyDDUnrolled = "unrolled steps of a meta-step, each keeping a copy of the network's parameters"

// MaxThreads is the largest thread count a run accepts: 4 × the CPUs of this machine (more
// only oversubscribes, and an absurd value would make libtorch and OpenBLAS spawn that many
// threads).
func MaxThreads() int { return 4 * runtime.NumCPU() }

// MaxProcs is the largest --nproc: twice the CPUs of this machine, at least 2. Every rank
// is a process with its own libtorch threads and its own copy of the data (about 250 MB
// for MNIST), and the ranks only split the work of one meta-step: one rank per core is
// the most that speeds a run up; up to as many again still lets a run of more ranks be
// tried out or resumed on a smaller machine than it ran on. Beyond that, ranks only
// time-slice while each holds its data (64 ranks on 2 cores started, and ground on).
// (Ranks started by torchrun on other machines are not bounded here.)
func MaxProcs() int { return max(2, 2*runtime.NumCPU()) }

// CountMessage is the one wording of a count outside its bounds: "must be between lo and
// hi, got n (why)"; why (may be empty) says what the bound protects.
func CountMessage(n, lo, hi int64, why string) string {
	return CountMessageText(strconv.FormatInt(n, 10), lo, hi, why)
}

// CountMessageText is CountMessage for a count given as text (one too large for an int64).
// hi < lo means no upper bound: "must be at least lo, got n".
func CountMessageText(n string, lo, hi int64, why string) string {
	msg := fmt.Sprintf("must be between %d and %d, got %s", lo, hi, n)
	if hi < lo {
		msg = fmt.Sprintf("must be at least %d, got %s", lo, n)
	}
	if why != "" {
		msg += " (" + why + ")"
	}
	return msg
}

// CheckCount returns a *FieldError for field when n is outside [lo, hi] (hi < lo: at
// least lo), else nil.
func CheckCount(field string, n, lo, hi int64, why string) error {
	if n >= lo && (n <= hi || hi < lo) {
		return nil
	}
	return &FieldError{Field: field, Msg: CountMessage(n, lo, hi, why)}
}

// Reasons the bounds give in messages.
const (
	WhyModels = "each model trains for T steps and is scored on the test set"
	// WhyGradVarModels: gradvar's models are not scored.
	WhyGradVarModels = "a variance needs 2; each model trains --warmup steps for every batch pair"
	// WhyList: the lists of a study, each value a setting.
	WhyList    = "the number of values; each is a setting that trains M models"
	WhySteps   = "steps of one fresh model"
	WhyThreads = "4 × the CPUs here; 0: libtorch's default"
	WhyProcs   = "twice the CPUs here: more ranks only time-slice, each holding its own copy of the data"
)
