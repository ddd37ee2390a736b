// What is unpacked here (git-ignored) can hold files named *.go that are not Go (Debian's
// CUDA toolkit brings Guile's compiled Scheme, *.go): a module of its own keeps the project's
// `go vet ./...` and `go test ./...` out of this folder.
module ldtorch.invalid/third_party
