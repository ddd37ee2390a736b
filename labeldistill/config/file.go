package config

// file.go: a Config as a JSON file: writing it (MarshalIndent) and loading it
// (ReadFile), with unknown keys and syntax errors named by line and column.

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"os"
	"reflect"
	"strings"
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
	data, err := os.ReadFile(path)
	if err != nil {
		return Config{}, err
	}
	cfg, err := Parse(data)
	if err != nil {
		return Config{}, fmt.Errorf("%s: %w", path, err)
	}
	return cfg, nil
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

func describeJSONError(data []byte, err error) error {
	var syn *json.SyntaxError
	var typ *json.UnmarshalTypeError
	switch {
	case errors.As(err, &syn):
		line, col := lineCol(data, syn.Offset)
		return fmt.Errorf("line %d, column %d: %v", line, col, syn)
	case errors.As(err, &typ):
		return fmt.Errorf("key %q: cannot use JSON %s as %v", typ.Field, typ.Value, typ.Type)
	case errors.Is(err, io.EOF), errors.Is(err, io.ErrUnexpectedEOF):
		line, col := lineCol(data, int64(len(data)))
		if len(bytes.TrimSpace(data)) == 0 {
			return fmt.Errorf("the file is empty (want a JSON object)")
		}
		return fmt.Errorf("line %d, column %d: unexpected end of the file (an object, array or string is not closed)", line, col)
	}
	return err
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
