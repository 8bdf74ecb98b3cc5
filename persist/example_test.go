package persist_test

import (
	"context"
	"errors"
	"log"
	"time"

	"github.com/throttlekit/throttlekit-server/persist"
	"github.com/throttlekit/throttlekit-server/shard"
)

// A server restores its store at start, saves it every second, and makes a
// final save when it stops.
func Example() {
	ctx := context.Background()
	store := shard.New(shard.Config{})
	be, err := persist.Open(ctx, "postgres://throttlekit@db.internal:5432/limits?table=throttlekit_state", persist.Options{})
	if errors.Is(err, persist.ErrInUse) {
		log.Fatal(err) // persist: table "throttlekit_state" is in use by another server
	} else if err != nil {
		log.Fatal(err)
	}
	p := persist.New(be, store, persist.Config{Mode: persist.ModeAsync, Interval: time.Second})
	ls, err := p.LoadAll(ctx, time.Now().UnixNano())
	if err != nil {
		log.Fatal(err)
	}
	log.Printf("loaded %d keys in %v", ls.Keys, ls.Took)
	p.Start()
	defer p.Close(ctx)
	// ... serve; read p.Stats() for metrics ...
}

// In sync mode an event loop applies a batch of commands, takes a ticket
// and holds the replies until the ticket is durable.
func ExamplePersister_Commit() {
	var p *persist.Persister // from persist.New with Config{Mode: persist.ModeSync, OnCommit: wakeLoops}
	if p == nil {
		return
	}
	// ... apply the batch to the store ...
	ticket := p.Commit()
	// ... keep the replies aside with their ticket; on each wake-up:
	if p.Durable() >= ticket {
		// write the held replies
	}
	if p.Refusing() {
		// FailClosed and the backend is down: answer -TRYAGAIN persistence unavailable
	}
}
