package schedule_test

import (
	"testing"
	"time"

	"github.com/schedulerd/schedulerd/jobs/schedule"
)

func BenchmarkNext(b *testing.B) {
	for _, bc := range []struct{ spec, zone string }{
		{"30 2 * * *", "Europe/Berlin"},
		{"*/15 * * * *", "Europe/Berlin"},
		{"0 * * * *", "America/Santiago"},
		{"*/10 * * * * *", "Australia/Lord_Howe"},
		{"0 9 * * mon-fri", "America/New_York"},
		{"0 0 29 2 *", "UTC"},
		{"0 0 13 * 5", "Asia/Kolkata"},
		{"0 0 L * *", "Europe/Berlin"},
		{"30 2 * 3 0L", "Europe/Berlin"},
		{"0 9 15W * *", "America/New_York"},
		{"@every 90m", "Europe/Berlin"},
	} {
		b.Run(bc.spec+"/"+bc.zone, func(b *testing.B) {
			loc := mustLoad(b, bc.zone)
			s, err := schedule.Parse(bc.spec, loc)
			if err != nil {
				b.Fatal(err)
			}
			// Walk the fire times of 2026, both DST transitions included.
			first := time.Date(2026, 1, 1, 0, 0, 0, 0, loc)
			from := first
			for b.Loop() {
				from = s.Next(from)
				if from.Year() > 2026 {
					from = first
				}
			}
		})
	}
}

func BenchmarkParse(b *testing.B) {
	loc := mustLoad(b, "Europe/Berlin")
	for b.Loop() {
		if _, err := schedule.Parse("*/15 9-17 * * mon-fri", loc); err != nil {
			b.Fatal(err)
		}
	}
}
