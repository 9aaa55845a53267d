package sqlite

import (
	"testing"

	"github.com/schedulerd/schedulerd/store/storetest"
)

// released are the migrations that releases shipped, which never change
// (docs/development.md#releases).
var released = []storetest.Released{
	{Name: "001_init.up.sql", SHA256: "6f55724409488b877bc4d50ebd6a43a7f15a713ecff7a9e3c8745ef03392a60c"}, // v0.1.0
}

// TestReleasedMigrationsUnchanged: every released migration is still
// embedded, byte for byte.
func TestReleasedMigrationsUnchanged(t *testing.T) {
	storetest.CheckReleased(t, embeddedMigrations, released)
}
