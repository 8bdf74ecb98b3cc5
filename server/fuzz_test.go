package server

import (
	"bytes"
	"testing"
	"time"
)

// FuzzProcess feeds arbitrary bytes through the whole path: parser, header
// validation, dispatcher, engine, store and reply. Nothing may panic; the
// consumed count must stay in range; a reply must be complete lines; and
// the input left over must still be an incomplete command.
func FuzzProcess(f *testing.F) {
	seeds := []string{
		"PING\r\n",
		"*1\r\n$4\r\nPING\r\n",
		"*4\r\n$14\r\nTHROTTLE.CHECK\r\n$1\r\nk\r\n$2\r\n10\r\n$2\r\n1s\r\n",
		"*6\r\n$14\r\nTHROTTLE.CHECK\r\n$1\r\nk\r\n$1\r\n5\r\n$3\r\n1ms\r\n$4\r\nALGO\r\n$5\r\ntoken\r\n",
		"THROTTLE.CHECK k 3 1s ALGO sliding COST 2\r\nTHROTTLE.PEEK k 3 1s ALGO sliding\r\n",
		"THROTTLE.LEASE k 10 1h BATCH 4\r\nTHROTTLE.RETURN k 2 0\r\nTHROTTLE.RESET k x\r\n",
		"CL.THROTTLE user123 15 30 60 1\r\nCL.THROTTLE u -1 +3 60 -5\r\n",
		"HELLO 3 AUTH default x SETNAME n\r\nTHROTTLE.CHECK k 1 1d\r\nHELLO 2\r\n",
		"CLIENT SETNAME a\r\nCLIENT LIST\r\nCLIENT INFO\r\nCOMMAND DOCS\r\nCOMMAND INFO ping x\r\nINFO\r\n",
		"CONFIG GET *\r\nTIME\r\nDBSIZE\r\nSELECT 0\r\nRESET\r\nQUIT\r\n",
		"*1\r\n$-1\r\n",
		"*-1\r\n*0\r\n",
		"*2\r\n$4\r\nECHO\r\n$3\r\nab",
		"ECHO \"a\\x41\\n\" 'b\\'c'\r\n",
		"ECHO \"unbalanced\r\n",
		"$5 x\r\n",
		"*1\r\n$99999999999999999999\r\n",
	}
	for _, s := range seeds {
		f.Add([]byte(s))
	}
	tl := newTestLoop(f, func(c *Config) { c.MaxArgs = 64; c.ProtoMaxBulkLen = 4096 })
	f.Fuzz(func(t *testing.T, in []byte) {
		cl := newClient(tl.srv, tl.l, 2)
		tl.l.out = tl.l.out[:0]
		n, closed := tl.l.process(cl, in, time.Now().UnixNano())
		if n < 0 || n > len(in) {
			t.Fatalf("consumed %d of %d", n, len(in))
		}
		out := tl.l.out
		if len(out) > 0 && !bytes.HasSuffix(out, []byte("\r\n")) {
			t.Fatalf("reply not terminated: %q", out)
		}
		if !closed && n < len(in) {
			tl.l.out = tl.l.out[:0]
			var scratch []byte
			m, _, perr := readCommand(in[n:], nil, &scratch, protoLimits{maxArgs: 64, maxBulkLen: 4096})
			if m != 0 || perr != "" {
				t.Fatalf("left %q unprocessed: m=%d perr=%q", in[n:], m, perr)
			}
		}
	})
}
