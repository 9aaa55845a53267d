package main

import (
	"bytes"
	"compress/gzip"
	"context"
	"crypto/sha256"
	"debug/buildinfo"
	"debug/elf"
	"encoding/hex"
	"fmt"
	"io"
	"maps"
	"os"
	"os/exec"
	"path/filepath"
	"runtime"
	"slices"
	"strings"
	"time"

	"github.com/goreleaser/nfpm/v2"
	"github.com/goreleaser/nfpm/v2/deb"
	"github.com/goreleaser/nfpm/v2/files"
	"github.com/goreleaser/nfpm/v2/rpm"
)

// What the packages say about themselves.
const (
	packageName = "schedulerd"
	homepage    = "https://github.com/schedulerd/schedulerd"
	// maintainer is a placeholder until the project names a contact.
	maintainer = "schedulerd maintainers <maintainers@schedulerd.invalid>"
	summary    = "cron and deferred-job scheduler daemon"
	// rpmSummary is capitalized, as rpm's Summary tags are.
	rpmSummary = "Cron and deferred-job scheduler daemon"
	// license is the rpm License tag: the project states no license yet
	// (the copyright file says so).
	license     = "LicenseRef-not-stated"
	description = summary + `
schedulerd runs commands on cron schedules, once at a given time, or when
triggered, with retries, time windows, bounded output and a history of
every run. A cron tick fires once, also across restarts and across the
nodes of a cluster on PostgreSQL; the state lives in an embedded SQLite
database otherwise. The same binary is the client of the daemon's socket:
schedulerd trigger, runs, jobs, health.
.
The package installs the daemon and its systemd unit, which runs it as
the system user schedulerd (made on install), a commented config in
/etc/schedulerd, man pages and shell completion. It enables nothing.`
)

// release is one run of dist.
type release struct {
	root, out       string
	version, commit string
	date            time.Time
	ldflags         string
	archs, formats  []string
}

// make builds the binaries, generates what the packages hold besides them,
// writes the packages and SHA256SUMS, and returns the files written.
func (r *release) make(ctx context.Context) ([]string, error) {
	binaries, host, err := r.buildAll(ctx)
	if err != nil {
		return nil, err
	}
	defer os.RemoveAll(filepath.Dir(host))
	written := slices.Sorted(maps.Values(binaries))
	pkgs, err := r.packages(ctx, binaries, host)
	if err != nil {
		return nil, err
	}
	written = append(written, pkgs...)
	sums, err := writeSums(r.out, written)
	if err != nil {
		return nil, err
	}
	return append(written, sums), nil
}

// buildAll builds the binary of each architecture into the output
// directory, and one for this machine into a directory of its own (a
// copy when it is among them), which the caller removes.
func (r *release) buildAll(ctx context.Context) (binaries map[string]string, host string, err error) {
	if err := os.MkdirAll(r.out, 0o755); err != nil {
		return nil, "", err
	}
	binaries = map[string]string{}
	for _, arch := range r.archs {
		bin := filepath.Join(r.out, fmt.Sprintf("%s_%s_linux_%s", packageName, r.version, arch))
		if err := r.build(ctx, arch, bin); err != nil {
			return nil, "", err
		}
		binaries[arch] = bin
	}
	dir, err := os.MkdirTemp("", "schedulerd-dist-")
	if err != nil {
		return nil, "", err
	}
	host = filepath.Join(dir, "schedulerd")
	if bin, ok := binaries[runtime.GOARCH]; ok {
		err = copyFile(bin, host)
	} else {
		err = r.build(ctx, runtime.GOARCH, host)
	}
	if err != nil {
		os.RemoveAll(dir)
		return nil, "", err
	}
	return binaries, host, nil
}

// packages writes a package of each format for each architecture, with
// the man pages and completions that the host binary prints.
func (r *release) packages(ctx context.Context, binaries map[string]string, host string) ([]string, error) {
	work, err := os.MkdirTemp("", "schedulerd-stage-")
	if err != nil {
		return nil, err
	}
	defer os.RemoveAll(work)
	a, err := stage(ctx, r.root, host, work, r)
	if err != nil {
		return nil, err
	}
	var written []string
	for _, arch := range r.archs {
		for _, format := range r.formats {
			path, err := writePackage(format, r.info(format, arch, binaries[arch], a), r.out)
			if err != nil {
				return nil, fmt.Errorf("%s package for %s: %w", format, arch, err)
			}
			written = append(written, path)
		}
	}
	return written, nil
}

func copyFile(src, dst string) error {
	b, err := os.ReadFile(src)
	if err != nil {
		return err
	}
	return os.WriteFile(dst, b, 0o755)
}

// build compiles cmd/schedulerd for linux/arch, static and stamped, and
// checks that the result is a static executable.
func (r *release) build(ctx context.Context, arch, out string) error {
	abs, err := filepath.Abs(out)
	if err != nil {
		return err
	}
	cmd := exec.CommandContext(ctx, "go", "build", "-trimpath", "-ldflags", r.ldflags, "-o", abs, "./cmd/schedulerd")
	cmd.Dir = r.root
	cmd.Env = append(os.Environ(), "CGO_ENABLED=0", "GOOS=linux", "GOARCH="+arch)
	cmd.Stdout, cmd.Stderr = os.Stderr, os.Stderr
	if err := cmd.Run(); err != nil {
		return fmt.Errorf("build for %s: %w", arch, err)
	}
	return checkStatic(abs)
}

// checkStatic refuses an executable that asks for a dynamic loader or
// names shared libraries.
func checkStatic(path string) error {
	f, err := elf.Open(path)
	if err != nil {
		return err
	}
	defer f.Close()
	for _, p := range f.Progs {
		if p.Type == elf.PT_INTERP {
			return fmt.Errorf("%s is not static: it has an ELF interpreter", path)
		}
	}
	if libs, err := f.ImportedLibraries(); err == nil && len(libs) > 0 {
		return fmt.Errorf("%s is not static: it needs %v", path, libs)
	}
	return nil
}

// assets are the files a package holds besides the binary, generated or
// copied into one directory.
type assets struct {
	dir          string
	docs         []string // relative to dir, under doc/
	rpmChangelog string   // nfpm's changelog for the rpm (chglog YAML)
}

func (a *assets) path(name string) string { return filepath.Join(a.dir, name) }

// stage writes the assets: the unit with ExecStart=/usr/bin/schedulerd, the
// config, root.conf, the man pages (gzipped), the completions, the docs,
// the copyright file and the changelogs.
func stage(ctx context.Context, root, host, dir string, r *release) (*assets, error) {
	a := &assets{dir: dir}
	if err := os.MkdirAll(filepath.Join(dir, "doc", "docs"), 0o755); err != nil {
		return nil, err
	}
	unit, err := os.ReadFile(filepath.Join(root, "systemd", "schedulerd.service"))
	if err != nil {
		return nil, err
	}
	const from, to = "ExecStart=/usr/local/bin/schedulerd ", "ExecStart=/usr/bin/schedulerd "
	if !bytes.Contains(unit, []byte(from)) {
		return nil, fmt.Errorf("systemd/schedulerd.service: no %q to point at /usr/bin", from)
	}
	unit = bytes.ReplaceAll(unit, []byte(from), []byte(to))
	copies := map[string]string{"schedulerd.toml": "systemd/schedulerd.toml", "root.conf": "systemd/root.conf", "doc/README.md": "README.md"}
	guides, err := filepath.Glob(filepath.Join(root, "docs", "*.md"))
	if err != nil {
		return nil, err
	}
	for _, g := range guides {
		copies["doc/docs/"+filepath.Base(g)] = "docs/" + filepath.Base(g)
	}
	for dst, src := range copies {
		b, err := os.ReadFile(filepath.Join(root, src))
		if err != nil {
			return nil, err
		}
		if err := os.WriteFile(a.path(dst), b, 0o644); err != nil {
			return nil, err
		}
		if strings.HasPrefix(dst, "doc/") {
			a.docs = append(a.docs, dst)
		}
	}
	slices.Sort(a.docs)
	if err := os.WriteFile(a.path("schedulerd.service"), unit, 0o644); err != nil {
		return nil, err
	}
	generated := []struct {
		name string
		args []string
		gz   bool
	}{
		{"schedulerd.8.gz", []string{"man", "8"}, true},
		{"schedulerd.toml.5.gz", []string{"man", "5"}, true},
		{"completion.bash", []string{"completion", "bash"}, false},
		{"completion.zsh", []string{"completion", "zsh"}, false},
		{"completion.fish", []string{"completion", "fish"}, false},
	}
	for _, g := range generated {
		out, err := exec.CommandContext(ctx, host, g.args...).Output()
		if err != nil {
			return nil, fmt.Errorf("schedulerd %s: %w", strings.Join(g.args, " "), err)
		}
		if g.gz {
			if out, err = gzipBest(out); err != nil {
				return nil, err
			}
		}
		if err := os.WriteFile(a.path(g.name), out, 0o644); err != nil {
			return nil, err
		}
	}
	copyright, err := copyrightText(host, copyrightYears(root, r.date))
	if err != nil {
		return nil, err
	}
	if err := os.WriteFile(a.path("copyright"), []byte(copyright), 0o644); err != nil {
		return nil, err
	}
	debChangelog, err := gzipBest([]byte(debianChangelog(r)))
	if err != nil {
		return nil, err
	}
	if err := os.WriteFile(a.path("changelog.gz"), debChangelog, 0o644); err != nil {
		return nil, err
	}
	a.rpmChangelog = a.path("changelog.yml")
	return a, os.WriteFile(a.rpmChangelog, []byte(changelogYAML(r, rpmRelease)), 0o644)
}

// gzipBest compresses b at the best level, with no name or time in the
// header, as Debian wants man pages (the same input, the same bytes).
func gzipBest(b []byte) ([]byte, error) {
	var buf bytes.Buffer
	w, err := gzip.NewWriterLevel(&buf, gzip.BestCompression)
	if err != nil {
		return nil, err
	}
	if _, err := w.Write(b); err != nil {
		return nil, err
	}
	if err := w.Close(); err != nil {
		return nil, err
	}
	return buf.Bytes(), nil
}

// changeNote is the one entry of the packages' changelogs: the history is
// the project's.
func changeNote(r *release) string {
	return "Built from commit " + r.commit + "; the changes are in the project's history: " + homepage
}

// rpmRelease is the rpm's Release: the first packaging of a version.
const rpmRelease = "1"

// changelogYAML is the rpm's changelog in chglog's format, which nfpm
// renders as %changelog; its version carries the release, as rpm's does.
func changelogYAML(r *release, release string) string {
	return fmt.Sprintf(`- semver: %q
  date: %s
  packager: %q
  changes:
    - commit: %q
      note: %q
`, r.version+"-"+release, r.date.Format(time.RFC3339), maintainer, r.commit, changeNote(r))
}

// debianChangelog is /usr/share/doc/schedulerd/changelog.gz, in
// dpkg's changelog format. nfpm would name it changelog.Debian.gz, which
// is for packages with a Debian revision; this one is native (its version
// has none).
func debianChangelog(r *release) string {
	return fmt.Sprintf("%s (%s) stable; urgency=medium\n\n%s\n\n -- %s  %s\n",
		packageName, r.version, indent(wrap("* "+changeNote(r), 76), "  ", "    "), maintainer, r.date.Format(time.RFC1123Z))
}

// wrap breaks text into lines of at most width bytes, between words.
func wrap(text string, width int) []string {
	var lines []string
	line := ""
	for _, w := range strings.Fields(text) {
		if line != "" && len(line)+1+len(w) > width {
			lines = append(lines, line)
			line = ""
		}
		if line != "" {
			line += " "
		}
		line += w
	}
	return append(lines, line)
}

// indent joins lines, the first after first and the others after rest.
func indent(lines []string, first, rest string) string {
	for i := range lines {
		if i == 0 {
			lines[i] = first + lines[i]
		} else {
			lines[i] = rest + lines[i]
		}
	}
	return strings.Join(lines, "\n")
}

// copyrightYears is the years of the project's history up to the commit
// built: the year of the repository's first commit, a dash and the year
// of the commit when they differ. Without git, the commit's year.
func copyrightYears(root string, commitTime time.Time) string {
	last := commitTime.UTC().Year()
	out, err := exec.Command("git", "-C", root, "log", "--reverse", "--format=%cI", "--max-parents=0").Output()
	if err != nil {
		return fmt.Sprint(last)
	}
	first, err := time.Parse(time.RFC3339, strings.TrimSpace(strings.SplitN(string(out), "\n", 2)[0]))
	if err != nil || first.UTC().Year() >= last {
		return fmt.Sprint(last)
	}
	return fmt.Sprintf("%d-%d", first.UTC().Year(), last)
}

// copyrightText is /usr/share/doc/schedulerd/copyright: the project's
// notice and the Go modules that the static binary holds, read from the
// binary's build information.
func copyrightText(binary, years string) (string, error) {
	info, err := buildinfo.ReadFile(binary)
	if err != nil {
		return "", err
	}
	var b strings.Builder
	fmt.Fprintf(&b, `schedulerd
Source: %s

Copyright: %s the schedulerd authors.
License: not stated yet. The project has published no license file; until it
does, ask its maintainers before you redistribute this package.

/usr/bin/schedulerd is statically linked: it holds the Go standard library
and runtime (%s; BSD-3-Clause, Copyright The Go Authors) and these Go
modules, each under the license that its source carries:

`, homepage, years, info.GoVersion)
	for _, d := range info.Deps {
		if d.Replace != nil {
			d = d.Replace
		}
		fmt.Fprintf(&b, "  %s %s\n", d.Path, d.Version)
	}
	return b.String(), nil
}

// file is one entry of a package.
type file struct {
	src, dst string
	mode     os.FileMode
	typ      string // a files.Type*; "" for a plain file
	group    string // "" for root
}

// contents lists what a package of format holds; binary is the static
// binary for its architecture.
func contents(format, binary string, a *assets) files.Contents {
	// The config is 0640 root:schedulerd once installed: it may hold the
	// store's password. dpkg cannot give a file to a group made on
	// install, so the .deb ships it 0644 root's (lintian wants that) and
	// postinst sets its group and mode; rpm's %pre makes the group before
	// the files are unpacked.
	zsh := "/usr/share/zsh/vendor-completions/_schedulerd" // Debian
	configMode, configGroup := os.FileMode(0o644), ""
	docType := ""
	if format == "rpm" {
		zsh = "/usr/share/zsh/site-functions/_schedulerd" // Fedora
		configMode, configGroup = 0o640, "schedulerd"
		docType = files.TypeRPMDoc
	}
	fs := []file{
		{binary, "/usr/bin/schedulerd", 0o755, "", ""},
		{a.path("schedulerd.service"), "/usr/lib/systemd/system/schedulerd.service", 0o644, "", ""},
		{a.path("schedulerd.toml"), "/etc/schedulerd/schedulerd.toml", configMode, files.TypeConfigNoReplace, configGroup},
		{a.path("root.conf"), "/usr/share/schedulerd/root.conf", 0o644, "", ""},
		{a.path("schedulerd.8.gz"), "/usr/share/man/man8/schedulerd.8.gz", 0o644, docType, ""},
		{a.path("schedulerd.toml.5.gz"), "/usr/share/man/man5/schedulerd.toml.5.gz", 0o644, docType, ""},
		{a.path("completion.bash"), "/usr/share/bash-completion/completions/schedulerd", 0o644, "", ""},
		{a.path("completion.zsh"), zsh, 0o644, "", ""},
		{a.path("completion.fish"), "/usr/share/fish/vendor_completions.d/schedulerd.fish", 0o644, "", ""},
		{a.path("copyright"), "/usr/share/doc/schedulerd/copyright", 0o644, docType, ""},
	}
	for _, d := range a.docs {
		fs = append(fs, file{a.path(d), "/usr/share/doc/schedulerd/" + strings.TrimPrefix(d, "doc/"), 0o644, docType, ""})
	}
	if format == "deb" {
		fs = append(fs,
			file{a.path("changelog.gz"), "/usr/share/doc/schedulerd/changelog.gz", 0o644, "", ""},
			file{"", "/usr/share/lintian/overrides/schedulerd", 0o644, "", ""})
	}
	var cs files.Contents
	for _, f := range fs {
		c := &files.Content{Source: f.src, Destination: f.dst, Type: f.typ,
			FileInfo: &files.ContentFileInfo{Mode: f.mode, Owner: "root", Group: "root"}}
		if f.group != "" {
			c.FileInfo.Group = f.group
		}
		cs = append(cs, c)
	}
	// The package's own directories, so that a purge or an erase removes
	// them: the config's, and those under /usr/share.
	for _, dir := range []string{"/etc/schedulerd", "/usr/share/schedulerd", "/usr/share/doc/schedulerd", "/usr/share/doc/schedulerd/docs"} {
		cs = append(cs, &files.Content{Destination: dir, Type: files.TypeDir,
			FileInfo: &files.ContentFileInfo{Mode: 0o755, Owner: "root", Group: "root"}})
	}
	return cs
}

// scriptsDir holds the maintainer scripts, in the repository.
const scriptsDir = "packaging"

// info is what nfpm needs to write the package of format for arch.
func (r *release) info(format, arch, binary string, a *assets) *nfpm.Info {
	cs := contents(format, binary, a)
	for _, c := range cs {
		if c.Destination == "/usr/share/lintian/overrides/schedulerd" {
			c.Source = filepath.Join(r.root, scriptsDir, "deb", "lintian-overrides")
		}
	}
	info := &nfpm.Info{
		Name:          packageName,
		Arch:          arch,
		Platform:      "linux",
		Version:       r.version,
		VersionSchema: "none", // packageVersion made it right for both
		Section:       "admin",
		Priority:      "optional",
		Maintainer:    maintainer,
		Description:   description,
		Vendor:        "schedulerd",
		Homepage:      homepage,
		License:       license,
		MTime:         r.date,
		Overridables:  nfpm.Overridables{Contents: cs},
	}
	scripts := filepath.Join(r.root, scriptsDir, format)
	switch format {
	case "deb":
		info.Depends = []string{"adduser"}
		info.Scripts = nfpm.Scripts{
			PostInstall: filepath.Join(scripts, "postinst"),
			PreRemove:   filepath.Join(scripts, "prerm"),
			PostRemove:  filepath.Join(scripts, "postrm"),
		}
	case "rpm":
		info.Release = rpmRelease
		info.Changelog = a.rpmChangelog
		info.RPM.Summary = rpmSummary
		info.RPM.Group = "System Environment/Daemons"
		info.RPM.Packager = maintainer
		info.Scripts = nfpm.Scripts{
			PreInstall:  filepath.Join(scripts, "pre"),
			PostInstall: filepath.Join(scripts, "post"),
			PreRemove:   filepath.Join(scripts, "preun"),
			PostRemove:  filepath.Join(scripts, "postun"),
		}
	}
	return nfpm.WithDefaults(info)
}

// writePackage writes the package of info in format into dir, named as
// the format's conventions say, and returns its path.
func writePackage(format string, info *nfpm.Info, dir string) (string, error) {
	var p interface {
		nfpm.Packager
		ConventionalFileName(*nfpm.Info) string
	}
	switch format {
	case "deb":
		p = deb.Default
	case "rpm":
		p = rpm.DefaultRPM
	default:
		return "", fmt.Errorf("unknown package format %q (deb, rpm)", format)
	}
	path := filepath.Join(dir, p.ConventionalFileName(info))
	f, err := os.Create(path)
	if err != nil {
		return "", err
	}
	if err := p.Package(info, f); err != nil {
		f.Close()
		os.Remove(path)
		return "", err
	}
	return path, f.Close()
}

// writeSums writes SHA256SUMS of the files into dir, in sha256sum's format.
func writeSums(dir string, paths []string) (string, error) {
	var b strings.Builder
	for _, p := range paths {
		f, err := os.Open(p)
		if err != nil {
			return "", err
		}
		h := sha256.New()
		_, err = io.Copy(h, f)
		f.Close()
		if err != nil {
			return "", err
		}
		fmt.Fprintf(&b, "%s  %s\n", hex.EncodeToString(h.Sum(nil)), filepath.Base(p))
	}
	path := filepath.Join(dir, "SHA256SUMS")
	return path, os.WriteFile(path, []byte(b.String()), 0o644)
}
