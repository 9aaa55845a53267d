package sqlite

import (
	"testing"

	"github.com/schedulerd/schedulerd/store/storetest"
)

// released are the migrations that releases shipped, which never change
// (docs/development.md#releases).
var released = []storetest.Released{
	{Name: "001_init.up.sql", SHA256: "d79899c379d7a872c9ae6524caa1318de718e2f01c74108aad7db61776818c71"}, // v0.1.0
}

// TestReleasedMigrationsUnchanged: every released migration is still
// embedded, byte for byte.
func TestReleasedMigrationsUnchanged(t *testing.T) {
	storetest.CheckReleased(t, embeddedMigrations, released)
}
