package persist_test

import (
	"context"
	"encoding/binary"
	"fmt"
	"sync"
	"sync/atomic"
	"testing"

	"github.com/throttlekit/throttlekit-server/engine"
	"github.com/throttlekit/throttlekit-server/internal/dynatest"
	"github.com/throttlekit/throttlekit-server/internal/pgtest"
	"github.com/throttlekit/throttlekit-server/persist"
	"github.com/throttlekit/throttlekit-server/shard"
)

// benchRecords returns n records with 16-byte keys key:XXXXXXXX, the shape
// of the store benchmarks, starting at key number from.
func benchRecords(from, n int) []persist.Record {
	recs := make([]persist.Record, n)
	for i := range recs {
		k := make([]byte, 16)
		copy(k, "key:")
		binary.BigEndian.PutUint64(k[8:], uint64(from+i))
		recs[i] = persist.Record{Key: k, State: engine.State{A: int64(i), B: -int64(i), Kind: engine.KindGCRA}, ExpireAt: t0 + 3600e9}
	}
	return recs
}

// benchWrite writes batches of upserts over a working set of 10 batches, so
// after the first round every write updates existing rows (the steady state
// of a server), and reports rows/s.
func benchWrite(b *testing.B, url string, batch int) {
	be, err := persist.Open(context.Background(), url, persist.Options{})
	if err != nil {
		b.Fatal(err)
	}
	defer be.Close()
	sets := make([][]persist.Record, 10)
	for i := range sets {
		sets[i] = benchRecords(i*batch, batch)
		if err := be.Write(context.Background(), sets[i]); err != nil {
			b.Fatal(err)
		}
	}
	b.ReportAllocs()
	b.ResetTimer()
	for i := 0; b.Loop(); i++ {
		recs := sets[i%len(sets)]
		for j := range recs {
			recs[j].State.A++
		}
		if err := be.Write(context.Background(), recs); err != nil {
			b.Fatal(err)
		}
	}
	b.ReportMetric(float64(b.N*batch)/b.Elapsed().Seconds(), "rows/s")
}

// BenchmarkPostgresWrite compares the two write methods at two batch sizes.
//
//	go test ./persist -run '^$' -bench PostgresWrite -benchtime 1s -count 3
func BenchmarkPostgresWrite(b *testing.B) {
	srv := pgtest.Start(b)
	for _, method := range []string{persist.WriteUnnest, persist.WriteCopy} {
		for _, batch := range []int{1000, 10000} {
			b.Run(fmt.Sprintf("%s/batch=%d", method, batch), func(b *testing.B) {
				benchWrite(b, fmt.Sprintf("%s&write=%s&table=bw_%s_%d", srv.URL, method, method, batch), batch)
			})
		}
	}
}

// BenchmarkDynamoWrite measures BatchWriteItem throughput against dynalite
// (an emulator: the figure says nothing about the real service) with 1, 8
// (the default) and 32 calls in flight:
//
//	go test ./persist -run '^$' -bench DynamoWrite -benchtime 2s
func BenchmarkDynamoWrite(b *testing.B) {
	srv := dynatest.Start(b)
	for _, batch := range []int{1000, 10000} {
		for _, par := range []int{1, 8, 32} {
			b.Run(fmt.Sprintf("batch=%d/parallel=%d", batch, par), func(b *testing.B) {
				benchWrite(b, srv.URL(fmt.Sprintf("bw_%d_%d", batch, par))+fmt.Sprintf("&parallel=%d", par), batch)
			})
		}
	}
}

// BenchmarkPostgresLoad fills a table with 1M keys once, then measures
// LoadAll into an empty store.
//
//	go test ./persist -run '^$' -bench PostgresLoad -benchtime 3x
func BenchmarkPostgresLoad(b *testing.B) {
	const keys = 1_000_000
	srv := pgtest.Start(b)
	url := srv.URL + "&table=load1m"
	be, err := persist.Open(context.Background(), url, persist.Options{})
	if err != nil {
		b.Fatal(err)
	}
	for i := 0; i < keys; i += 10000 {
		if err := be.Write(context.Background(), benchRecords(i, 10000)); err != nil {
			b.Fatal(err)
		}
	}
	b.ReportAllocs()
	b.ResetTimer()
	for b.Loop() {
		b.StopTimer()
		store := shard.New(shard.Config{MaxKeys: 2 * keys})
		p := persist.New(be, store, persist.Config{})
		b.StartTimer()
		ls, err := p.LoadAll(context.Background(), t0)
		if err != nil || ls.Keys != keys {
			b.Fatalf("LoadAll = %+v, %v", ls, err)
		}
	}
	b.ReportMetric(float64(b.N*keys)/b.Elapsed().Seconds(), "keys/s")
	be.Close()
}

// BenchmarkPostgresSyncCommit measures ModeSync: each operation changes a
// key, takes a ticket and waits until it is durable. Serial is the latency
// of one commit; parallel shows group commit sharing a write among waiting
// goroutines (commits/s and rows per flush).
//
//	go test ./persist -run '^$' -bench PostgresSyncCommit -benchtime 1s -count 3
func BenchmarkPostgresSyncCommit(b *testing.B) {
	srv := pgtest.Start(b)
	l, err := engine.NewLimit(engine.KindGCRA, 1_000_000, 1e9, 0)
	if err != nil {
		b.Fatal(err)
	}
	for _, par := range []int{1, 64} {
		// par goroutines per GOMAXPROCS change a key and wait for it.
		b.Run(fmt.Sprintf("parallel=%d", par), func(b *testing.B) {
			be, err := persist.Open(context.Background(), fmt.Sprintf("%s&table=sync_%d", srv.URL, par), persist.Options{})
			if err != nil {
				b.Fatal(err)
			}
			store := shard.New(shard.Config{MaxKeys: 1 << 20})
			var mu sync.Mutex
			cond := sync.NewCond(&mu)
			p := persist.New(be, store, persist.Config{Mode: persist.ModeSync, Now: func() int64 { return t0 },
				OnCommit: func(uint64) { mu.Lock(); cond.Broadcast(); mu.Unlock() }})
			p.Start()
			defer p.Close(context.Background())
			var seq atomic.Int64
			b.SetParallelism(par)
			b.ReportAllocs()
			b.ResetTimer()
			b.RunParallel(func(pb *testing.PB) {
				key := make([]byte, 16)
				for pb.Next() {
					binary.BigEndian.PutUint64(key[8:], uint64(seq.Add(1)%100_000))
					store.Apply(key, t0, &check{l: l, cost: 1})
					t := p.Commit()
					mu.Lock()
					for p.Durable() < t {
						cond.Wait()
					}
					mu.Unlock()
				}
			})
			b.StopTimer()
			s := p.Stats()
			b.ReportMetric(float64(b.N)/b.Elapsed().Seconds(), "commits/s")
			if s.FlushSeconds.Count > 0 {
				b.ReportMetric(float64(s.RowsWritten)/float64(s.FlushSeconds.Count), "rows/flush")
			}
		})
	}
}
