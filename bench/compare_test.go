package main

import (
	"fmt"
	"math"
	"slices"
	"strings"
	"testing"
	"time"
)

// riverSummaryFormat is the format of the last line of `river bench`
// (cmd/river/riverbench, the version that bench/river pins).
const riverSummaryFormat = "bench: total jobs worked [ %10d ], total jobs inserted [ %10d ], overall job/sec [ %10.1f ], running %s\n"

func TestParseRiverSummary(t *testing.T) {
	progress := "bench: jobs worked [      41532 ], inserted [          0 ], job/sec [    20766.0 ] [2s]\n"
	tests := []struct {
		name    string
		out     string
		want    riverSummary
		wantErr string
	}{
		{
			name: "burn-down with progress lines before the summary",
			out: progress + progress + fmt.Sprintf(riverSummaryFormat, 200000, 200000, 17123.4,
				11680*time.Millisecond+123*time.Microsecond),
			want: riverSummary{worked: 200000, inserted: 200000, rate: 17123.4, took: 11680*time.Millisecond + 123*time.Microsecond},
		},
		{
			name: "fewer jobs worked than inserted",
			out:  fmt.Sprintf(riverSummaryFormat, 9990, 10000, 999.0, 10*time.Second),
			want: riverSummary{worked: 9990, inserted: 10000, rate: 999, took: 10 * time.Second},
		},
		{
			name:    "no summary: River failed before it",
			out:     progress + "error: timed out waiting for starting jobs to be inserted\n",
			wantErr: "no summary line",
		},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			got, err := parseRiverSummary(tt.out)
			if tt.wantErr != "" {
				if err == nil || !strings.Contains(err.Error(), tt.wantErr) {
					t.Fatalf("parseRiverSummary: error %v, want one containing %q", err, tt.wantErr)
				}
				return
			}
			if err != nil {
				t.Fatalf("parseRiverSummary: %v", err)
			}
			if got != tt.want {
				t.Errorf("parseRiverSummary = %+v, want %+v", got, tt.want)
			}
		})
	}
}

func TestPairRatios(t *testing.T) {
	nan := math.NaN()
	tests := []struct {
		name string
		a, b passRates
		want []float64
	}{
		{"every pass measured", passRates{30, 20, 10}, passRates{15, 10, 20}, []float64{2, 2, 0.5}},
		{"a pass either side missed is left out, not paired with another pass",
			passRates{30, nan, 24}, passRates{15, 10, nan}, []float64{2}},
		{"a zero reference is left out", passRates{30}, passRates{0}, nil},
		{"passes beyond the shorter side are left out", passRates{30, 40}, passRates{15}, []float64{2}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			if got := pairRatios(tt.a, tt.b); !slices.Equal(got, tt.want) {
				t.Errorf("pairRatios(%v, %v) = %v, want %v", tt.a, tt.b, got, tt.want)
			}
		})
	}
}

func TestRatioFigure(t *testing.T) {
	f := Figure{Value: 1.714, Unit: "x", Target: atLeast(1)}
	if got, want := f.measured(), "1.71x"; got != want {
		t.Errorf("measured = %q, want %q", got, want)
	}
	if got, want := f.target(), ">= 1.00x"; got != want {
		t.Errorf("target = %q, want %q", got, want)
	}
	if got, want := f.Verdict(), "met"; got != want {
		t.Errorf("verdict = %q, want %q", got, want)
	}
	f.Value = 0.8
	if got, want := f.Verdict(), "missed by 1.25x"; got != want {
		t.Errorf("verdict of 0.80x = %q, want %q", got, want)
	}
}
