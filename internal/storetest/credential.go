package storetest

import (
	"context"
	"testing"
	"time"

	"github.com/instore-dev/instore"
)

// credentialFixture creates two customers, cus_a with merchant mer_a and
// cus_b with merchant mer_b.
func credentialFixture(t *testing.T, s instore.Store) {
	t.Helper()
	mustCreateCustomer(t, s, "cus_a", at(0))
	mustCreateCustomer(t, s, "cus_b", at(0))
	mustCreateMerchant(t, s, "mer_a", "cus_a", at(0))
	mustCreateMerchant(t, s, "mer_b", "cus_b", at(0))
}

func newAPIClient(id string, surface instore.Surface, customerID, merchantID string, created time.Time) *instore.APIClient {
	return &instore.APIClient{
		ID: id, Surface: surface, CustomerID: customerID, MerchantID: merchantID,
		Name: "Client " + id, SecretHash: hash("secret " + id), CreatedAt: created,
	}
}

var apiClientTests = []test{
	{"RoundTrip", apiClients.roundTripTest},
	{"NotFound", func(t *testing.T, s instore.Store) {
		checkMissing(t, "APIClient(missing)", s.APIClient, "cli_missing_93d1", "cli_missing_93d1")
	}},
	{"Conflict", func(t *testing.T, s instore.Store) {
		credentialFixture(t, s)
		apiClients.mustCreate(t, s, newAPIClient("cli_1", instore.SurfaceAccess, "cus_a", "", at(0)))
		for _, tc := range []struct {
			name string
			c    *instore.APIClient
		}{
			{"duplicate id", newAPIClient("cli_1", instore.SurfaceAccess, "cus_b", "", at(1))},
			{"missing customer", newAPIClient("cli_2", instore.SurfaceAccess, "cus_missing", "", at(1))},
			{"missing merchant", newAPIClient("cli_3", instore.SurfaceOnline, "cus_a", "mer_missing", at(1))},
		} {
			checkConflict(t, "CreateAPIClient("+tc.name+")", s.CreateAPIClient(t.Context(), tc.c))
		}
	}},
	{"List", apiClients.listTest},
	{"Revoke", apiClients.revokeTest},
	{"RevokeNotFound", func(t *testing.T, s instore.Store) {
		err := s.RevokeAPIClient(t.Context(), "cli_missing_55e0", at(0))
		checkNotFound(t, "RevokeAPIClient(missing)", err, "cli_missing_55e0")
	}},
}

func newSubscriptionKey(id string, surface instore.Surface, customerID, merchantID string, created time.Time) *instore.SubscriptionKey {
	return &instore.SubscriptionKey{
		ID: id, Surface: surface, CustomerID: customerID, MerchantID: merchantID,
		Prefix: "sk_" + id[len(id)-2:], Hash: hash("key " + id), CreatedAt: created,
	}
}

var subscriptionKeyTests = []test{
	{"RoundTrip", subscriptionKeys.roundTripTest},
	{"NotFound", func(t *testing.T, s instore.Store) {
		credentialFixture(t, s)
		k := subscriptionKeys.mustCreate(t, s, newSubscriptionKey("key_1", instore.SurfaceAccess, "cus_a", "", at(0)))
		// A prefix of a stored hash is not the hash.
		for _, h := range [][]byte{hash("unknown"), k.Hash[:16]} {
			checkMissing(t, "SubscriptionKeyByHash(unknown)", s.SubscriptionKeyByHash, h, "")
		}
	}},
	{"Conflict", func(t *testing.T, s instore.Store) {
		credentialFixture(t, s)
		k := subscriptionKeys.mustCreate(t, s, newSubscriptionKey("key_1", instore.SurfaceAccess, "cus_a", "", at(0)))
		sameHash := newSubscriptionKey("key_2", instore.SurfaceAccess, "cus_b", "", at(1))
		sameHash.Hash = k.Hash
		for _, tc := range []struct {
			name string
			k    *instore.SubscriptionKey
		}{
			{"duplicate id", newSubscriptionKey("key_1", instore.SurfaceAccess, "cus_b", "", at(1))},
			{"duplicate hash", sameHash},
			{"missing customer", newSubscriptionKey("key_3", instore.SurfaceAccess, "cus_missing", "", at(1))},
			{"missing merchant", newSubscriptionKey("key_4", instore.SurfaceOnline, "cus_a", "mer_missing", at(1))},
		} {
			checkConflict(t, "CreateSubscriptionKey("+tc.name+")", s.CreateSubscriptionKey(t.Context(), tc.k))
		}
		if got := subscriptionKeys.read(t, s, k); got.ID != k.ID {
			t.Errorf("SubscriptionKeyByHash().ID = %q after refused duplicates, want %q", got.ID, k.ID)
		}
	}},
	{"List", subscriptionKeys.listTest},
	{"Revoke", subscriptionKeys.revokeTest},
	{"RevokeNotFound", func(t *testing.T, s instore.Store) {
		err := s.RevokeSubscriptionKey(t.Context(), "key_missing_c0fe", at(0))
		checkNotFound(t, "RevokeSubscriptionKey(missing)", err, "key_missing_c0fe")
	}},
}

// credentialKind is a kind of credential (API clients, subscription keys)
// as the List and Revoke tests, the same for both, use it.
type credentialKind[C any] struct {
	kind[C]        // its name in method names: "APIClient" for APIClients, RevokeAPIClient
	prefix  string // of its ids
	newCred func(id string, surface instore.Surface, customerID, merchantID string, created time.Time) *C
	read    func(*testing.T, instore.Store, *C) *C // reads one back as stored
	list    func(instore.Store) func(context.Context, string) ([]*C, error)
	revoke  func(instore.Store) func(context.Context, string, time.Time) error
	revoked func(*C) **time.Time
	// unnamed removes the name (a key's prefix) of a credential.
	unnamed func(*C)
}

var apiClients = credentialKind[instore.APIClient]{
	kind: kind[instore.APIClient]{"APIClient", instore.Store.CreateAPIClient, instore.Store.APIClient,
		func(c *instore.APIClient) string { return c.ID }},
	prefix: "cli_", newCred: newAPIClient,
	read: func(t *testing.T, s instore.Store, c *instore.APIClient) *instore.APIClient {
		return mustGet(t, "APIClient", s.APIClient, c.ID)
	},
	list:    func(s instore.Store) func(context.Context, string) ([]*instore.APIClient, error) { return s.APIClients },
	revoke:  func(s instore.Store) func(context.Context, string, time.Time) error { return s.RevokeAPIClient },
	revoked: func(c *instore.APIClient) **time.Time { return &c.RevokedAt },
	unnamed: func(c *instore.APIClient) { c.Name = "" },
}

var subscriptionKeys = credentialKind[instore.SubscriptionKey]{
	kind: kind[instore.SubscriptionKey]{name: "SubscriptionKey", create: instore.Store.CreateSubscriptionKey,
		key: func(k *instore.SubscriptionKey) string { return k.ID }},
	prefix: "key_", newCred: newSubscriptionKey,
	read: func(t *testing.T, s instore.Store, k *instore.SubscriptionKey) *instore.SubscriptionKey {
		t.Helper()
		got, err := s.SubscriptionKeyByHash(t.Context(), k.Hash)
		if err != nil {
			t.Fatalf("SubscriptionKeyByHash(%q's hash) = %v", k.ID, err)
		}
		return got
	},
	list: func(s instore.Store) func(context.Context, string) ([]*instore.SubscriptionKey, error) {
		return s.SubscriptionKeys
	},
	revoke:  func(s instore.Store) func(context.Context, string, time.Time) error { return s.RevokeSubscriptionKey },
	revoked: func(k *instore.SubscriptionKey) **time.Time { return &k.RevokedAt },
	unnamed: func(k *instore.SubscriptionKey) { k.Prefix = "" },
}

// roundTripTest: a credential of each surface, with a merchant and
// without, and a revoked one without a name (a key's prefix) of another
// customer, all stored, then each read back as stored.
func (k credentialKind[C]) roundTripTest(t *testing.T, s instore.Store) {
	credentialFixture(t, s)
	revoked := k.newCred(k.prefix+"revoked", instore.SurfaceAccess, "cus_b", "", at(2))
	k.unnamed(revoked)
	*k.revoked(revoked) = ptr(at(5))
	all := []*C{
		k.newCred(k.prefix+"online", instore.SurfaceOnline, "cus_a", "mer_a", base),
		k.newCred(k.prefix+"access", instore.SurfaceAccess, "cus_a", "", at(1)),
		revoked,
	}
	// Every one stored before any is read: a later insert must change no
	// earlier credential, and a lookup must find its own among several.
	for _, c := range all {
		k.mustCreate(t, s, c)
	}
	for _, c := range all {
		if d := diff(asStored(c), k.read(t, s, c)); d != "" {
			t.Errorf("%s %q read back mismatch (-want +got):\n%s", k.name, k.key(c), d)
		}
	}
}

// listTest: the listing of a customer's credentials (every customer's for
// ""), oldest first, equal times ordered by id.
func (k credentialKind[C]) listTest(t *testing.T, s instore.Store) {
	credentialFixture(t, s)
	a2 := k.mustCreate(t, s, k.newCred(k.prefix+"a2", instore.SurfaceOnline, "cus_a", "mer_a", at(2)))
	b1 := k.mustCreate(t, s, k.newCred(k.prefix+"b1", instore.SurfaceAccess, "cus_b", "", at(1)))
	a3 := k.mustCreate(t, s, k.newCred(k.prefix+"a3", instore.SurfaceAccess, "cus_a", "", at(0)))
	a1 := k.mustCreate(t, s, k.newCred(k.prefix+"a1", instore.SurfaceOnline, "cus_a", "mer_a", at(0)))
	checkLists(t, k.name+"s", k.list(s), asStored[C], []listCase[*C]{
		{"cus_a", []*C{a1, a3, a2}},
		{"cus_b", []*C{b1}},
		{"", []*C{a1, a3, b1, a2}},
		{"cus_none", nil},
	})
}

// revokeTest: a credential revoked twice keeps the first time; another
// credential of the customer stays as it was.
func (k credentialKind[C]) revokeTest(t *testing.T, s instore.Store) {
	credentialFixture(t, s)
	c := k.mustCreate(t, s, k.newCred(k.prefix+"1", instore.SurfaceAccess, "cus_a", "", at(0)))
	other := k.mustCreate(t, s, k.newCred(k.prefix+"2", instore.SurfaceAccess, "cus_a", "", at(0)))
	first, second := at(10), at(20)
	for _, when := range []time.Time{first, second} {
		if err := k.revoke(s)(t.Context(), k.key(c), when); err != nil {
			t.Fatalf("Revoke%s(%v) = %v", k.name, when, err)
		}
		if d := diff(storedPtr(&first), *k.revoked(k.read(t, s, c))); d != "" {
			t.Errorf("RevokedAt after Revoke%s(%v) mismatch, want the first time (-want +got):\n%s", k.name, when, d)
		}
	}
	if got := *k.revoked(k.read(t, s, other)); got != nil {
		t.Errorf("another %s's RevokedAt = %v, want nil: revoke changed another credential", k.name, *got)
	}
}
