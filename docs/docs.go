// Package docs holds the configuration reference, configuration.md, which
// `schedulerd man 5` renders as the man page schedulerd.toml(5): the page
// and the reference are one text.
package docs

import _ "embed"

// Configuration is configuration.md: every key of the config file with its
// default and meaning.
//
//go:embed configuration.md
var Configuration string
