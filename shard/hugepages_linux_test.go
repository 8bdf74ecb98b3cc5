package shard

import (
	"bufio"
	"fmt"
	"os"
	"strconv"
	"strings"
	"testing"
	"unsafe"
)

// TestFullRegionsCollapsed checks that Sweep asks for huge pages behind
// every full region and no other: the kernel lists a region it was asked
// about with the "hg" VmFlag in /proc/self/smaps (MADV_HUGEPAGE, the
// fallback), or shows it backed by huge pages (AnonHugePages, after
// MADV_COLLAPSE), and the region being carved has neither. Every key reads
// back unchanged after the collapse.
func TestFullRegionsCollapsed(t *testing.T) {
	if _, err := os.Stat("/sys/kernel/mm/transparent_hugepage/enabled"); err != nil {
		t.Skip("this kernel has no transparent huge pages")
	}
	s := New(Config{Shards: 1})
	n := 0
	for len(s.pool.regions) < 2 {
		s.Apply(key(n), t0, gcraOne)
		n++
	}
	if got := len(s.pool.full); got != 1 {
		t.Fatalf("%d full regions, want 1", got)
	}
	s.Sweep(t0)
	if got := len(s.pool.full); got != 0 {
		t.Fatalf("%d full regions left after Sweep, want 0", got)
	}
	full, carved := regionAddr(s.pool.regions[0]), regionAddr(s.pool.regions[1])
	fm, ok := mapping(t, full)
	if !ok {
		t.Fatalf("no mapping holds %#x in /proc/self/smaps", full)
	}
	if !strings.Contains(" "+fm.flags+" ", " hg ") && fm.hugeKB == 0 {
		t.Fatalf("full region: VmFlags %q, AnonHugePages %d kB: no huge pages asked for", fm.flags, fm.hugeKB)
	}
	t.Logf("full region: VmFlags %q, AnonHugePages %d kB", fm.flags, fm.hugeKB)
	// The kernel may merge the two regions into one mapping; the one being
	// carved can be told apart only when it is a mapping of its own.
	if cm, ok := mapping(t, carved); ok && !cm.holds(full) {
		if strings.Contains(" "+cm.flags+" ", " hg ") || cm.hugeKB > 0 {
			t.Fatalf("region being carved: VmFlags %q, AnonHugePages %d kB: huge pages asked for", cm.flags, cm.hugeKB)
		}
	}
	for i := 0; i < n; i++ {
		if st, ok := s.Get(key(i), t0); !ok || st.A != 1 {
			t.Fatalf("key %d: %+v, %v after the collapse", i, st, ok)
		}
	}
}

func regionAddr(r []byte) uintptr { return uintptr(unsafe.Pointer(unsafe.SliceData(r))) }

// smapsEntry is what /proc/self/smaps says of one mapping.
type smapsEntry struct {
	lo, hi uintptr
	flags  string
	hugeKB int
}

func (e smapsEntry) holds(addr uintptr) bool { return addr >= e.lo && addr < e.hi }

// mapping returns the smaps entry of the mapping of this process that
// holds addr.
func mapping(t *testing.T, addr uintptr) (smapsEntry, bool) {
	t.Helper()
	f, err := os.Open("/proc/self/smaps")
	if err != nil {
		t.Skipf("no /proc/self/smaps: %v", err)
	}
	defer f.Close()
	var e smapsEntry
	in := false
	sc := bufio.NewScanner(f)
	for sc.Scan() {
		line := sc.Text()
		if f := strings.Fields(line); len(f) > 0 && !strings.HasSuffix(f[0], ":") { // "lo-hi perms ...": a new mapping
			lo, hi, _ := strings.Cut(f[0], "-")
			l, err1 := strconv.ParseUint(lo, 16, 64)
			h, err2 := strconv.ParseUint(hi, 16, 64)
			in = err1 == nil && err2 == nil && uint64(addr) >= l && uint64(addr) < h
			if in {
				e = smapsEntry{lo: uintptr(l), hi: uintptr(h)}
			}
			continue
		}
		if !in {
			continue
		}
		if v, ok := strings.CutPrefix(line, "AnonHugePages:"); ok {
			fmt.Sscanf(strings.TrimSpace(v), "%d", &e.hugeKB)
		}
		if v, ok := strings.CutPrefix(line, "VmFlags:"); ok {
			e.flags = strings.TrimSpace(v)
			return e, true
		}
	}
	return e, false
}
