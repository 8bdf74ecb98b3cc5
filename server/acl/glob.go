package acl

import "github.com/throttlekit/throttlekit-server/internal/glob"

// matchGlob reports whether s matches the glob pattern p as Redis's
// stringmatchlen does (see package glob).
func matchGlob(p string, s []byte) bool { return glob.Match(p, s) }
