package upstream

import (
	"embed"

	"github.com/redis/go-redis/v9"
)

//go:embed scripts/*.lua
var scriptFS embed.FS

// scriptSet holds the scripts of one Client: each is scripts/lib.lua
// followed by one operation file.
type scriptSet struct {
	check, mcheck, reset, lease, ret, cell *redis.Script
}

func loadScripts() scriptSet {
	lib := mustRead("lib.lua")
	op := func(name string) *redis.Script { return redis.NewScript(lib + "\n" + mustRead(name)) }
	return scriptSet{
		check:  op("check.lua"),
		mcheck: op("mcheck.lua"),
		reset:  op("reset.lua"),
		lease:  op("lease.lua"),
		ret:    op("return.lua"),
		cell:   op("cell.lua"),
	}
}

func mustRead(name string) string {
	b, err := scriptFS.ReadFile("scripts/" + name)
	if err != nil {
		panic("upstream: embedded script missing: " + name) // unreachable: go:embed checked it at build time
	}
	return string(b)
}

// all returns every script, for SCRIPT LOAD.
func (s *scriptSet) all() []*redis.Script {
	return []*redis.Script{s.check, s.mcheck, s.reset, s.lease, s.ret, s.cell}
}
