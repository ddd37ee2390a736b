package config

import (
	"reflect"
	"strings"
	"testing"
)

// TestSettings checks that every Config json key has exactly one Setting, in the fields'
// order, with a help text and a category, that no Setting names a key Config lacks, and
// that a setting whose default is a zero value says what that zero means.
func TestSettings(t *testing.T) {
	keys := configKeys()
	fields := map[string]bool{}
	for _, k := range keys {
		fields[k] = true
	}
	all := Settings()
	count := map[string]int{}
	for _, s := range all {
		count[s.Key]++
		if !fields[s.Key] {
			t.Errorf("setting %q: Config has no such key", s.Key)
		}
		if strings.TrimSpace(s.Help) == "" || strings.TrimSpace(s.Category) == "" {
			t.Errorf("setting %q: help %q, category %q", s.Key, s.Help, s.Category)
		}
	}
	for _, k := range keys {
		if count[k] != 1 {
			t.Errorf("key %q: %d settings, want 1", k, count[k])
		}
	}
	if len(all) == len(keys) {
		for i, s := range all {
			if s.Key != keys[i] {
				t.Errorf("setting %d is %q, field %d is %q: keep the fields' order", i, s.Key, i, keys[i])
				break
			}
		}
	}
	if _, ok := Describe("no_such_key"); ok {
		t.Error("Describe found a key Config lacks")
	}

	def := reflect.ValueOf(Default())
	for i := 0; i < def.NumField(); i++ {
		v, key := def.Field(i), jsonName(def.Type().Field(i))
		s, _ := Describe(key)
		if !v.IsZero() || v.Kind() == reflect.Bool || s.Default != "" {
			continue
		}
		text := strings.ToLower(s.Help + " " + s.Notes)
		if !strings.Contains(text, "auto") && !strings.Contains(text, "default") && !strings.Contains(text, "unset") {
			t.Errorf("setting %q: its default is a zero value and its text does not say what it means", key)
		}
	}
}

func TestDefaultText(t *testing.T) {
	for key, want := range map[string]string{
		"outer_batch": "1024",      // Default's value
		"model_betas": "0.9,0.999", // a pair
		"epochs":      "auto",      // a zero that means auto
		"threads":     "0",         // a zero that does not (Setting.Default)
		"base_seed":   "--seed",
		"data_dir":    "",
		"baselines":   "",
		"allow_tf32":  "",
	} {
		if got := DefaultText(key); got != want {
			t.Errorf("DefaultText(%q) = %q, want %q", key, got, want)
		}
	}
}

// TestArchHelpNamesEveryNetwork: the help of arch and eval_arch lists every network the
// check accepts (resnet and torchscript:FILE were missing from arch's once they were added).
func TestArchHelpNamesEveryNetwork(t *testing.T) {
	for _, key := range []string{"arch", "eval_arch"} {
		s, ok := Describe(key)
		if !ok {
			t.Fatalf("no setting %s", key)
		}
		for _, arch := range []string{ArchLeNet, ArchAlexNet, ArchResNet, ArchConvNet, TorchScriptPrefix + "FILE"} {
			if !strings.Contains(s.Help, arch) {
				t.Errorf("%s's help does not name %s: %q", key, arch, s.Help)
			}
		}
	}
}
