package config

import (
	"crypto/sha256"
	"encoding/hex"
	"fmt"
	"maps"
	"slices"
	"strconv"
	"strings"
)

// Token is a [[token]] table: a bearer token of the HTTP API (api_listen).
// The config holds the token's SHA-256, never the token itself.
type Token struct {
	// Name says whose token it is, in logs and refusals: unique, up to 128
	// letters, digits, '.', '_' and '-', starting with a letter or digit.
	Name string
	// Role is one of TokenRoles.
	Role string
	// SHA256 is the SHA-256 of the token, as the client sends it. The
	// token is one `schedulerd token new` made ("sd_" and 256 random
	// bits): the API refuses a token of another form before it hashes
	// it, whatever hash the config holds.
	SHA256 [sha256.Size]byte
}

// TokenRoles are the roles of a token, each allowing what the one before
// it does and more: read (listings, runs, output, health, metrics),
// operate (trigger, cancel, rerun, pause, resume) and admin (reload).
var TokenRoles = []string{"read", "operate", "admin"}

// MaxTokens is the largest number of [[token]] tables in one config.
const MaxTokens = 1000

var tokenKeys = []string{"name", "role", "sha256"}

// ValidTokenName reports whether name may name a token.
func ValidTokenName(name string) bool { return namePattern.MatchString(name) }

// emptySHA256 is the SHA-256 of the empty string: as a token's, it would
// let in a request that sends no token.
var emptySHA256 = sha256.Sum256(nil)

// tokens reads the [[token]] tables: every key is required, names and
// hashes are unique.
func (p *parser) tokens(tables []map[string]any) []Token {
	if len(tables) > MaxTokens {
		p.errAt(p.line(indexPath("token", MaxTokens)), "token", "%d tokens; at most %d are allowed", len(tables), MaxTokens)
		return nil
	}
	var out []Token
	names := map[string]string{}             // name -> path of its first token
	hashes := map[[sha256.Size]byte]string{} // hash -> name of its first token
	for i, m := range tables {
		if m == nil {
			continue
		}
		sc := scope{path: indexPath("token", i), label: indexPath("token", i) + "."}
		before := len(p.errs)
		var t Token
		if v, ok := m["name"]; !ok {
			p.errorf(sc, "name", "is required")
		} else if name, ok := p.nonEmpty(sc, "name", v); ok {
			if ValidTokenName(name) {
				t.Name = name
				sc.label = fmt.Sprintf("token %q: ", name)
				if first, dup := names[name]; dup {
					p.errorf(sc, "name", "duplicate token name; the first token named %q is at line %d", name, p.line(joinPath(first, "name")))
				} else {
					names[name] = sc.path
				}
			} else {
				p.errorf(sc, "name", "%s is not a valid token name: use up to 128 letters, digits, '.', '_' and '-', starting with a letter or digit", clip(strconv.Quote(name)))
			}
		}
		for _, k := range slices.Sorted(maps.Keys(m)) {
			v := m[k]
			switch k {
			case "name":
			case "role":
				t.Role, _ = p.oneOf(sc, k, v, TokenRoles...)
			case "sha256":
				s, ok := p.str(sc, k, v)
				if !ok {
					continue
				}
				sum, err := hex.DecodeString(s)
				switch {
				case err != nil || len(sum) != sha256.Size:
					p.errorf(sc, k, "must be the SHA-256 of the token in 64 hex digits (`schedulerd token new` prints it), got %d characters", len(s))
					continue
				case [sha256.Size]byte(sum) == emptySHA256:
					p.errorf(sc, k, "is the SHA-256 of the empty string, which would let in requests that send no token")
					continue
				}
				t.SHA256 = [sha256.Size]byte(sum)
				if first, dup := hashes[t.SHA256]; dup {
					p.errorf(sc, k, "is the same as that of token %q: each token must be a different one", first)
				} else if t.Name != "" {
					hashes[t.SHA256] = t.Name
				}
			default:
				p.unknown(sc, k, tokenKeys)
			}
		}
		for _, k := range tokenKeys[1:] {
			if _, ok := m[k]; !ok {
				p.errorf(sc, k, "is required (%s)", tokenRequired[k])
			}
		}
		if len(p.errs) == before {
			out = append(out, t)
		}
	}
	return out
}

// tokenRequired says what each required key of a [[token]] takes.
var tokenRequired = map[string]string{
	"role":   strings.Join(TokenRoles, ", ") + ": what the token may do",
	"sha256": "the SHA-256 of the token in hex, as `schedulerd token new` prints it",
}
