package httplimit_test

import (
	"os"
	"testing"

	"github.com/throttlekit/throttlekit-server/clients/go/internal/testserver"
)

// TestMain starts one server for the examples when the -run and -skip
// patterns can select one of them; the tests here need none (they drive
// the middleware with a scripted Allower).
func TestMain(m *testing.M) {
	os.Exit(testserver.RunWithServer(m, &serverAddr))
}
