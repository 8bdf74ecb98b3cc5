package server

import "testing"

// TestRedisCompatACL compares the replies of AUTH, the ACL command and the
// NOPERM errors with a real redis-server byte for byte. NOPERM and ACL DRYRUN
// are worded as Redis 7.0 words them, the version scripts/install-deps.sh
// installs. Where this server renders as 7.2 on purpose (command rules in
// ACL LIST and GETUSER, the sanitize-payload flag, ACL LOG's 7.2 fields; see
// server/acl's package doc) the replies are checked in testdata/commands/acl.txt
// and server/acl's TestAgainstRedis.
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
		// Denials: ACL DRYRUN's messages, then the NOPERM errors themselves.
		{"ACL", "SETUSER", "erin", "reset", "on", ">epw", "~e:*", "+exists", "+del", "+ping", "+auth", "+client|id"},
		{"ACL", "DRYRUN", "erin", "exists", "e:1"},
		{"ACL", "DRYRUN", "erin", "exists", "x"},
		{"ACL", "DRYRUN", "erin", "del", "e:1", "x", "e:2"},
		{"ACL", "DRYRUN", "erin", "echo", "x"},
		{"ACL", "DRYRUN", "erin", "config", "get", "x"},
		{"AUTH", "erin", "epw"},
		{"EXISTS", "e:1"},
		{"EXISTS", "x"},
		{"DEL", "e:1", "x"},
		{"ECHO", "x"},
		{"CONFIG", "GET", "x"},
		{"FLUSHALL"},
		{"PING"},
		{"AUTH", "default", "any"},
		{"ACL", "DELUSER", "alice", "carol", "dave", "erin", "nobody"},
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
