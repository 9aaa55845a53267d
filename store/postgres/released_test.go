package postgres

import (
	"testing"

	"github.com/schedulerd/schedulerd/store/storetest"
)

// released are the migrations that releases shipped, which never change
// (docs/development.md#releases).
var released = []storetest.Released{
	{Name: "001_init.up.sql", SHA256: "5c408df72a3e7ab99cd3e6886ee9fbaaf9b84d29b223273e8ff750e5ce6cdf65"}, // v0.1.0
}

// TestReleasedMigrationsUnchanged: every released migration is still
// embedded, byte for byte.
func TestReleasedMigrationsUnchanged(t *testing.T) {
	storetest.CheckReleased(t, embeddedMigrations, released)
}
