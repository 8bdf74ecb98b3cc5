package resp

import "testing"

// TestShortBulkHeader: the fast header reader takes plain complete headers
// and gives what the general path (line search, then parseLen) gives; it
// leaves every other header to the general path.
func TestShortBulkHeader(t *testing.T) {
	taken := map[string]int64{"$0\r\n": 0, "$5\r\nhello": 5, "$14\r\n": 14, "$999999999\r\n": 999999999, "$7\r\n\r\n": 7}
	for in, want := range taken {
		lf, size, ok := shortBulkHeader([]byte(in), 0)
		if !ok || size != want {
			t.Errorf("shortBulkHeader(%q) = %d, %v; want %d", in, size, ok, want)
			continue
		}
		glf := indexLF([]byte(in), 1)
		gsize, gok := parseLen([]byte(in)[1 : glf-1])
		if lf != glf || !gok || gsize != size {
			t.Errorf("shortBulkHeader(%q) = lf %d size %d; general path lf %d size %d %v", in, lf, size, glf, gsize, gok)
		}
	}
	left := []string{"$", "$5", "$5\r", "$\r\n", "$05\r\n", "$00\r\n", "$-1\r\n", "$+5\r\n", "$5 \r\n", "$5\n", "$5\rx\n",
		"$1234567890\r\n", "$12345678901\r\n", "$5\r\r\n"}
	for _, in := range left {
		if _, size, ok := shortBulkHeader([]byte(in), 0); ok {
			t.Errorf("shortBulkHeader(%q) = %d; want it left to the general path", in, size)
		}
	}
	if lf, c, ok := shortBulkHeader([]byte("*11\r\n$"), 0); !ok || c != 11 || lf != 4 {
		t.Errorf("count line: lf %d count %d %v; want lf 4 count 11", lf, c, ok)
	}
	// A header further into the buffer, as in a pipeline.
	if lf, size, ok := shortBulkHeader([]byte("*1\r\n$3\r\nfoo\r\n"), 4); !ok || size != 3 || lf != 7 {
		t.Errorf("header at offset 4: lf %d size %d %v; want lf 7 size 3", lf, size, ok)
	}
}
