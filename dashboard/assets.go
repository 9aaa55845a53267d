package dashboard

import (
	"bytes"
	"crypto/sha256"
	"embed"
	"encoding/hex"
	"fmt"
	"html/template"
	"net/http"
	"strconv"
)

// assets are the templates, the style sheet, the script and the icon, in the
// binary: the dashboard loads nothing from elsewhere, and building it
// needs Go alone.
//
//go:embed assets
var assets embed.FS

// pageNames are the pages; each is assets/NAME.html with the layout and
// the partials.
var pageNames = []string{"overview", "job", "runs", "run", "login", "error", "backfill"}

// parsePages parses each page with the layout and the partials.
func parsePages() (map[string]*template.Template, error) {
	out := map[string]*template.Template{}
	for _, name := range pageNames {
		t, err := template.New(name).Funcs(funcs).ParseFS(assets, "assets/layout.html", "assets/partials.html", "assets/"+name+".html")
		if err != nil {
			return nil, fmt.Errorf("dashboard: page %s: %w", name, err)
		}
		out[name] = t
	}
	return out, nil
}

// staticFile is a file of /ui/static/, with the hash its URLs carry.
type staticFile struct {
	body        []byte
	contentType string
	version     string
}

// staticFiles are the files served at /ui/static/.
var staticFiles = func() map[string]staticFile {
	out := map[string]staticFile{}
	for name, ct := range map[string]string{"app.css": "text/css; charset=utf-8", "app.js": "text/javascript; charset=utf-8",
		"favicon.ico": "image/x-icon"} {
		b, err := assets.ReadFile("assets/" + name)
		if err != nil {
			panic("dashboard: embedded asset missing: " + name)
		}
		sum := sha256.Sum256(b)
		out[name] = staticFile{body: b, contentType: ct, version: hex.EncodeToString(sum[:8])}
	}
	return out
}()

// assetURL is the URL of a static file, with its hash: a browser keeps it
// until the file changes.
func assetURL(name string) string {
	return "/ui/static/" + name + "?v=" + staticFiles[name].version
}

// serveAsset serves a static file, to anyone: they hold nothing secret.
// With the hash of the file as it is, a browser may keep it a year.
func serveAsset(w http.ResponseWriter, r *http.Request) {
	f, ok := staticFiles[r.PathValue("name")]
	if !ok {
		http.NotFound(w, r)
		return
	}
	cache := "no-cache"
	if r.URL.Query().Get("v") == f.version {
		cache = "public, max-age=31536000, immutable"
	}
	writeAsset(w, r, f, cache)
}

// serveFavicon serves the icon at /favicon.ico, where browsers ask for it
// on their own (the pages link the one of /ui/static/), to anyone; a
// browser may keep it a day.
func serveFavicon(w http.ResponseWriter, r *http.Request) {
	writeAsset(w, r, staticFiles["favicon.ico"], "public, max-age=86400")
}

func writeAsset(w http.ResponseWriter, r *http.Request, f staticFile, cache string) {
	w.Header().Set("Content-Type", f.contentType)
	w.Header().Set("Content-Length", strconv.Itoa(len(f.body)))
	w.Header().Set("Cache-Control", cache)
	w.WriteHeader(http.StatusOK)
	if r.Method != http.MethodHead {
		_, _ = bytes.NewReader(f.body).WriteTo(w)
	}
}
