package limits

// Batch is a list of operations handed to a backend as one unit: the
// commands of a transaction (EXEC). Local runs its items one after the
// other inside the caller's Section, which already isolates them; an
// upstream backend runs them as one script, so that they take effect
// together or, if the upstream cannot be reached, not at all. Each item
// gets its own results and error, as each command of a transaction gets
// its own reply: an item that fails does not stop the others.
//
// Like the other operation values it says nothing of its transport. Its
// items are every operation a backend runs: single-key operations
// (OpRateGCRA included), MChecks and the admission operations (slots,
// reservations, bans).
type Batch struct {
	Items []BatchItem

	// Err is the error of the whole batch, from a backend that left it
	// pending (Exec returned ErrPending): set, no item ran. Done, if set,
	// is then called once the items (or Err) are in, from the backend's
	// goroutine, with the completed value: a copy, as for Op and MCheck
	// (the caller's value is not written after Exec returns).
	Err  error
	Done func(*Batch)
	Lane uint64 // as Op.Lane: the batch runs in its turn among the lane's operations
}

// BatchItem is one operation of a Batch: Op, or the value the one pointer
// that is not nil points to (Op is then unused). Results go where the
// operation's own call puts them: the value's result fields and Err. Done
// and Lane of the values are unused: the Batch has its own.
type BatchItem struct {
	Op       Op
	MCheck   *MCheck
	Acquire  *Acquire
	Slot     *SlotCall // RELEASE or REFRESH
	Reserve  *Reserve
	Settle   *Settle
	CheckBan *CheckBan
	Ban      *BanCall // BANNED or UNBAN
}

// Exec runs b's items in order at now, each as Do or MCheck would, inside
// sec when it is not nil (EXEC holds the Section of every key the items
// name). It completes b before it returns and returns nil.
func (c *Local) Exec(b *Batch, now int64, sec *Section) error {
	for i := range b.Items {
		it := &b.Items[i]
		switch {
		case it.MCheck != nil:
			it.MCheck.Err = c.MCheck(it.MCheck, now, sec)
		case it.Acquire != nil:
			it.Acquire.Err = c.Acquire(it.Acquire, now, sec)
		case it.Slot != nil:
			it.Slot.Err = c.Slot(it.Slot, now, sec)
		case it.Reserve != nil:
			it.Reserve.Err = c.Reserve(it.Reserve, now, sec)
		case it.Settle != nil:
			it.Settle.Err = c.Settle(it.Settle, now, sec)
		case it.CheckBan != nil:
			it.CheckBan.Err = c.CheckBan(it.CheckBan, now, sec)
		case it.Ban != nil:
			it.Ban.Err = c.Ban(it.Ban, now, sec)
		default:
			c.Do(&it.Op, now, sec)
		}
	}
	b.Err = nil
	return nil
}
