package scheduler

import (
	"context"

	"github.com/schedulerd/schedulerd/store"
	"github.com/schedulerd/schedulerd/store/sqlite"
)

func sqliteOpen(path string) (store.Store, error) {
	return sqlite.Open(context.Background(), sqlite.Options{Path: path})
}
