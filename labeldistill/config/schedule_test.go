package config

import (
	"reflect"
	"testing"
)

func TestBaselineStepGrid(t *testing.T) {
	want1000 := []int{10, 25, 50, 75, 100, 150, 200, 250, 300, 350, 400, 450, 500, 550, 600,
		650, 700, 750, 800, 850, 900, 950, 1000}
	if got := BaselineStepGrid(1000); !reflect.DeepEqual(got, want1000) {
		t.Errorf("BaselineStepGrid(1000) = %v", got)
	}
	want1700 := append(append([]int(nil), want1000...), 1050, 1100, 1150, 1200, 1250, 1300,
		1350, 1400, 1450, 1500, 1550, 1600, 1650, 1700)
	if got := BaselineStepGrid(1700); !reflect.DeepEqual(got, want1700) {
		t.Errorf("BaselineStepGrid(1700) = %v", got)
	}
	for max, want := range map[int][]int{
		0:    nil,
		-5:   nil,
		5:    {5},
		10:   {10},
		60:   {10, 25, 50, 60},
		75:   {10, 25, 50, 75},
		120:  {10, 25, 50, 75, 100, 120},
		1030: append(append([]int(nil), want1000...), 1030),
	} {
		if got := BaselineStepGrid(max); !reflect.DeepEqual(got, want) {
			t.Errorf("BaselineStepGrid(%d) = %v, want %v", max, got, want)
		}
	}
	for max := 1; max <= 2000; max++ {
		g := BaselineStepGrid(max)
		if g[len(g)-1] != max {
			t.Fatalf("BaselineStepGrid(%d) does not end at %d: %v", max, max, g)
		}
		for i := 1; i < len(g); i++ {
			if g[i] <= g[i-1] {
				t.Fatalf("BaselineStepGrid(%d) not increasing: %v", max, g)
			}
		}
	}
}
