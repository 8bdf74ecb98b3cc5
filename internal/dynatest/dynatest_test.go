package dynatest

import (
	"io"
	"net"
	"net/http"
	"net/url"
	"strings"
	"testing"
)

// TestStart: dynalite answers DynamoDB's JSON protocol on the endpoint.
func TestStart(t *testing.T) {
	s := Start(t)
	if !strings.HasPrefix(s.URL("tbl"), "dynamodb://tbl?region=") {
		t.Fatalf("URL = %q", s.URL("tbl"))
	}
	listTables(t, s)
}

// TestSurvivesAbortedRequest: a client reset in the middle of a request
// (the crash tests SIGKILL a server while it writes) leaves the emulator
// serving; dynalite alone rethrows the request's error and exits.
func TestSurvivesAbortedRequest(t *testing.T) {
	s := Start(t)
	u, err := url.Parse(s.Endpoint)
	if err != nil {
		t.Fatal(err)
	}
	for range 3 {
		c, err := net.Dial("tcp", u.Host)
		if err != nil {
			t.Fatal(err)
		}
		// Headers promise 100 bytes of body; 5 come, then a reset.
		if _, err := io.WriteString(c, "POST / HTTP/1.1\r\nHost: x\r\nContent-Length: 100\r\n\r\n{\"a\":"); err != nil {
			t.Fatal(err)
		}
		_ = c.(*net.TCPConn).SetLinger(0)
		c.Close()
	}
	listTables(t, s)
}

// listTables sends an unsigned ListTables and wants DynamoDB's refusal.
func listTables(t *testing.T, s *Server) {
	t.Helper()
	req, err := http.NewRequest("POST", s.Endpoint, strings.NewReader("{}"))
	if err != nil {
		t.Fatal(err)
	}
	req.Header.Set("X-Amz-Target", "DynamoDB_20120810.ListTables")
	req.Header.Set("Content-Type", "application/x-amz-json-1.0")
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	resp.Body.Close()
	// Unsigned, so the emulator refuses it; any DynamoDB-style answer will do.
	if resp.StatusCode != http.StatusBadRequest {
		t.Fatalf("status %d, want 400 for an unsigned request", resp.StatusCode)
	}
}
