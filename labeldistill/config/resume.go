package config

// resume.go: the resume policy: which settings may differ between a checkpointed run and the
// run that continues it (Diff, ResumeConflicts).

import (
	"encoding/json"
	"fmt"
	"reflect"

	"github.com/ldtorch/ldtorch/labeldistill/data"
)

// Diff lists, in declaration order, the json names of the fields whose values differ
// between a and b. Compare resolved configs (Resolved), otherwise "auto" and its value
// differ. A nil and an empty slice count as different (null = auto, [] = none). A
// configuration an earlier version recorded is read as that version meant it (asRecordedNow).
func Diff(a, b Config) []string {
	a, b = asRecordedNow(a), asRecordedNow(b)
	va, vb := reflect.ValueOf(a), reflect.ValueOf(b)
	t := va.Type()
	var out []string
	for i := 0; i < t.NumField(); i++ {
		if !reflect.DeepEqual(va.Field(i).Interface(), vb.Field(i).Interface()) {
			out = append(out, jsonName(t.Field(i)))
		}
	}
	return out
}

// DiffDetails is Diff with values: one "name: <a as JSON> -> <b as JSON>" line per field.
func DiffDetails(a, b Config) []string {
	a, b = asRecordedNow(a), asRecordedNow(b)
	names := Diff(a, b)
	ja, jb := fieldJSON(a), fieldJSON(b)
	out := make([]string, len(names))
	for i, n := range names {
		out[i] = fmt.Sprintf("%s: %s -> %s", n, ja[n], jb[n])
	}
	return out
}

// asRecordedNow gives a configuration that an earlier version recorded (in a checkpoint or a
// report) the values it meant by what it left out, so that it compares equal to the same
// settings recorded today.
func asRecordedNow(c Config) Config {
	if c.BaseSeed == nil { // recorded before base_seed existed: the seed drew the base
		seed := c.Seed
		c.BaseSeed = &seed
	}
	if c.Learn == "" { // recorded before learn existed: labels were learnt
		c.Learn = LearnLabels
	}
	if c.ModelTraining == "" { // recorded before model_training existed: the model always trained
		c.ModelTraining = ModelTrainAlways
	}
	// An image folder named by a relative path (before folders were recorded absolute) is
	// the folder that path names from here.
	for _, name := range []*string{&c.Dataset, &c.Source} {
		if abs, err := data.AbsImageFolderName(*name); err == nil {
			*name = abs
		}
	}
	return c
}

func fieldJSON(c Config) map[string]string {
	v := reflect.ValueOf(c)
	t := v.Type()
	m := make(map[string]string, t.NumField())
	for i := 0; i < t.NumField(); i++ {
		b, err := json.Marshal(v.Field(i).Interface())
		if err != nil {
			b = []byte(fmt.Sprintf("%v", v.Field(i).Interface()))
		}
		m[jsonName(t.Field(i))] = string(b)
	}
	return m
}

// operationalFields may differ between a run and its resumption: they change where and how
// fast a run computes, not what it computes.
var operationalFields = map[string]bool{
	"device":           true,
	"threads":          true,
	"data_dir":         true,
	"out":              true,
	"checkpoint_every": true,
	"history_every":    true,
	"grad_var_window":  true,
	// Like device: it changes GPU rounding, not what is computed; allowed deliberately.
	"allow_tf32": true,
	// Which files may be read, not what is computed: the data checksums and digest of a
	// checkpoint are compared on their own.
	"allow_unknown_data": true,
}

// IsOperational reports whether the setting named field (a json name) only changes where and
// how fast a run computes, not what it computes (device, threads, data_dir, out, ...).
func IsOperational(field string) bool { return operationalFields[field] }

// ResumeConflicts is Diff without the operational fields (device, threads, data_dir, out,
// checkpoint_every) and without a larger epochs (a run, finished or not, may be extended):
// a non-empty result means a checkpoint must not be resumed under current. (Device changes
// can alter floating-point results; they are allowed deliberately.)
func ResumeConflicts(checkpointed, current Config) []string {
	var out []string
	for _, n := range Diff(checkpointed, current) {
		if operationalFields[n] || (n == "epochs" && current.Epochs > checkpointed.Epochs) {
			continue
		}
		out = append(out, n)
	}
	return out
}
