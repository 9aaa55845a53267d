package postgres

import (
	"testing"

	"github.com/schedulerd/schedulerd/store/storetest"
)

// released are the migrations that releases shipped, which never change
// (docs/development.md#releases).
var released = []storetest.Released{
	{Name: "001_init.up.sql", SHA256: "252c13c0677feec9a25de4852289ddc3d013bb9ef8834ad3d4275d8a3332d306"}, // v0.1.0
}

// TestReleasedMigrationsUnchanged: every released migration is still
// embedded, byte for byte.
func TestReleasedMigrationsUnchanged(t *testing.T) {
	storetest.CheckReleased(t, embeddedMigrations, released)
}
