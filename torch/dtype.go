package torch

// dtype.go: element types, numbered as libtorch's c10::ScalarType (as gotorch does).

import "fmt"

// DType is a tensor element type.
type DType int

const (
	Uint8    DType = 0
	Int8     DType = 1
	Int16    DType = 2
	Int      DType = 3
	Long     DType = 4
	Half     DType = 5
	Float    DType = 6
	Double   DType = 7
	Bool     DType = 11
	BFloat16 DType = 15
)

func (d DType) String() string {
	switch d {
	case Uint8:
		return "uint8"
	case Int8:
		return "int8"
	case Int16:
		return "int16"
	case Int:
		return "int32"
	case Long:
		return "int64"
	case Half:
		return "float16"
	case Float:
		return "float32"
	case Double:
		return "float64"
	case Bool:
		return "bool"
	case BFloat16:
		return "bfloat16"
	}
	return fmt.Sprintf("dtype(%d)", int(d))
}

// IsFloatingPoint reports whether d is a floating-point type (float16, bfloat16, float32,
// float64).
func (d DType) IsFloatingPoint() bool {
	return d == Half || d == BFloat16 || d == Float || d == Double
}
