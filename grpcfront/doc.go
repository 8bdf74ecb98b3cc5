// Package grpcfront is the gRPC front of throttlekit-server: it owns the
// gRPC listener (--grpc-addr), its TLS, the gRPC health service and a
// graceful stop, and it connects the Envoy services to the enforcement
// core. The flow of one Envoy request is descriptor -> policy -> core call
// -> response, the gRPC twin of the RESP front's command -> core call ->
// reply:
//
//	lim := grpcfront.NewLimiter(backend)            // rls.Limiter over limits.Backend
//	svc, _ := rls.New(rls.Options{Policies: store, Limiter: lim, Now: now})
//	names := []string{rlsv3.RateLimitService_ServiceDesc.ServiceName}
//	f, _ := grpcfront.New(grpcfront.Config{Addr: ":8081"}, svc.Health(), names, svc)
//	go f.Serve()
//	...
//	f.Stop(ctx)                                     // health NOT_SERVING, then GracefulStop
//
// # Where it sits
//
// The design's import rule puts the gRPC front beside the RESP front: it
// may import the core (limits), grpc and go-control-plane, and nothing
// imports it but cmd/throttlekit-server. Package rls keeps the RLS logic
// (matching, replaces, shadow mode, statistics) behind its own small
// Limiter interface; this package supplies the one implementation the
// product uses, Limiter, which runs every check as a limits operation on
// the same Backend the RESP server holds (server.Server.Backend), so a
// counter is the same whether Envoy or a Redis client touched it.
//
// # Services
//
// New takes the services to register (anything with Register(*grpc.Server):
// the RLS service today; the RLQS service registers the same way), the
// health server they report through (rls.Service registers it) and the
// service names to report. The server ("") and each named service are
// NOT_SERVING until Serve listens, SERVING while it serves, and
// NOT_SERVING again when Stop begins, so health checks take the server
// out before its listener closes (TestFrontHealthAndStop).
//
// # Persistence
//
// With --persist the RESP front holds a reply in sync mode until its
// change is durable and answers "-TRYAGAIN persistence unavailable" to
// changes while persistence fails under --persist-fail closed. The Envoy
// services do the same through the Limiter (NewDurableLimiter), given the
// program's persistence as a Durability, the same three questions
// server.Durability asks:
//
//   - a check that counts hits, a lease or a return is refused while
//     persistence refuses changes: ErrPersistRefused, nothing changed;
//   - an RLS request whose checks counted hits, and an RLQS response that
//     leased or returned credits, is sent after Limiter.Sync, once per
//     request or response: one Commit (group commit with the RESP
//     front's), then a wait for the ticket woken by NotifyDurable, which
//     the persistence layer calls after each write as it calls the RESP
//     server's; a peek (hits_addend 0) waits for nothing;
//   - if persistence starts failing under the closed policy while a
//     request waits, Sync returns ErrNotDurable rather than hold the
//     request until the backend returns.
//
// Both errors answer gRPC UNAVAILABLE (an RLQS stream ends with it).
// Envoy's rate limit filter treats an error from the service as a failed
// call and applies its failure_mode_deny: false (its default) lets the
// request through, true denies it (500, or status_on_error). So the
// operator's Envoy setting, not this server, decides whether an outage of
// persistence fails open or closed at the edge. The open
// policy (--persist-fail open) answers from memory during an outage, as
// the RESP front does. TestRLSSyncPostgres (tests/persist) checks both
// against a real Postgres: answered hits survive a SIGKILL, and an outage
// answers Unavailable while RESP answers TRYAGAIN.
//
// # Costs
//
// A check costs one limits operation (one shard lock, one engine call) and
// an Op taken from a sync.Pool, so the adapter allocates nothing per
// descriptor; gRPC's own decoding and encoding dominate a request. The
// request and error counters are atomic adds in a unary interceptor.
package grpcfront
