package server

import "testing"

// TestRedisCompatACL compares the replies of AUTH and the ACL command with a
// real redis-server byte for byte, for the cases where Redis 7.0 and 7.2
// reply alike (7.2 reworded NOPERM, added fields to ACL GETUSER and ACL LOG
// and the sanitize-payload flag to ACL LIST; those are checked against
// 7.2's text in testdata/commands/acl.txt).
func TestRedisCompatACL(t *testing.T) {
	rc := startRedis(t)
	cases := [][]string{
		{"ACL", "WHOAMI"},
		{"AUTH", "x"},
		{"AUTH", "nobody", "x"},
		{"ACL", "SETUSER", "alice", "on", ">apw", "~a:*", "+ping"},
		{"ACL", "SETUSER", "a b"},
		{"ACL", "SETUSER", "carol", "+nosuchcommand"},
		{"ACL", "SETUSER", "carol", "(~x"},
		{"ACL", "SETUSER", "carol", "#abc"},
		{"ACL", "SETUSER", "carol", "<nosuch"},
		{"ACL", "SETUSER", "carol", "~*", "~x"},
		{"ACL", "USERS"},
		{"ACL", "GETUSER", "nobody"},
		{"ACL", "GETUSER", "a", "b"},
		{"ACL", "DELUSER", "default"},
		{"ACL", "DELUSER", "nobody"},
		{"ACL", "DELUSER"},
		{"ACL", "CAT", "nosuch"},
		{"ACL", "GENPASS", "0"},
		{"ACL", "GENPASS", "5000"},
		{"ACL", "GENPASS", "x"},
		{"ACL", "LOG", "x"},
		{"ACL", "LOG", "-1"},
		{"ACL", "LOAD"},
		{"ACL", "SAVE"},
		{"ACL", "LIST", "x"},
		{"ACL", "FOO"},
		{"ACL"},
		{"ACL", "HELP", "x"},
		{"ACL", "DRYRUN", "nobody", "ping"},
		{"ACL", "DRYRUN", "alice", "nosuchcommand"},
		{"ACL", "DRYRUN", "alice", "ping"},
		{"ACL", "DRYRUN", "alice", "echo"},
		{"ACL", "DRYRUN", "alice"},
		{"ACL", "DRYRUN", "alice", "client"},
		{"ACL", "DRYRUN", "alice", "client", "nosuch"},
		{"ACL", "DRYRUN", "alice", "client", "id", "x"},
		{"ACL", "CAT", "a", "b"},
		{"ACL", "LOG", "1", "2"},
		{"ACL", "GENPASS", "1", "2"},
		{"ACL", "WHOAMI", "x"},
		{"ACL", "USERS", "x"},
		{"ACL", "SETUSER"},
		{"ACL", "SETUSER", "dave"},
		{"AUTH", "alice", "wrong"},
		{"HELLO", "2", "AUTH", "alice", "wrong"},
		{"ACL", "DELUSER", "alice", "carol", "dave", "nobody"},
	}
	for _, proto := range []string{"2", "3"} {
		tl := newTestLoop(t, nil)
		tl.run(cmd("HELLO", proto))
		rc.do(t, "HELLO", proto)
		for _, c := range cases {
			want := rc.do(t, c...)
			if got, _ := tl.run(cmd(c...)); got != want {
				t.Errorf("RESP%s %q:\n got %q\nwant %q", proto, c, got, want)
			}
		}
	}
}
