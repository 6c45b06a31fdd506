// Package storetest is the conformance suite every instore.Store backend
// must pass. A backend's test calls Run with a function that opens a fresh
// store:
//
//	func TestStore(t *testing.T) {
//		storetest.Run(t, func(t *testing.T) instore.Store { ... })
//	}
package storetest

import (
	"context"
	"errors"
	"reflect"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
	"github.com/google/go-cmp/cmp/cmpopts"

	"github.com/instore-dev/instore"
)

// test is one subtest; it gets a store of its own.
type test struct {
	name string
	run  func(t *testing.T, s instore.Store)
}

// Run runs the suite. open must return a fresh, empty, migrated store and
// arrange its cleanup (t.Cleanup); it is called once per subtest, from
// parallel subtests.
func Run(t *testing.T, open func(t *testing.T) instore.Store) {
	groups := []struct {
		name  string
		tests []test
	}{
		{"Ping", []test{{"OK", testPing}}},
		{"Customer", customerTests},
		{"Merchant", merchantTests},
		{"APIClient", apiClientTests},
		{"SubscriptionKey", subscriptionKeyTests},
		{"Setting", settingTests},
		{"Device", deviceTests},
		{"Terminal", terminalTests},
		{"Transaction", transactionTests},
		{"OnDevice", onDeviceTests},
		{"Idempotency", idempotencyTests},
		{"Listing", listingTests},
		{"Refund", refundTests},
		{"Tip", tipTests},
		{"PreAuth", preAuthTests},
		{"Forwarding", forwardingTests},
		{"Payback", paybackTests},
		{"Books", booksTests},
		{"TransactionPair", pairTests},
		{"PrintJob", printJobTests},
		{"Effect", effectTests},
		{"Timeline", timelineTests},
		{"Access", accessTests},
		{"Events", eventTests},
		{"Webhook", webhookTests},
		{"Deliveries", deliveryTests},
		{"DeliveryRuns", deliveryRunTests},
		{"Batch", batchTests},
		{"Session", sessionTests},
	}
	for _, g := range groups {
		t.Run(g.name, func(t *testing.T) {
			for _, tt := range g.tests {
				t.Run(tt.name, func(t *testing.T) {
					t.Parallel()
					tt.run(t, open(t))
				})
			}
		})
	}
}

func testPing(t *testing.T, s instore.Store) {
	if err := s.Ping(t.Context()); err != nil {
		t.Fatalf("Ping() = %v, want nil", err)
	}
}

// base is a time with nanoseconds in a zone other than UTC, so the suite
// sees that stores keep microseconds and return UTC.
var base = time.Date(2025, 3, 14, 9, 26, 53, 589793238, time.FixedZone("CET", 3600))

// at returns base plus i minutes.
func at(i int) time.Time { return base.Add(time.Duration(i) * time.Minute) }

// stored is t as a store returns it: UTC, truncated to the microsecond.
func stored(t time.Time) time.Time { return t.UTC().Truncate(time.Microsecond) }

// storedPtr is stored for an optional time.
func storedPtr(t *time.Time) *time.Time {
	if t == nil {
		return nil
	}
	st := stored(*t)
	return &st
}

// asStored is a copy of v as a store returns it: each of its times (a
// time.Time or *time.Time field) stored.
func asStored[T any](v *T) *T {
	c := *v
	fields := reflect.ValueOf(&c).Elem()
	for i := range fields.NumField() {
		switch f := fields.Field(i); f.Type() {
		case reflect.TypeFor[time.Time]():
			f.Set(reflect.ValueOf(stored(f.Interface().(time.Time))))
		case reflect.TypeFor[*time.Time]():
			f.Set(reflect.ValueOf(storedPtr(f.Interface().(*time.Time))))
		}
	}
	return &c
}

// exact compares times by instant and location, so a store that returns
// local times or keeps nanoseconds fails.
var exact = cmp.Comparer(func(a, b time.Time) bool {
	return a.Equal(b) && a.Location() == b.Location()
})

// diff reports want and got as a cmp diff, or "" when they are equal. A nil
// and an empty list are equal.
func diff(want, got any) string { return cmp.Diff(want, got, exact, cmpopts.EquateEmpty()) }

// listCase is a filter and what a listing must return for it, in order.
type listCase[T any] struct {
	key  string
	want []T
}

// checkLists calls list with each case's key and compares the result with
// the case's values as stored; name is the method in failure messages.
func checkLists[T any](t *testing.T, name string, list func(context.Context, string) ([]T, error), stored func(T) T, cases []listCase[T]) {
	t.Helper()
	for _, tc := range cases {
		got, err := list(t.Context(), tc.key)
		if err != nil {
			t.Fatalf("%s(%q) = %v", name, tc.key, err)
		}
		var want []T
		for _, v := range tc.want {
			want = append(want, stored(v))
		}
		if d := diff(want, got); d != "" {
			t.Errorf("%s(%q) mismatch (-want +got):\n%s", name, tc.key, d)
		}
	}
}

// atOnce runs call(0) … call(n-1) in n goroutines released together, so
// that they race, and returns their errors by index.
func atOnce(n int, call func(i int) error) []error {
	var (
		start = make(chan struct{})
		wg    sync.WaitGroup
		errs  = make([]error, n)
	)
	for i := range n {
		wg.Go(func() {
			<-start
			errs[i] = call(i)
		})
	}
	close(start)
	wg.Wait()
	return errs
}

// mustGet returns get(key), which must succeed; name is the method in the
// failure message.
func mustGet[T any](t *testing.T, name string, get func(context.Context, string) (T, error), key string) T {
	t.Helper()
	v, err := get(t.Context(), key)
	if err != nil {
		t.Fatalf("%s(%q) = %v", name, key, err)
	}
	return v
}

// mustCreateWith stores v with create, which must succeed, and returns v;
// name is the method and id names v in the failure message.
func mustCreateWith[T any](t *testing.T, name string, create func(context.Context, T) error, v T, id string) T {
	t.Helper()
	if err := create(t.Context(), v); err != nil {
		t.Fatalf("%s(%q) = %v", name, id, err)
	}
	return v
}

// kind is a stored type as the tests create it and read it back: its name
// in the store's methods (CreateDevice, Device), those methods, and its
// key.
type kind[T any] struct {
	name   string
	create func(instore.Store, context.Context, *T) error
	get    func(instore.Store, context.Context, string) (*T, error)
	key    func(*T) string
}

// mustCreate stores v, which must succeed, and returns v.
func (k kind[T]) mustCreate(t *testing.T, s instore.Store, v *T) *T {
	t.Helper()
	return mustCreateWith(t, "Create"+k.name, func(ctx context.Context, v *T) error { return k.create(s, ctx, v) }, v, k.key(v))
}

// mustGet reads the one with key, which must exist.
func (k kind[T]) mustGet(t *testing.T, s instore.Store, key string) *T {
	t.Helper()
	return mustGet(t, k.name, func(ctx context.Context, key string) (*T, error) { return k.get(s, ctx, key) }, key)
}

// checkRoundTrip stores v with create and compares what get returns for
// id with v as stored; name is the type in the method names.
func checkRoundTrip[T any](t *testing.T, name string, create func(context.Context, *T) error, get func(context.Context, string) (*T, error), v *T, id string) {
	t.Helper()
	mustCreateWith(t, "Create"+name, create, v, id)
	if d := diff(asStored(v), mustGet(t, name, get, id)); d != "" {
		t.Errorf("%s(%q) mismatch (-want +got):\n%s", name, id, d)
	}
}

// checkAll compares what list returns with want as stored, in order (none:
// an empty list); name is the method in failure messages.
func checkAll[T any](t *testing.T, name string, list func(context.Context) ([]*T, error), want ...*T) {
	t.Helper()
	got, err := list(t.Context())
	if err != nil {
		t.Fatalf("%s() = %v", name, err)
	}
	var stored []*T
	for _, w := range want {
		stored = append(stored, asStored(w))
	}
	if d := diff(stored, got); d != "" {
		t.Errorf("%s() mismatch (-want +got):\n%s", name, d)
	}
}

// checkNotFound fails unless err wraps instore.ErrNotFound without naming
// the id (ids are sensitive and errors reach logs).
func checkNotFound(t *testing.T, op string, err error, id string) {
	t.Helper()
	if !errors.Is(err, instore.ErrNotFound) {
		t.Errorf("%s error = %v, want instore.ErrNotFound", op, err)
		return
	}
	if id != "" && strings.Contains(err.Error(), id) {
		t.Errorf("%s error = %q, names the id; ids must not reach logs", op, err)
	}
}

// checkMissing checks that get(key) finds nothing: checkNotFound of its
// error.
func checkMissing[K, T any](t *testing.T, op string, get func(context.Context, K) (T, error), key K, id string) {
	t.Helper()
	_, err := get(t.Context(), key)
	checkNotFound(t, op, err, id)
}

// checkConflict fails unless err wraps instore.ErrConflict.
func checkConflict(t *testing.T, op string, err error) {
	t.Helper()
	if !errors.Is(err, instore.ErrConflict) {
		t.Errorf("%s error = %v, want instore.ErrConflict", op, err)
	}
}

func mustCreateCustomer(t *testing.T, s instore.Store, id string, created time.Time) *instore.Customer {
	t.Helper()
	c := &instore.Customer{ID: id, Name: "Customer " + id, CreatedAt: created}
	if err := s.CreateCustomer(t.Context(), c); err != nil {
		t.Fatalf("CreateCustomer(%q) = %v", id, err)
	}
	return c
}

func mustCreateMerchant(t *testing.T, s instore.Store, id, customerID string, created time.Time) *instore.Merchant {
	t.Helper()
	m := &instore.Merchant{ID: id, CustomerID: customerID, Name: "Merchant " + id, Active: true, CreatedAt: created}
	if err := s.CreateMerchant(t.Context(), m); err != nil {
		t.Fatalf("CreateMerchant(%q) = %v", id, err)
	}
	return m
}

// hash returns a distinct 32-byte digest-like value for s.
func hash(s string) []byte {
	b := make([]byte, 32)
	copy(b, s)
	b[31] = 0xff // not valid UTF-8: proves the column is binary
	return b
}
