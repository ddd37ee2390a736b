package config

// file.go: a Config as a JSON file: writing it (MarshalIndent) and loading it
// (ReadFile), with unknown keys and syntax errors named by line and column.

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"reflect"
	"strings"

	"github.com/ldtorch/ldtorch/torch/fileio/boundedread"
)

// MarshalIndent returns the config as indented JSON with a trailing newline, the format
// ReadFile reads.
func (c Config) MarshalIndent() ([]byte, error) {
	b, err := json.MarshalIndent(c, "", "  ")
	if err != nil {
		return nil, err
	}
	return append(b, '\n'), nil
}

// configKeys returns the json names of Config's fields in declaration order.
func configKeys() []string {
	t := reflect.TypeOf(Config{})
	keys := make([]string, 0, t.NumField())
	for i := 0; i < t.NumField(); i++ {
		keys = append(keys, jsonName(t.Field(i)))
	}
	return keys
}

func jsonName(f reflect.StructField) string {
	name, _, _ := strings.Cut(f.Tag.Get("json"), ",")
	if name == "" {
		return f.Name
	}
	return name
}

// ReadFile reads a JSON config file over Default: keys present replace the
// defaults, absent keys keep them. Unknown keys (matched exactly, case-sensitively),
// duplicate keys, wrongly typed values and trailing data are errors that name the file.
// The result is not resolved or validated: apply command-line overrides, then Resolved.
func ReadFile(path string) (Config, error) {
	cfg, _, err := ReadFileKeys(path)
	return cfg, err
}

// MaxFileBytes bounds a config file (and a sweep's grid file, which holds configs): a
// config with an inline base_indices list of a quarter of a million indices, pretty-printed,
// is about 3 MiB.
const MaxFileBytes = 16 << 20

// ReadFileKeys is ReadFile that also returns the keys the file sets (json names). The file
// is read once, through MaxFileBytes (an endless stream or a device given as the file is
// an error naming it and the bound).
func ReadFileKeys(path string) (Config, map[string]bool, error) {
	return ReadFileKeysContext(context.Background(), path)
}

// ReadFileKeysContext is ReadFileKeys that gives up when ctx ends while a named pipe given
// as the file waits for its writer.
func ReadFileKeysContext(ctx context.Context, path string) (Config, map[string]bool, error) {
	data, err := boundedread.ReadFileContext(ctx, path, MaxFileBytes, "config file")
	if err != nil {
		return Config{}, nil, err
	}
	var raw map[string]json.RawMessage
	parsed := json.Unmarshal(data, &raw) == nil
	cfg, err := Parse(data)
	if err != nil {
		if inner, ok := raw["config"]; ok && parsed && bytes.HasPrefix(bytes.TrimSpace(inner), []byte("{")) {
			// A run's report.json or phases.json, a sweep grid: settings are one object inside.
			return Config{}, nil, fmt.Errorf("%s: holds settings under its key \"config\", as a run's report.json or phases.json and a sweep grid do, not settings of its own: give that object alone in a file of its own (or continue the run with --resume, run the grid with ldtorch sweep --grid) (%v)", path, err)
		}
		return Config{}, nil, fmt.Errorf("%s: %w", path, err)
	}
	keys := map[string]bool{}
	if parsed {
		for k := range raw {
			keys[k] = true
		}
	}
	return cfg, keys, nil
}

// Parse reads a config from JSON over the defaults: unknown keys (with a suggestion), keys
// of the wrong type and syntax errors (by line and column) are errors; the result is not
// resolved or validated.
func Parse(data []byte) (Config, error) {
	cfg := Default()
	// First pass: the top-level keys, in order, checked exactly against the json names
	// (encoding/json itself matches keys case-insensitively).
	known := map[string]bool{}
	for _, k := range configKeys() {
		known[k] = true
	}
	dec := json.NewDecoder(bytes.NewReader(data))
	tok, err := dec.Token()
	if err != nil {
		return cfg, describeJSONError(data, err)
	}
	if d, ok := tok.(json.Delim); !ok || d != '{' {
		return cfg, fmt.Errorf("expected a JSON object, got %v", tok)
	}
	seen := map[string]bool{}
	for dec.More() {
		tok, err := dec.Token()
		if err != nil {
			return cfg, describeJSONError(data, err)
		}
		key := tok.(string) // object keys are always strings
		if !known[key] {
			return cfg, fmt.Errorf("unknown key %q%s", key, suggestKey(key))
		}
		if seen[key] {
			return cfg, fmt.Errorf("key %q appears twice", key)
		}
		seen[key] = true
		var skip json.RawMessage
		if err := dec.Decode(&skip); err != nil {
			return cfg, describeJSONError(data, err)
		}
	}
	if _, err := dec.Token(); err != nil { // the closing '}'
		return cfg, describeJSONError(data, err)
	}
	if _, err := dec.Token(); err != io.EOF {
		line, col := lineCol(data, dec.InputOffset())
		return cfg, fmt.Errorf("line %d, column %d: text after the JSON object", line, col)
	}

	// Second pass: decode for real (DisallowUnknownFields as a second guard).
	dec = json.NewDecoder(bytes.NewReader(data))
	dec.DisallowUnknownFields()
	if err := dec.Decode(&cfg); err != nil {
		return cfg, describeJSONError(data, err)
	}
	return cfg, nil
}

func suggestKey(key string) string {
	norm := func(s string) string {
		return strings.ToLower(strings.NewReplacer("-", "", "_", "").Replace(s))
	}
	for _, k := range configKeys() {
		if norm(k) == norm(key) {
			return fmt.Sprintf(" (did you mean %q?)", k)
		}
	}
	return ""
}

func describeJSONError(data []byte, err error) error { return JSONError(data, err) }

// JSONError rewords an error of encoding/json decoding data for people: the line and
// column of a syntax error or a value of the wrong kind, "the file is empty" or "cut
// short" for an early end, and kinds of value ("a number", "a list") instead of Go types.
func JSONError(data []byte, err error) error {
	var syn *json.SyntaxError
	var typ *json.UnmarshalTypeError
	switch {
	case err == nil:
		return nil
	case errors.As(err, &syn):
		line, col := lineCol(data, max(syn.Offset-1, 0)) // Offset is just past the bad byte
		return fmt.Errorf("line %d, column %d: %s", line, col, strings.TrimPrefix(syn.Error(), "json: "))
	case errors.As(err, &typ):
		where := ""
		if typ.Offset > 0 {
			line, col := lineCol(data, valueStart(data, typ.Offset))
			where = fmt.Sprintf("line %d, column %d: ", line, col)
		}
		field := ""
		if typ.Field != "" {
			field = fmt.Sprintf("key %q: ", typ.Field)
		}
		if k := typ.Type.Kind(); (k == reflect.Float64 || k == reflect.Float32) && strings.HasPrefix(typ.Value, "number ") {
			return fmt.Errorf("%s%s%s is out of range", where, field, strings.TrimPrefix(typ.Value, "number "))
		}
		return fmt.Errorf("%s%swant %s, got %s", where, field, JSONKind(typ.Type), jsonValueWord(typ.Value))
	case errors.Is(err, io.EOF), errors.Is(err, io.ErrUnexpectedEOF):
		line, col := lineCol(data, int64(len(data)))
		if len(bytes.TrimSpace(data)) == 0 {
			return fmt.Errorf("the file is empty (want a JSON object)")
		}
		return fmt.Errorf("line %d, column %d: unexpected end of the file (an object, array or string is not closed)", line, col)
	}
	msg := err.Error()
	if k, ok := strings.CutPrefix(msg, "json: unknown field "); ok {
		return fmt.Errorf("unknown key %s", k)
	}
	return errors.New(strings.TrimPrefix(msg, "json: "))
}

// JSONKind names the kind of JSON value a Go type takes: "a number", "a list of numbers".
func JSONKind(t reflect.Type) string {
	if t == nil {
		return "a value"
	}
	switch t.Kind() {
	case reflect.Pointer:
		return JSONKind(t.Elem())
	case reflect.Bool:
		return "true or false"
	case reflect.Int, reflect.Int8, reflect.Int16, reflect.Int32, reflect.Int64,
		reflect.Uint, reflect.Uint8, reflect.Uint16, reflect.Uint32, reflect.Uint64:
		return "an integer"
	case reflect.Float32, reflect.Float64:
		return "a number"
	case reflect.String:
		return "a string"
	case reflect.Slice, reflect.Array:
		if t.Elem().Kind() == reflect.Uint8 && t.Kind() == reflect.Slice && t.Name() != "" {
			return "a value" // json.RawMessage
		}
		return "a list of " + strings.TrimPrefix(strings.TrimPrefix(plural(JSONKind(t.Elem())), "a "), "an ")
	case reflect.Map, reflect.Struct:
		return "an object"
	}
	return "a value"
}

func plural(kind string) string {
	switch kind {
	case "true or false":
		return "true/false values"
	case "a value":
		return "values"
	}
	if strings.HasPrefix(kind, "a list") {
		return "lists"
	}
	return kind + "s"
}

// jsonValueWord names the kind of a JSON value as encoding/json describes it.
func jsonValueWord(v string) string {
	switch {
	case v == "array":
		return "a list"
	case v == "object":
		return "an object"
	case v == "string":
		return "a string"
	case v == "bool":
		return "true or false"
	case v == "null":
		return "null"
	case strings.HasPrefix(v, "number"):
		if n := strings.TrimSpace(strings.TrimPrefix(v, "number")); n != "" {
			return "the number " + n
		}
		return "a number"
	}
	return v
}

// valueStart is where the JSON value that an UnmarshalTypeError's offset points into
// begins: encoding/json gives the offset just past a scalar, or just past the opening
// bracket of an array or object. It is found among the tokens of data (the offset itself
// when none ends there).
func valueStart(data []byte, offset int64) int64 {
	dec := json.NewDecoder(bytes.NewReader(data))
	dec.UseNumber() // a number out of float64's range is still a token
	for prev := int64(0); ; {
		_, err := dec.Token()
		end := dec.InputOffset()
		if err != nil || end > offset {
			return offset
		}
		if end == offset {
			start := prev // the token follows spaces, a colon or a comma
			for start < end && bytes.IndexByte([]byte(" \t\r\n:,"), data[start]) >= 0 {
				start++
			}
			return start
		}
		prev = end
	}
}

func lineCol(data []byte, offset int64) (line, col int) {
	line, col = 1, 1
	for i := int64(0); i < offset && i < int64(len(data)); i++ {
		if data[i] == '\n' {
			line++
			col = 1
		} else {
			col++
		}
	}
	return line, col
}
