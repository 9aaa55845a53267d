package control

import (
	"net/http"
	"strings"
)

// rejectDotSegments answers 400 to a request whose path has a "." or ".."
// segment or an empty one ("//"), however it was encoded (%2e%2e is ".."
// once decoded). http.ServeMux would answer such a path with a redirect
// to its cleaned form, and a client that follows it lands on another
// endpoint than the one it named: /v1/runs/../jobs/x/trigger would
// trigger x.
func rejectDotSegments(next http.Handler) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if hasDotSegment(r.URL.Path) {
			writeError(w, http.StatusBadRequest, CodeBadRequest,
				"the path has an empty, \".\" or \"..\" segment: "+clip(r.URL.Path))
			return
		}
		next.ServeHTTP(w, r)
	})
}

// hasDotSegment reports whether the decoded path p has a segment that is
// empty, "." or "..". A trailing slash is not an empty segment.
func hasDotSegment(p string) bool {
	if p == "" || p == "/" {
		return false
	}
	rest := strings.TrimSuffix(strings.TrimPrefix(p, "/"), "/")
	for seg := range strings.SplitSeq(rest, "/") {
		if seg == "" || seg == "." || seg == ".." {
			return true
		}
	}
	return false
}
