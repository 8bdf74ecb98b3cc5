package resp_test

import (
	"fmt"

	"github.com/throttlekit/throttlekit-server/server/resp"
)

// A connection keeps a Pending between reads; a frame cut by the network is
// resumed where the last call stopped.
func ExampleParser_Next() {
	var (
		p    resp.Parser
		pend resp.Pending
	)
	lim := resp.Limits{MaxArgs: 1024, MaxBulkLen: 1 << 20}
	frame := []byte("*2\r\n$4\r\nECHO\r\n$5\r\nhello\r\n")

	n, _, _ := p.Next(frame[:20], &pend, lim) // the first read
	fmt.Println(n, pend.Need())

	n, args, err := p.Next(frame, &pend, lim) // the frame again, now whole
	fmt.Printf("%d %q %v\n", n, args, err)

	_, _, err = p.Next([]byte("*1\r\n$-1\r\n"), &pend, lim)
	fmt.Println(err)
	// Output:
	// 0 25
	// 25 ["ECHO" "hello"] <nil>
	// Protocol error: invalid bulk length
}

// The same reply in both protocols: a map is a flat array in RESP2.
func ExampleAppendMap() {
	for _, resp3 := range []bool{false, true} {
		b := resp.AppendMap(nil, 1, resp3)
		b = resp.AppendBulkString(b, "allowed")
		b = resp.AppendBool(b, true, resp3)
		fmt.Printf("%q\n", b)
	}
	// Output:
	// "*2\r\n$7\r\nallowed\r\n:1\r\n"
	// "%1\r\n$7\r\nallowed\r\n#t\r\n"
}
