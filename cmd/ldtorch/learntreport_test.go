// The report of artifacts whose images are learnt: the history's gradient is the images'
// (learn images, method dd) and is named so, and gradvar, which refuses such artifacts, is
// not suggested; the learning curves say what validation keeps.

package main

import (
	"path/filepath"
	"strings"
	"testing"
)

func TestReportOfLearntImagesNamesTheirGradient(t *testing.T) {
	shared := sharedDatasets(t)
	for _, tc := range []struct {
		name string
		args []string
		want string // the gradient the history holds
		kept string // what the best validation kept
	}{
		{"dd", tinyImages(shared, "", "dd", "--quiet"), "image meta-gradient dL/dX", "images"},
		{"images", tinyImages(shared, "", "images", "--quiet"), "image meta-gradient dL/dX", "images"},
		{"both", tinyDistill(shared, "", "--method", "ld", "--learn", "both", "--quiet"), "label meta-gradient dL/dY", "images and labels"},
	} {
		out := filepath.Join(t.TempDir(), tc.name)
		args := append(tc.args, "--out", out)
		if r := ldtorch(t, nil, args...); r.code != 0 {
			t.Fatalf("%s: exit %d: %s", tc.name, r.code, r.stderr)
		}
		if r := ldtorch(t, nil, "report", out, "--data-dir", shared); r.code != 0 {
			t.Fatalf("report %s: exit %d: %s", tc.name, r.code, r.stderr)
		}
		html := string(mustReadFile(t, filepath.Join(out, "report.html")))
		if !strings.Contains(html, tc.want) {
			t.Errorf("%s: report.html does not name the %s", tc.name, tc.want)
		}
		if tc.want != "label meta-gradient dL/dY" && strings.Contains(html, "dL/dY") {
			t.Errorf("%s: report.html speaks of the label meta-gradient dL/dY", tc.name)
		}
		if strings.Contains(html, "learning_curves.png") && !strings.Contains(html, "(the "+tc.kept+" kept are the best validated)") {
			t.Errorf("%s: the learning curves do not say the %s are what validation keeps", tc.name, tc.kept)
		}
		if strings.Contains(html, "Run `ldtorch gradvar") {
			t.Errorf("%s: report.html suggests ldtorch gradvar, which refuses learnt images", tc.name)
		}
	}
}
