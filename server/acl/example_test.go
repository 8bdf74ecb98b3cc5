package acl_test

import (
	"fmt"
	"os"
	"strings"
	"time"

	"github.com/throttlekit/throttlekit-server/server/acl"
)

// The server describes its commands once; indices in this slice are what it
// passes to Check.
var commands = []acl.Command{
	{Name: "throttle.check", Categories: []string{"write", "fast", "throttle"}},
	{Name: "throttle.peek", Categories: []string{"read", "fast", "throttle"}},
	{Name: "config", Subcommands: []acl.Command{
		{Name: "get", Categories: []string{"admin", "slow", "dangerous"}},
	}},
}

func Example() {
	a, err := acl.New(commands)
	if err != nil {
		panic(err)
	}
	// A tenant that may only check its own limits.
	if err := a.SetUser("tenant42", "on", ">s3cret", "~t42:*", "+@throttle", "-throttle.peek"); err != nil {
		panic(err)
	}
	fmt.Println(a.User("tenant42").Describe())

	u, err := a.Authenticate([]byte("tenant42"), []byte("s3cret"))
	if err != nil {
		panic(err)
	}
	cmd := [][]byte{[]byte("THROTTLE.CHECK"), []byte("t41:api"), []byte("10"), []byte("1s")}
	v := u.Check(0, -1, cmd, []acl.KeyRef{{Pos: 1, Access: acl.KeyReadWrite}})
	fmt.Println(v.OK(), u.DenyReply(0, -1, v))

	v = u.Check(2, 0, [][]byte{[]byte("CONFIG"), []byte("GET"), []byte("*")}, nil)
	fmt.Println(u.DenyReply(2, 0, v))

	// Record the denial in the ACL LOG; the caller supplies the time.
	a.Log().Add(u.DenialEvent(2, 0, nil, v, acl.ContextTopLevel, "id=3 addr=127.0.0.1:50000"), time.Unix(1700000000, 0))
	e := a.Log().Entries(10, time.Unix(1700000002, 0))[0]
	fmt.Println(e.Count, e.Reason, e.Context, e.Object, e.Username, e.AgeSeconds)

	// Output:
	// user tenant42 on sanitize-payload #1ec1c26b50d5d3c58d9583181af8076655fe00756bf7285940ba3670f99fcba0 ~t42:* resetchannels -@all +@throttle -throttle.peek
	// false NOPERM this user has no permissions to access one of the keys used as arguments
	// NOPERM this user has no permissions to run the 'config|get' command
	// 1 command toplevel config|get tenant42 2
}

func ExampleACL_SetUser_error() {
	a, _ := acl.New(commands)
	err := a.SetUser("bob", "on", "+throttle.check", "+nosuch")
	fmt.Println(err)
	fmt.Println(a.User("bob") == nil) // nothing was applied
	// Output:
	// ERR Error in ACL SETUSER modifier '+nosuch': Unknown command or category name in ACL
	// true
}

func ExampleACL_Refresh() {
	a, _ := acl.New(commands)
	_ = a.SetUser("bob", "on", "nopass", "+throttle.peek")
	conn := a.User("bob") // what a connection keeps

	_ = a.SetUser("bob", "+throttle.check")
	if conn.Stale() { // one atomic load per command
		conn, _ = a.Refresh(conn)
	}
	fmt.Println(conn.CanRun(0, -1))

	_, _ = a.DelUser("bob")
	if conn.Stale() {
		if _, ok := a.Refresh(conn); !ok {
			fmt.Println("user deleted: close the connection")
		}
	}
	// Output:
	// true
	// user deleted: close the connection
}

func ExampleACL_Save() {
	a, _ := acl.New(commands)
	_ = a.SetUser("ops", "on", "#1ec1c26b50d5d3c58d9583181af8076655fe00756bf7285940ba3670f99fcba0", "allkeys", "+@all", "-@dangerous")
	_ = a.Save(os.Stdout)

	b, _ := acl.New(commands)
	err := b.Load(strings.NewReader("user ops on +@all\nuser bad on +nosuch\n"))
	fmt.Println(err)
	// Output:
	// user default on nopass sanitize-payload ~* &* +@all
	// user ops on sanitize-payload #1ec1c26b50d5d3c58d9583181af8076655fe00756bf7285940ba3670f99fcba0 ~* resetchannels +@all -@dangerous
	// ERR users.acl:2: Error in applying operation '+nosuch': Unknown command or category name in ACL. WARNING: ACL errors detected, no change to the previously active ACL rules was performed
}
