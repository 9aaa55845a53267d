package schedule_test

import (
	"fmt"
	"time"

	"github.com/schedulerd/schedulerd/jobs/schedule"
)

// A fixed-time job whose time is skipped by the spring-forward jump runs once,
// at the jump; a wildcard job follows real time.
func ExampleSchedule_Next() {
	berlin, err := time.LoadLocation("Europe/Berlin")
	if err != nil {
		panic(err)
	}
	from := time.Date(2026, 3, 29, 0, 0, 0, 0, berlin)
	for _, spec := range []string{"30 2 * * *", "30 * * * *"} {
		s, err := schedule.Parse(spec, berlin)
		if err != nil {
			panic(err)
		}
		fmt.Print(spec, ":")
		for t, i := from, 0; i < 3; i++ {
			t = s.Next(t)
			fmt.Print(" ", t.Format("15:04 MST"))
		}
		fmt.Println()
	}
	// Output:
	// 30 2 * * *: 03:00 CEST 02:30 CEST 02:30 CEST
	// 30 * * * *: 00:30 CET 01:30 CET 03:30 CEST
}

func ExampleParse() {
	s, err := schedule.Parse("CRON_TZ=Asia/Tokyo 0 9 * * mon-fri", time.UTC)
	if err != nil {
		panic(err)
	}
	fmt.Println(s.Location(), s.Next(time.Date(2026, 1, 2, 12, 0, 0, 0, time.UTC)))

	_, err = schedule.Parse("0 0 30 2 *", time.UTC)
	fmt.Println(err)
	// Output:
	// Asia/Tokyo 2026-01-05 09:00:00 +0900 JST
	// schedule "0 0 30 2 *": never fires: no fire time within 8 years
}
