package persist

import (
	"context"
	"crypto/rand"
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"fmt"
	"net/url"
	"os"
	"strconv"
	"sync"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/config"
	"github.com/aws/aws-sdk-go-v2/credentials"
	"github.com/aws/aws-sdk-go-v2/feature/ec2/imds"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb/types"

	"github.com/throttlekit/throttlekit-server/engine"
)

// DynamoDB item layout. The partition key k is binary: 0x01 followed by the
// store key for a state item; for a key too long for a partition key (2048
// bytes), 0x02 followed by the key's SHA-256, with the key itself in f; 0x00
// followed by "lease" for the writer lease. The prefix byte keeps the three
// kinds apart, so no store key can collide with a digest or the lease.
// Numbers are decimal strings, exact for every int64.
const (
	attrKey    = "k"   // B: prefix byte + key (or its digest)
	attrFull   = "f"   // B: the key, when k holds its digest
	attrKind   = "s"   // N: engine.Kind
	attrA      = "a"   // N: State.A
	attrB      = "b"   // N: State.B
	attrExpire = "x"   // N: expiry, ns since the epoch
	attrTTL    = "ttl" // N: expiry in whole seconds, the table's TTL attribute
	attrOwner  = "o"   // S: lease owner
	attrUntil  = "u"   // N: lease expiry, ns since the epoch

	dynamoBatch = 25   // BatchWriteItem's limit on requests per call
	maxPartKey  = 2048 // DynamoDB's limit on a binary partition key
)

var leaseKey = []byte("\x00lease")

type dynConfig struct {
	table    string
	region   string
	endpoint string
	segments int
	parallel int
}

func parseDynamoURL(u *url.URL) (dynConfig, error) {
	cfg := dynConfig{table: u.Host, segments: 4, parallel: 8}
	if cfg.table == "" {
		cfg.table = u.Opaque
	}
	if cfg.table == "" {
		cfg.table = DefaultTable
	}
	if !validTable(cfg.table) {
		return cfg, badURL("bad table name %q: use 3-48 letters, digits or '_', not starting with a digit", cfg.table)
	}
	q := u.Query()
	for name := range q {
		switch name {
		case "region", "endpoint", "segments", "parallel":
		default:
			return cfg, badURL("unknown dynamodb URL parameter %q (region, endpoint, segments, parallel)", name)
		}
	}
	cfg.region = q.Get("region")
	cfg.endpoint = q.Get("endpoint")
	if cfg.endpoint != "" {
		e, err := url.Parse(cfg.endpoint)
		if err != nil || (e.Scheme != "http" && e.Scheme != "https") || e.Host == "" {
			return cfg, badURL("bad endpoint %q: want http://host:port or https://host", cfg.endpoint)
		}
	}
	for _, p := range []struct {
		name string
		dst  *int
	}{{"segments", &cfg.segments}, {"parallel", &cfg.parallel}} {
		if v := q.Get(p.name); v != "" {
			n, err := strconv.Atoi(v)
			if err != nil || n < 1 || n > 64 {
				return cfg, badURL("bad %s %q: want 1 to 64", p.name, v)
			}
			*p.dst = n
		}
	}
	return cfg, nil
}

type dynamo struct {
	cfg    dynConfig
	client *dynamodb.Client
	owner  string
	ttl    time.Duration
	now    func() int64
	ttlOn  bool // the service deletes expired items by itself

	mu     sync.Mutex
	until  int64 // our lease is valid before this instant (ns)
	lost   bool  // another writer took the lease
	closed bool

	stop chan struct{}
	done chan struct{}
}

func openDynamo(ctx context.Context, cfg dynConfig, opts Options) (*dynamo, error) {
	var loaders []func(*config.LoadOptions) error
	if cfg.region != "" {
		loaders = append(loaders, config.WithRegion(cfg.region))
	}
	if cfg.endpoint != "" {
		// An explicit endpoint is usually an emulator or a VPC endpoint:
		// never wait on the instance metadata service.
		loaders = append(loaders, config.WithEC2IMDSClientEnableState(imds.ClientDisabled))
	}
	awsCfg, err := config.LoadDefaultConfig(ctx, loaders...)
	if err != nil {
		return nil, backendErr("aws config", err)
	}
	if awsCfg.Region == "" {
		if cfg.endpoint == "" {
			return nil, badURL("no AWS region: add ?region=... to the URL or set AWS_REGION")
		}
		awsCfg.Region = "us-east-1"
	}
	if cfg.endpoint != "" {
		if _, err := awsCfg.Credentials.Retrieve(ctx); err != nil {
			// Emulators accept any signature.
			awsCfg.Credentials = credentials.NewStaticCredentialsProvider("local", "local", "")
		}
	}
	d := &dynamo{
		cfg: cfg,
		client: dynamodb.NewFromConfig(awsCfg, func(o *dynamodb.Options) {
			if cfg.endpoint != "" {
				o.BaseEndpoint = aws.String(cfg.endpoint)
			}
		}),
		owner: opts.Owner,
		ttl:   opts.LeaseTTL,
		now:   opts.now,
		stop:  make(chan struct{}),
		done:  make(chan struct{}),
	}
	if d.owner == "" {
		d.owner = defaultOwner()
	}
	if d.ttl <= 0 {
		d.ttl = 30 * time.Second
	}
	if err := d.ensureTable(ctx); err != nil {
		return nil, err
	}
	if err := d.renew(ctx); err != nil {
		return nil, err
	}
	go d.renewLoop()
	return d, nil
}

func defaultOwner() string {
	host, _ := os.Hostname()
	var b [6]byte
	_, _ = rand.Read(b[:])
	return fmt.Sprintf("%s/%d/%s", host, os.Getpid(), hex.EncodeToString(b[:]))
}

// Name returns "dynamodb".
func (d *dynamo) Name() string { return "dynamodb" }

func (d *dynamo) ensureTable(ctx context.Context) error {
	_, err := d.client.DescribeTable(ctx, &dynamodb.DescribeTableInput{TableName: &d.cfg.table})
	var nf *types.ResourceNotFoundException
	if errors.As(err, &nf) {
		_, err = d.client.CreateTable(ctx, &dynamodb.CreateTableInput{
			TableName:            &d.cfg.table,
			BillingMode:          types.BillingModePayPerRequest,
			AttributeDefinitions: []types.AttributeDefinition{{AttributeName: aws.String(attrKey), AttributeType: types.ScalarAttributeTypeB}},
			KeySchema:            []types.KeySchemaElement{{AttributeName: aws.String(attrKey), KeyType: types.KeyTypeHash}},
		})
		var inUse *types.ResourceInUseException
		if err != nil && !errors.As(err, &inUse) {
			return backendErr(fmt.Sprintf("create table %q", d.cfg.table), err)
		}
		err = nil
	}
	if err != nil {
		return backendErr(fmt.Sprintf("describe table %q", d.cfg.table), err)
	}
	w := dynamodb.NewTableExistsWaiter(d.client, func(o *dynamodb.TableExistsWaiterOptions) {
		o.MinDelay, o.MaxDelay = 200*time.Millisecond, 2*time.Second
	})
	if err := w.Wait(ctx, &dynamodb.DescribeTableInput{TableName: &d.cfg.table}, 5*time.Minute); err != nil {
		return backendErr(fmt.Sprintf("wait for table %q", d.cfg.table), err)
	}
	// TTL: let the service delete expired items. An emulator may not
	// implement it; then Expire deletes them by a scan.
	if out, err := d.client.DescribeTimeToLive(ctx, &dynamodb.DescribeTimeToLiveInput{TableName: &d.cfg.table}); err == nil &&
		out.TimeToLiveDescription != nil && aws.ToString(out.TimeToLiveDescription.AttributeName) == attrTTL &&
		(out.TimeToLiveDescription.TimeToLiveStatus == types.TimeToLiveStatusEnabled ||
			out.TimeToLiveDescription.TimeToLiveStatus == types.TimeToLiveStatusEnabling) {
		d.ttlOn = true
		return nil
	}
	_, err = d.client.UpdateTimeToLive(ctx, &dynamodb.UpdateTimeToLiveInput{
		TableName:               &d.cfg.table,
		TimeToLiveSpecification: &types.TimeToLiveSpecification{AttributeName: aws.String(attrTTL), Enabled: aws.Bool(true)},
	})
	d.ttlOn = err == nil
	return nil
}

// renew takes or extends the writer lease with a conditional put: it
// succeeds when there is no lease, the lease is ours, or it has expired.
func (d *dynamo) renew(ctx context.Context) error {
	now := d.now()
	until := now + int64(d.ttl)
	_, err := d.client.PutItem(ctx, &dynamodb.PutItemInput{
		TableName: &d.cfg.table,
		Item: map[string]types.AttributeValue{
			attrKey:   &types.AttributeValueMemberB{Value: leaseKey},
			attrOwner: &types.AttributeValueMemberS{Value: d.owner},
			attrUntil: num(until),
		},
		ConditionExpression:      aws.String("attribute_not_exists(#k) OR #o = :me OR #u < :now"),
		ExpressionAttributeNames: map[string]string{"#k": attrKey, "#o": attrOwner, "#u": attrUntil},
		ExpressionAttributeValues: map[string]types.AttributeValue{
			":me":  &types.AttributeValueMemberS{Value: d.owner},
			":now": num(now),
		},
	})
	d.mu.Lock()
	defer d.mu.Unlock()
	var cf *types.ConditionalCheckFailedException
	switch {
	case errors.As(err, &cf):
		d.lost = true
		return inUse(d.cfg.table)
	case err != nil:
		return backendErr("lease", err)
	}
	d.until, d.lost = until, false
	return nil
}

func (d *dynamo) renewLoop() {
	defer close(d.done)
	t := time.NewTicker(d.ttl / 3)
	defer t.Stop()
	for {
		select {
		case <-d.stop:
			return
		case <-t.C:
			ctx, cancel := context.WithTimeout(context.Background(), d.ttl/3)
			_ = d.renew(ctx) // a failure shows in Write until a renewal succeeds
			cancel()
		}
	}
}

// leaseOK returns nil while this process holds an unexpired lease.
func (d *dynamo) leaseOK() error {
	d.mu.Lock()
	defer d.mu.Unlock()
	switch {
	case d.closed:
		return &Error{Code: CodeClosed, Msg: "backend closed"}
	case d.lost:
		return inUse(d.cfg.table)
	case d.now() >= d.until:
		return &Error{Code: CodeBackend, Msg: fmt.Sprintf("writer lease on table %q expired and could not be renewed", d.cfg.table)}
	}
	return nil
}

func num(v int64) types.AttributeValue {
	return &types.AttributeValueMemberN{Value: strconv.FormatInt(v, 10)}
}

// itemKey returns the partition key of a store key and whether it is a
// digest (the key must then be stored in f).
func itemKey(key []byte) ([]byte, bool) {
	if 1+len(key) > maxPartKey {
		sum := sha256.Sum256(key)
		return append([]byte{2}, sum[:]...), true
	}
	k := make([]byte, 1+len(key))
	k[0] = 1
	copy(k[1:], key)
	return k, false
}

// ttlSeconds is the TTL attribute for an expiry in ns: the first whole
// second at or after it.
func ttlSeconds(expireAt int64) int64 {
	s := expireAt / 1e9
	if expireAt%1e9 > 0 {
		s++
	}
	return s
}

// Write sends recs as BatchWriteItem calls while the lease is held.
func (d *dynamo) Write(ctx context.Context, recs []Record) error {
	if len(recs) == 0 {
		return nil
	}
	if err := d.leaseOK(); err != nil {
		return err
	}
	reqs := make([]types.WriteRequest, len(recs))
	for i := range recs {
		r := &recs[i]
		ik, digest := itemKey(r.Key)
		k := &types.AttributeValueMemberB{Value: ik}
		if r.Tombstone() {
			reqs[i].DeleteRequest = &types.DeleteRequest{Key: map[string]types.AttributeValue{attrKey: k}}
			continue
		}
		item := map[string]types.AttributeValue{
			attrKey:    k,
			attrKind:   num(int64(r.State.Kind)),
			attrA:      num(r.State.A),
			attrB:      num(r.State.B),
			attrExpire: num(r.ExpireAt),
			attrTTL:    num(ttlSeconds(r.ExpireAt)),
		}
		if digest {
			item[attrFull] = &types.AttributeValueMemberB{Value: r.Key}
		}
		reqs[i].PutRequest = &types.PutRequest{Item: item}
	}
	return d.batchWrite(ctx, reqs)
}

// batchWrite sends reqs in calls of 25, up to cfg.parallel at a time, and
// resends unprocessed items with exponential backoff.
func (d *dynamo) batchWrite(ctx context.Context, reqs []types.WriteRequest) error {
	chunks := make(chan []types.WriteRequest)
	var wg sync.WaitGroup
	var mu sync.Mutex
	var first error
	ctx, cancel := context.WithCancel(ctx)
	defer cancel()
	for range min(d.cfg.parallel, (len(reqs)+dynamoBatch-1)/dynamoBatch) {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for c := range chunks {
				if err := d.writeChunk(ctx, c); err != nil {
					mu.Lock()
					if first == nil {
						first = err
					}
					mu.Unlock()
					cancel()
				}
			}
		}()
	}
	for i := 0; i < len(reqs); i += dynamoBatch {
		select {
		case chunks <- reqs[i:min(i+dynamoBatch, len(reqs))]:
		case <-ctx.Done():
		}
	}
	close(chunks)
	wg.Wait()
	if first == nil && ctx.Err() != nil {
		first = ctx.Err()
	}
	return backendErr("write", first)
}

func (d *dynamo) writeChunk(ctx context.Context, c []types.WriteRequest) error {
	if ctx.Err() != nil {
		return ctx.Err()
	}
	backoff := 20 * time.Millisecond
	for attempt := 0; ; attempt++ {
		out, err := d.client.BatchWriteItem(ctx, &dynamodb.BatchWriteItemInput{
			RequestItems: map[string][]types.WriteRequest{d.cfg.table: c},
		})
		if err != nil {
			return err
		}
		c = out.UnprocessedItems[d.cfg.table]
		if len(c) == 0 {
			return nil
		}
		if attempt == 12 {
			return fmt.Errorf("%d items still unprocessed after %d attempts", len(c), attempt+1)
		}
		select {
		case <-time.After(backoff):
		case <-ctx.Done():
			return ctx.Err()
		}
		backoff = min(2*backoff, 2*time.Second)
	}
}

func (d *dynamo) isClosed() bool {
	d.mu.Lock()
	defer d.mu.Unlock()
	return d.closed
}

// scan runs a parallel Scan of cfg.segments segments with the filter and
// calls fn for each state item, one call at a time.
func (d *dynamo) scan(ctx context.Context, filter string, now int64, proj string, fn func(item map[string]types.AttributeValue) error) error {
	ctx, cancel := context.WithCancel(ctx)
	defer cancel()
	var mu sync.Mutex // serialises fn
	errs := make(chan error, d.cfg.segments)
	for seg := range d.cfg.segments {
		go func() {
			in := &dynamodb.ScanInput{
				TableName:                 &d.cfg.table,
				Segment:                   aws.Int32(int32(seg)),
				TotalSegments:             aws.Int32(int32(d.cfg.segments)),
				ConsistentRead:            aws.Bool(true),
				FilterExpression:          aws.String(filter),
				ExpressionAttributeNames:  map[string]string{"#x": attrExpire},
				ExpressionAttributeValues: map[string]types.AttributeValue{":now": num(now)},
			}
			if proj != "" {
				in.ProjectionExpression = aws.String(proj)
				in.ExpressionAttributeNames["#k"] = attrKey
			}
			p := dynamodb.NewScanPaginator(d.client, in)
			for p.HasMorePages() {
				out, err := p.NextPage(ctx)
				if err != nil {
					errs <- err
					return
				}
				mu.Lock()
				for _, it := range out.Items {
					if err := fn(it); err != nil {
						mu.Unlock()
						errs <- err
						return
					}
				}
				mu.Unlock()
			}
			errs <- nil
		}()
	}
	var first error
	for range d.cfg.segments {
		if err := <-errs; err != nil && first == nil {
			first = err
			cancel()
		}
	}
	return first
}

// Load reads the unexpired items with a parallel Scan.
func (d *dynamo) Load(ctx context.Context, now int64, fn func(key []byte, st engine.State, expireAt int64) error) error {
	if d.isClosed() {
		return &Error{Code: CodeClosed, Msg: "backend closed"}
	}
	err := d.scan(ctx, "#x > :now", now, "", func(it map[string]types.AttributeValue) error {
		k, ok := it[attrKey].(*types.AttributeValueMemberB)
		if !ok || len(k.Value) == 0 {
			return nil // not ours
		}
		var key []byte
		switch k.Value[0] {
		case 1:
			key = k.Value[1:]
		case 2:
			f, ok := it[attrFull].(*types.AttributeValueMemberB)
			if !ok {
				return &Error{Code: CodeBackend, Msg: "load: digest item without its key"}
			}
			key = f.Value
		default:
			return nil // the lease
		}
		var v [4]int64
		for i, name := range []string{attrKind, attrA, attrB, attrExpire} {
			n, ok := it[name].(*types.AttributeValueMemberN)
			if !ok {
				return &Error{Code: CodeBackend, Msg: fmt.Sprintf("load: item without number %q", name)}
			}
			x, err := strconv.ParseInt(n.Value, 10, 64)
			if err != nil {
				return &Error{Code: CodeBackend, Msg: fmt.Sprintf("load: bad number %q in %q", n.Value, name)}
			}
			v[i] = x
		}
		if v[0] < 0 || v[0] > 255 {
			return &Error{Code: CodeBackend, Msg: fmt.Sprintf("load: item with kind %d", v[0])}
		}
		return fn(key, engine.State{Kind: engine.Kind(v[0]), A: v[1], B: v[2]}, v[3])
	})
	return backendErr("load", err)
}

// Expire deletes expired items by a scan, unless the table's TTL is on: then
// the service deletes them itself (within days; Load skips them until then).
func (d *dynamo) Expire(ctx context.Context, now int64) (int64, error) {
	if d.ttlOn {
		return 0, nil
	}
	if err := d.leaseOK(); err != nil {
		return 0, err
	}
	var reqs []types.WriteRequest
	err := d.scan(ctx, "#x <= :now", now, "#k, #x", func(it map[string]types.AttributeValue) error {
		k, ok := it[attrKey].(*types.AttributeValueMemberB)
		if ok && len(k.Value) > 0 && (k.Value[0] == 1 || k.Value[0] == 2) {
			reqs = append(reqs, types.WriteRequest{DeleteRequest: &types.DeleteRequest{Key: map[string]types.AttributeValue{attrKey: k}}})
		}
		return nil
	})
	if err != nil {
		return 0, backendErr("expire", err)
	}
	if err := d.batchWrite(ctx, reqs); err != nil {
		return 0, err
	}
	return int64(len(reqs)), nil
}

// Close stops renewing the lease and deletes it if it is still ours, so
// another server may take the table at once.
func (d *dynamo) Close() error {
	d.mu.Lock()
	if d.closed {
		d.mu.Unlock()
		return nil
	}
	d.closed = true
	d.mu.Unlock()
	close(d.stop)
	<-d.done
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	_, err := d.client.DeleteItem(ctx, &dynamodb.DeleteItemInput{
		TableName:                 &d.cfg.table,
		Key:                       map[string]types.AttributeValue{attrKey: &types.AttributeValueMemberB{Value: leaseKey}},
		ConditionExpression:       aws.String("#o = :me"),
		ExpressionAttributeNames:  map[string]string{"#o": attrOwner},
		ExpressionAttributeValues: map[string]types.AttributeValue{":me": &types.AttributeValueMemberS{Value: d.owner}},
	})
	var cf *types.ConditionalCheckFailedException
	if err != nil && !errors.As(err, &cf) {
		return backendErr("release lease", err)
	}
	return nil
}
