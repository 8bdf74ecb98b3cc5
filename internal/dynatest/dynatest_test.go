package dynatest

import (
	"net/http"
	"strings"
	"testing"
)

// TestStart: dynalite answers DynamoDB's JSON protocol on the endpoint.
func TestStart(t *testing.T) {
	s := Start(t)
	if !strings.HasPrefix(s.URL("tbl"), "dynamodb://tbl?region=") {
		t.Fatalf("URL = %q", s.URL("tbl"))
	}
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
