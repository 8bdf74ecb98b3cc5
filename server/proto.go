package server

import "github.com/throttlekit/throttlekit-server/server/resp"

// The wire format lives in package resp: the parser with its limits and
// protocol errors, and the reply writers. This file adapts it to the loop.

// parseInt64 parses a decimal integer with an optional '-' sign, rejecting
// empty input, '+', spaces and overflow, without allocating.
func parseInt64(b []byte) (int64, bool) { return resp.ParseInt64(b) }

// protoLimits returns the bounds the parser applies to cl's next command:
// the configured ones, tighter ones until cl has authenticated.
func (s *Server) protoLimits(cl *client) resp.Limits {
	return resp.Limits{
		MaxArgs:         s.cfg.MaxArgs,
		MaxBulkLen:      s.cfg.ProtoMaxBulkLen,
		MaxQueryBuffer:  s.cfg.QueryBufferLimit,
		Unauthenticated: !cl.authed,
	}
}
