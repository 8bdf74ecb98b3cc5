package upstream

import (
	"regexp"
	"slices"
	"strings"
	"testing"

	"github.com/redis/go-redis/v9"
)

// defined lists the names a script defines at the top level, in order.
func defined(script string) []string {
	var names []string
	for _, m := range regexp.MustCompile(`(?m)^local (?:function )?([A-Za-z_][A-Za-z0-9_]*)`).FindAllStringSubmatch(script, -1) {
		names = append(names, m[1])
	}
	return names
}

// TestAssembleKeepsWhatIsUsed checks the scripts' assembly: each holds the
// library blocks its operation uses, directly or through other blocks, in
// lib.lua's order, every statement that is no definition, and nothing an
// operation of another kind alone needs.
func TestAssembleKeepsWhatIsUsed(t *testing.T) {
	src := mustRead("lib.lua")
	l := splitLib(src)
	if got := strings.Join(func() []string {
		var s []string
		for _, b := range l {
			s = append(s, b.text)
		}
		return s
	}(), ""); got != src {
		t.Fatal("the blocks of lib.lua do not add up to lib.lua")
	}
	libNames := defined(src)
	for _, tc := range []struct {
		op         string
		has, hasnt []string
		maxShare   float64 // of lib.lua's definitions
	}{
		{"check.lua", []string{"gcra", "token", "fixed", "sliding", "check", "save", "mulDivCeil", "algoArg"}, []string{"newCell", "throttle", "lease", "giveBack", "rethrow", "slots", "banCheck", "reservation", "rateGCRA"}, 0.9},
		{"mcheck.lua", []string{"check", "rethrow", "sameState"}, []string{"newCell", "lease", "giveBack"}, 0.9},
		{"reset.lua", []string{"parse", "clock", "lt"}, []string{"check", "save", "load", "fmt", "newLimit"}, 0.2},
		{"lease.lua", []string{"lease", "window", "newLimit"}, []string{"gcra", "sliding", "check", "newCell", "giveBack"}, 0.65},
		{"return.lua", []string{"giveBack", "save"}, []string{"lease", "check", "newLimit", "newCell"}, 0.65},
		{"cell.lua", []string{"newCell", "throttle", "cellRemaining"}, []string{"gcra", "check", "newLimit", "lease"}, 0.65},
		{"slots.lua", []string{"clock", "fmt", "satAdd", "durMs", "slots", "slotKeep", "slotHeld"}, []string{"check", "newLimit", "load", "save", "charge", "banCheck", "reservation", "rateGCRA"}, 0.4},
		{"ban.lua", []string{"check", "save", "loadRecord", "saveRecord", "satAdd", "banCheck"}, []string{"charge", "refund", "newCell", "lease", "slots", "reservation", "rateGCRA", "banQuery"}, 0.9},
		{"banned.lua", []string{"banQuery", "bannedFor", "loadRecord", "durMs"}, []string{"check", "save", "newLimit", "banCheck", "slots"}, 0.4},
		{"reserve.lua", []string{"check", "charge", "refund", "tokenAt", "slidingAt", "loadRecord", "reservation"}, []string{"newCell", "lease", "giveBack", "slots", "banCheck", "rateGCRA"}, 0.95},
		{"lease_algo.lua", []string{"check", "gcra", "token", "sliding", "save"}, []string{"newCell", "lease", "giveBack", "throttle"}, 0.9},
		{"return_algo.lua", []string{"token", "rate", "mulDiv", "check", "save"}, []string{"newCell", "lease", "giveBack", "throttle"}, 0.9},
		{"gcra.lua", []string{"load", "save", "floorDiv", "fail", "rateGCRA", "gcraTTL", "gcraSecs"}, []string{"gcra", "check", "newLimit", "newCell", "lease", "slots", "banCheck", "reservation"}, 0.65},
		{"exec.lua", []string{"check", "mcheckKeys", "throttle", "lease", "giveBack"}, []string{"slots", "banCheck", "banQuery", "reservation", "rateGCRA", "posArg"}, 0.8},
	} {
		op := mustRead(tc.op)
		s := l.assemble(op)
		if !strings.HasSuffix(s, "\n"+op) {
			t.Errorf("%s: the script does not end with the operation file", tc.op)
		}
		if !strings.Contains(s, "redis.replicate_commands()") {
			t.Errorf("%s: the statement that is no definition is missing", tc.op)
		}
		names := defined(s[:len(s)-len(op)])
		// In lib.lua's order: names is a subsequence of libNames.
		i := 0
		for _, n := range libNames {
			if i < len(names) && names[i] == n {
				i++
			}
		}
		if i != len(names) {
			t.Errorf("%s: definitions %v are not in lib.lua's order", tc.op, names)
		}
		for _, n := range tc.has {
			if !slices.Contains(names, n) {
				t.Errorf("%s: %s missing from %v", tc.op, n, names)
			}
		}
		for _, n := range tc.hasnt {
			if slices.Contains(names, n) {
				t.Errorf("%s: %s included, though unused", tc.op, n)
			}
		}
		if share := float64(len(names)) / float64(len(libNames)); share > tc.maxShare {
			t.Errorf("%s: %d of lib.lua's %d definitions kept, more than %.2f", tc.op, len(names), len(libNames), tc.maxShare)
		}
		t.Logf("%s: %d of lib.lua's %d definitions", tc.op, len(names), len(libNames))
	}
	// The exec script of a transaction holding an admission operation or
	// GCRA is exec.lua with exec_admission.lua's table, and so holds the
	// functions that table calls.
	exec := mustRead("exec.lua")
	if !strings.Contains(exec, execNoAdmission) {
		t.Fatal("exec.lua has no empty opArgs for exec_admission.lua to replace")
	}
	adm := l.assemble(strings.Replace(exec, execNoAdmission, mustRead("exec_admission.lua"), 1))
	names := defined(adm)
	for _, w := range []string{"check", "mcheckKeys", "slots", "slotKeep", "banCheck", "banQuery", "reservation", "rateGCRA", "posArg"} {
		if !slices.Contains(names, w) {
			t.Errorf("exec with admission: %s missing", w)
		}
	}
	if s := loadScripts(); s.execAdmission.Hash() != redis.NewScript(adm).Hash() {
		t.Error("the Client's exec script with admission is not exec.lua with exec_admission.lua")
	}
}
