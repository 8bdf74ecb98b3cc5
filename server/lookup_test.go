package server

import (
	"strings"
	"testing"
)

// TestLookupSpellings: every top-level command is found under its upper,
// lower and mixed-case spellings, by lookup and by lookupAgain whatever the
// previous command was, and names that differ from a command's by one byte
// (including a non-letter that differs only in the bit case folding flips)
// are not found.
func TestLookupSpellings(t *testing.T) {
	mixed := func(s string) string {
		b := []byte(s)
		for i := range b {
			if i%2 == 0 {
				b[i] = strings.ToUpper(string(b[i]))[0]
			}
		}
		return string(b)
	}
	for i := range commandTable {
		name := commandTable[i].name
		for _, spelled := range []string{name, strings.ToUpper(name), mixed(name)} {
			if id, ok := lookup([]byte(spelled)); !ok || id != cmdID(i) {
				t.Errorf("lookup(%q) = %d, %v, want %d", spelled, id, ok, i)
			}
			for last := range cmdID(numCmds + 1) { // numCmds: no previous command
				if id, ok := lookupAgain([]byte(spelled), last); !ok || id != cmdID(i) {
					t.Errorf("lookupAgain(%q, %d) = %d, %v, want %d", spelled, last, id, ok, i)
				}
			}
		}
		upper := strings.ToUpper(name)
		for j := range len(upper) {
			b := []byte(upper)
			b[j] ^= 0x20 // a letter changes case; anything else becomes another byte
			wantFound := (b[j]|0x20) >= 'a' && (b[j]|0x20) <= 'z'
			if _, ok := lookup(b); ok != wantFound {
				t.Errorf("lookup(%q) found %v, want %v", b, ok, wantFound)
			}
			if _, ok := lookupAgain(b, cmdID(i)); ok != wantFound {
				t.Errorf("lookupAgain(%q, itself) found %v, want %v", b, ok, wantFound)
			}
		}
		for _, bad := range []string{upper + "X", upper[:len(upper)-1], " " + upper} {
			if id, ok := lookupAgain([]byte(bad), cmdID(i)); ok {
				t.Errorf("lookupAgain(%q) = %d, want not found", bad, id)
			}
		}
	}
	if _, ok := lookup([]byte(strings.Repeat("A", maxCmdName+1))); ok {
		t.Error("a name longer than any command was found")
	}
}
