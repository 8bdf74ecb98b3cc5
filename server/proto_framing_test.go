package server

import (
	"errors"

	"github.com/throttlekit/throttlekit-server/server/resp"
)

// protoLimits and readCommand let the loop's tests (FuzzProcess) ask whether
// bytes left over form an incomplete command, without a connection.
type protoLimits struct {
	maxArgs    int
	maxBulkLen int64
	unauth     bool
}

// protoError is the text of a protocol error, "" for none.
type protoError string

// readCommand parses the command at the start of b from scratch (no
// Pending). argsbuf and scratch are unused: the parser owns its slices.
func readCommand(b []byte, _ [][]byte, _ *[]byte, lim protoLimits) (int, [][]byte, protoError) {
	var p resp.Parser
	n, args, err := p.Next(b, nil, resp.Limits{MaxArgs: lim.maxArgs, MaxBulkLen: lim.maxBulkLen, Unauthenticated: lim.unauth})
	var perr *resp.Error
	if errors.As(err, &perr) {
		return 0, nil, protoError(perr.Message())
	}
	return n, args, ""
}
