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
// items are single-key operations and MChecks, the operations an upstream
// script can run together; admission operations (Reserve, Settle, bans,
// slots) and OpRateGCRA are not items.
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

// BatchItem is one operation of a Batch: Op, or the MCheck MCheck points
// to when it is not nil (Op is then unused). Results go where the
// operation's own call puts them: the Op's result fields and Err, the
// MCheck's result fields and Err.
type BatchItem struct {
	Op     Op
	MCheck *MCheck
}

// Exec runs b's items in order at now, each as Do or MCheck would, inside
// sec when it is not nil (EXEC holds the Section of every key the items
// name). It completes b before it returns and returns nil.
func (c *Local) Exec(b *Batch, now int64, sec *Section) error {
	for i := range b.Items {
		it := &b.Items[i]
		if it.MCheck != nil {
			it.MCheck.Err = c.MCheck(it.MCheck, now, sec)
			continue
		}
		c.Do(&it.Op, now, sec)
	}
	b.Err = nil
	return nil
}
