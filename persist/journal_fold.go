package persist

import (
	"context"
	"time"
	"unsafe"

	"github.com/throttlekit/throttlekit-server/engine"
)

// Fold sizes of the Postgres journal (see foldState).
const (
	// foldRecords is the number of records appended since the last cut
	// that starts a fold before FoldEvery has passed.
	foldRecords = 1 << 17
	// foldChunk is the least number of keys a Write folds while a fold is
	// under way (see foldState.chunk).
	foldChunk = 64
	// foldChunkAll is the chunk of a fold that must finish now (Close, or
	// an Open with journal=off).
	foldChunkAll = 4096
)

// foldState is the part of the journal not yet folded into the table,
// kept in memory by the writer, coalesced per key.
//
// next holds the latest record of every key appended since the last cut.
// A cut moves next to folding and remembers the id of the last journal
// row appended, cutID: folding holds, for every key the rows up to cutID
// mention, its last record in them. Each Write then upserts (or deletes) a
// chunk of folding into the table with its append; the chunk that
// finishes the fold also deletes the journal rows up to cutID, in the
// same transaction. Appends and folds run one after the other under the
// backend's lock, so a journal row with a larger id always holds states
// gathered later than anything folded before: a load that reads the table
// and then replays the journal rows left, in id order, finds the newest
// written state of every key.
type foldState struct {
	next    []Record         // latest records since the cut, keys owned by index
	index   map[string]int32 // key -> position in next
	records int              // records appended since the cut (with repeats)
	lastID  int64            // id of the last journal row appended or found
	cutAt   time.Time        // when the last cut was made
	lastAt  time.Time        // when the last row was appended (or found)

	folding []Record  // the records being folded; nil when no fold is under way
	done    int       // records of folding already in the table
	cutID   int64     // journal rows with id <= cutID go when folding is done
	stepAt  time.Time // when the last chunk was sized
}

// chunk returns how many keys of the fold under way the Write at now,
// which appended n records, folds: enough that, at the rate of the Writes
// so far, the fold ends within half a fold period and before another
// foldRecords/2 records are appended, and at least foldChunk. Small
// chunks keep the time a fold adds to each Write short.
func (f *foldState) chunk(now time.Time, n int, every time.Duration) int {
	size := float64(len(f.folding))
	byTime := size * float64(now.Sub(f.stepAt)) / float64(max(every/2, 1))
	byCount := size * float64(n) / (foldRecords / 2)
	f.stepAt = now
	return int(min(size, max(foldChunk, byTime+1, byCount+1)))
}

// add records one appended record, replacing an older one of its key.
func (f *foldState) add(key []byte, st engine.State, exp int64) {
	f.records++
	if i, ok := f.index[string(key)]; ok {
		f.next[i].State, f.next[i].ExpireAt = st, exp
		return
	}
	if f.index == nil {
		f.index = make(map[string]int32)
	}
	k := string(key)
	f.index[k] = int32(len(f.next))
	b := []byte{} // not nil: a nil key would be sent as NULL
	if len(k) > 0 {
		// Never written: the record only lends its key to the writes.
		b = unsafe.Slice(unsafe.StringData(k), len(k))
	}
	f.next = append(f.next, Record{Key: b, State: st, ExpireAt: exp})
}

// pending reports whether the journal holds rows not yet folded.
func (f *foldState) pending() bool { return f.folding != nil || len(f.next) > 0 }

// cut starts a fold of everything appended so far.
func (f *foldState) cut(now time.Time) {
	f.folding, f.done, f.cutID = f.next, 0, f.lastID
	f.next, f.index, f.records = make([]Record, 0, len(f.folding)), make(map[string]int32, len(f.folding)), 0
	f.cutAt, f.stepAt = now, f.lastAt // the first chunk covers the time since the last append
}

// recoverJournalLocked reads the journal rows left by an earlier writer
// (a crash, or a Close that could not fold) into the fold state, so they
// are folded like rows this writer appended. With journal=off they are
// folded at once: later writes go straight to the table, and replaying
// older journal rows over them would undo them.
func (p *postgres) recoverJournalLocked(ctx context.Context) error {
	p.fold.cutAt = time.Now()
	p.fold.lastAt = p.fold.cutAt
	rows, err := p.conn.Query(ctx, p.jReadSQL)
	if err != nil {
		return err
	}
	var id int64
	var recs []byte
	for rows.Next() {
		if err := rows.Scan(&id, &recs); err != nil {
			rows.Close()
			return err
		}
		if err := decodeJournal(recs, p.fold.add); err != nil {
			rows.Close()
			return err
		}
		p.fold.lastID = id
	}
	rows.Close()
	if err := rows.Err(); err != nil {
		return err
	}
	if !p.journal {
		return p.foldAllLocked(ctx)
	}
	return nil
}

// appendLocked writes recs as one journal row and, when a fold is under
// way or due, folds a chunk of it in the same transaction (write=unnest:
// one round trip) or right after (write=copy).
func (p *postgres) appendLocked(ctx context.Context, recs []Record) error {
	f := &p.fold
	now := time.Now()
	if f.folding == nil && len(f.next) > 0 && (f.records >= foldRecords || now.Sub(f.cutAt) >= p.foldEvery) {
		f.cut(now)
	}
	var chunk []Record
	var foldTo int64
	end := f.done
	if f.folding != nil {
		end = min(f.done+f.chunk(now, len(recs), p.foldEvery), len(f.folding))
		chunk = f.folding[f.done:end]
		if end == len(f.folding) {
			foldTo = f.cutID
		}
	}
	p.jbuf = appendJournal(p.jbuf[:0], recs)
	var id int64
	var appended bool
	var err error
	if p.method == WriteCopy {
		err = p.conn.QueryRow(ctx, p.jInsertSQL, p.jbuf).Scan(&id)
		appended = err == nil
		if err == nil && len(chunk) > 0 {
			err = p.writeCopy(ctx, chunk, foldTo)
		}
	} else {
		id, appended, err = p.writeUnnest(ctx, chunk, foldTo, p.jbuf)
	}
	if cap(p.jbuf) > 1<<20 {
		p.jbuf = nil
	}
	if appended {
		for i := range recs {
			f.add(recs[i].Key, recs[i].State, recs[i].ExpireAt)
		}
		f.lastID, f.lastAt = id, now
	}
	if err != nil {
		// The chunk is folded again by the next Write: writing a state
		// twice is harmless.
		return err
	}
	f.done = end
	if foldTo > 0 {
		f.folding, f.done = nil, 0
	}
	return nil
}

// foldStepLocked writes up to n records of the fold under way into the
// table; the step that finishes the fold deletes the folded journal rows
// in its transaction.
func (p *postgres) foldStepLocked(ctx context.Context, n int) error {
	f := &p.fold
	end := min(f.done+n, len(f.folding))
	var foldTo int64
	if end == len(f.folding) {
		foldTo = f.cutID
	}
	if err := p.writeRows(ctx, f.folding[f.done:end], foldTo); err != nil {
		return err
	}
	f.done = end
	if foldTo > 0 {
		f.folding, f.done = nil, 0
	}
	return nil
}

// foldAllLocked folds every journal row appended so far.
func (p *postgres) foldAllLocked(ctx context.Context) error {
	for p.fold.pending() {
		if p.fold.folding == nil {
			p.fold.cut(time.Now())
		}
		if err := p.foldStepLocked(ctx, foldChunkAll); err != nil {
			return err
		}
	}
	return nil
}

// foldIdle folds the whole journal when nothing was appended for a fold
// period: Writes fold only while they come.
func (p *postgres) foldIdle(ctx context.Context) error {
	p.mu.Lock()
	defer p.mu.Unlock()
	if p.closed || !p.fold.pending() || time.Since(p.fold.lastAt) < p.foldEvery {
		return nil
	}
	if p.conn == nil || p.conn.IsClosed() {
		if err := p.connectLocked(ctx); err != nil {
			return err
		}
	}
	err := p.foldAllLocked(ctx)
	if err != nil {
		p.dropBrokenLocked(err)
	}
	return err
}
