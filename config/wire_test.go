package config

import (
	"reflect"
	"testing"
	"time"

	"github.com/throttlekit/throttlekit-server/server"
	"github.com/throttlekit/throttlekit-server/shard"
)

// TestWire: every setting the server and the store take reaches their
// Config through the settings table, with the conversions cmd/ used to
// make (0 = none becomes negative for the server's counts).
func TestWire(t *testing.T) {
	c := Default()
	c.Addr, c.Loops, c.Shards, c.MaxKeys, c.MaxClients = "127.0.0.1:7000", 3, 8, 5000, 77
	c.ProtoMaxBulkLen, c.MaxArgs, c.Timeout, c.ClientOutputBufferLimit = 1<<20, 99, time.Minute, 1<<24
	c.RequirePass, c.ACLFile, c.ACLLogMaxLen, c.ProtectedMode = "pw", "/x.acl", 0, "no"
	c.EnableDebugCommand, c.AuthFailLimit, c.AuthFailPeriod = "local", 0, 2*time.Second
	c.MaxMemory, c.MaxKeyLen, c.AdmissionMaxRecords, c.AdmissionMaxMemory = 1<<26, 100, 1000, 1<<20
	c.ClientQueryBufferLimit = 1 << 25
	c.SlowlogLogSlowerThan, c.SlowlogMaxLen, c.LatencyMonitorThreshold = 2500, 0, 7
	w, err := c.Wire()
	if err != nil {
		t.Fatal(err)
	}
	want := server.Config{Addr: "127.0.0.1:7000", Loops: 3, MaxClients: 77, ProtoMaxBulkLen: 1 << 20, MaxArgs: 99,
		IdleTimeout: time.Minute, OutputBufferLimit: 1 << 24, RequirePass: "pw", ACLFile: "/x.acl", ACLLogMaxLen: -1,
		ProtectedMode: false, EnableDebugCommand: server.DebugLocal, AuthFailLimit: -1, AuthFailPeriod: 2 * time.Second,
		MaxMemory: 1 << 26, MaxKeyLen: 100, AdmissionMaxRecords: 1000, AdmissionMaxMemory: 1 << 20, QueryBufferLimit: 1 << 25,
		SlowlogLogSlowerThan: 2500 * time.Microsecond, SlowlogMaxLen: -1, LatencyMonitorThreshold: 7 * time.Millisecond}
	if !reflect.DeepEqual(w.Server, want) {
		t.Errorf("server config\n got %+v\nwant %+v", w.Server, want)
	}
	if ws := (shard.Config{Shards: 8, MaxKeys: 5000, MaxMemory: 1 << 26}); !reflect.DeepEqual(w.Store, ws) {
		t.Errorf("store config %+v, want %+v", w.Store, ws)
	}
	c.ACLLogMaxLen, c.AuthFailLimit, c.ProtectedMode = 5, 6, "yes"
	if w, _ = c.Wire(); w.Server.ACLLogMaxLen != 5 || w.Server.AuthFailLimit != 6 || !w.Server.ProtectedMode {
		t.Errorf("counts and protected mode: %+v", w.Server)
	}
	// slowlog-log-slower-than: 0 logs every command, negative turns it off.
	c.SlowlogLogSlowerThan = 0
	if w, _ = c.Wire(); !w.Server.SlowlogLogAll || w.Server.SlowlogLogSlowerThan != time.Nanosecond {
		t.Errorf("slowlog-log-slower-than 0: %+v", w.Server)
	}
	c.SlowlogLogSlowerThan = -1
	if w, _ = c.Wire(); w.Server.SlowlogLogAll || w.Server.SlowlogLogSlowerThan >= 0 {
		t.Errorf("slowlog-log-slower-than -1: %+v", w.Server)
	}
}
