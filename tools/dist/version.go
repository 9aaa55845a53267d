package main

import (
	"fmt"
	"regexp"
	"strings"
	"time"
)

// describePattern is the output of git describe --tags --always, less
// its -dirty: a tag vX.Y.Z[-pre] with, when commits follow it, -N-gHASH;
// or a bare commit hash.
var describePattern = regexp.MustCompile(`^(?:v?(\d+\.\d+\.\d+)(?:-([0-9A-Za-z.]+))?(?:-(\d+)-g([0-9a-f]+))?|([0-9a-f]{7,40}))$`)

// packageVersion turns git describe output into a version that sorts the
// same in dpkg and rpm and holds no '-' (which would start a Debian
// revision, and which rpm refuses):
//
//	v1.2.3              1.2.3
//	v1.2.3-rc1          1.2.3~rc1               (before 1.2.3)
//	v1.2.3-4-gabc1234   1.2.3+git4.abc1234      (after 1.2.3, before 1.2.4)
//	abc1234             0.0.0~git20260102T030405.abc1234   (no tag: by commit time)
//	... -dirty          ... .dirty
func packageVersion(describe string, commitTime time.Time) (string, error) {
	clean, dirty := strings.CutSuffix(describe, "-dirty")
	m := describePattern.FindStringSubmatch(clean)
	if m == nil {
		return "", fmt.Errorf("version %q is not git describe output (vX.Y.Z[-pre][-N-gHASH] or a commit hash)", describe)
	}
	release, pre, ahead, hash, bare := m[1], m[2], m[3], m[4], m[5]
	var v string
	switch {
	case bare != "":
		v = "0.0.0~git" + commitTime.UTC().Format("20060102T150405") + "." + bare
	default:
		v = release
		if pre != "" {
			v += "~" + pre
		}
		if ahead != "" {
			v += "+git" + ahead + "." + hash
		}
	}
	if dirty {
		if strings.Contains(v, "+") || bare != "" {
			v += ".dirty"
		} else {
			v += "+dirty"
		}
	}
	return v, nil
}
