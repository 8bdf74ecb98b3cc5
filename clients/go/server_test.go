package throttlekit_test

import (
	"os"
	"testing"

	"github.com/throttlekit/throttlekit-server/clients/go/internal/testserver"
)

// The tests below run against the real server, built from the repository
// this module lives in once per test binary (see internal/testserver). A
// failed build fails the tests that need it.

// testServer is one running server process.
type testServer = testserver.Server

// startServer starts a server of its own for t, with extra flags args, and
// stops it at cleanup.
func startServer(t testing.TB, args ...string) *testServer {
	t.Helper()
	return testserver.Start(t, args...)
}

// freePort returns a loopback address no server listens on.
func freePort(t testing.TB) string {
	t.Helper()
	addr, err := testserver.FreeAddr()
	if err != nil {
		t.Fatal(err)
	}
	return addr
}

// TestMain starts one server for the Example functions when the -run and
// -skip patterns can select one of them: examples take no *testing.T, so
// they reach the server through serverAddr. They run after every test, in
// the order of the source, and each uses keys no other example touches.
func TestMain(m *testing.M) {
	os.Exit(testserver.RunWithServer(m, &serverAddr))
}
