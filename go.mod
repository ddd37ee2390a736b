module github.com/ldtorch/ldtorch

go 1.24
