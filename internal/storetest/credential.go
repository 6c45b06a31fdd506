package storetest

import (
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

func mustCreateAPIClient(t *testing.T, s instore.Store, c *instore.APIClient) *instore.APIClient {
	t.Helper()
	return mustCreateWith(t, "CreateAPIClient", s.CreateAPIClient, c, c.ID)
}

var apiClientTests = []test{
	{"RoundTrip", func(t *testing.T, s instore.Store) {
		credentialFixture(t, s)
		revoked := at(5)
		for _, c := range []*instore.APIClient{
			newAPIClient("cli_online", instore.SurfaceOnline, "cus_a", "mer_a", base),
			newAPIClient("cli_access", instore.SurfaceAccess, "cus_a", "", at(1)),
			{ID: "cli_revoked", Surface: instore.SurfaceAccess, CustomerID: "cus_b", Name: "",
				SecretHash: hash("s"), CreatedAt: at(2), RevokedAt: &revoked},
		} {
			if err := s.CreateAPIClient(t.Context(), c); err != nil {
				t.Fatalf("CreateAPIClient(%q) = %v", c.ID, err)
			}
			got, err := s.APIClient(t.Context(), c.ID)
			if err != nil {
				t.Fatalf("APIClient(%q) = %v", c.ID, err)
			}
			if d := diff(asStored(c), got); d != "" {
				t.Errorf("APIClient(%q) mismatch (-want +got):\n%s", c.ID, d)
			}
		}
	}},
	{"NotFound", func(t *testing.T, s instore.Store) {
		_, err := s.APIClient(t.Context(), "cli_missing_93d1")
		checkNotFound(t, "APIClient(missing)", err, "cli_missing_93d1")
	}},
	{"Conflict", func(t *testing.T, s instore.Store) {
		credentialFixture(t, s)
		mustCreateAPIClient(t, s, newAPIClient("cli_1", instore.SurfaceAccess, "cus_a", "", at(0)))
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
	{"List", func(t *testing.T, s instore.Store) {
		credentialFixture(t, s)
		a2 := mustCreateAPIClient(t, s, newAPIClient("cli_a2", instore.SurfaceOnline, "cus_a", "mer_a", at(2)))
		b1 := mustCreateAPIClient(t, s, newAPIClient("cli_b1", instore.SurfaceAccess, "cus_b", "", at(1)))
		a3 := mustCreateAPIClient(t, s, newAPIClient("cli_a3", instore.SurfaceAccess, "cus_a", "", at(0)))
		a1 := mustCreateAPIClient(t, s, newAPIClient("cli_a1", instore.SurfaceOnline, "cus_a", "mer_a", at(0)))
		checkLists(t, "APIClients", s.APIClients, asStored[instore.APIClient], []listCase[*instore.APIClient]{
			{"cus_a", []*instore.APIClient{a1, a3, a2}},
			{"cus_b", []*instore.APIClient{b1}},
			{"", []*instore.APIClient{a1, a3, b1, a2}},
			{"cus_none", nil},
		})
	}},
	{"Revoke", func(t *testing.T, s instore.Store) {
		credentialFixture(t, s)
		c := mustCreateAPIClient(t, s, newAPIClient("cli_1", instore.SurfaceAccess, "cus_a", "", at(0)))
		other := mustCreateAPIClient(t, s, newAPIClient("cli_2", instore.SurfaceAccess, "cus_a", "", at(0)))
		first, second := at(10), at(20)
		for _, when := range []time.Time{first, second} {
			if err := s.RevokeAPIClient(t.Context(), c.ID, when); err != nil {
				t.Fatalf("RevokeAPIClient(%v) = %v", when, err)
			}
			got, err := s.APIClient(t.Context(), c.ID)
			if err != nil {
				t.Fatalf("APIClient() = %v", err)
			}
			if d := diff(storedPtr(&first), got.RevokedAt); d != "" {
				t.Errorf("RevokedAt after RevokeAPIClient(%v) mismatch, want the first time (-want +got):\n%s", when, d)
			}
		}
		got, err := s.APIClient(t.Context(), other.ID)
		if err != nil {
			t.Fatalf("APIClient(other) = %v", err)
		}
		if got.RevokedAt != nil {
			t.Errorf("APIClient(other).RevokedAt = %v, want nil: revoke changed another client", *got.RevokedAt)
		}
	}},
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

func mustCreateSubscriptionKey(t *testing.T, s instore.Store, k *instore.SubscriptionKey) *instore.SubscriptionKey {
	t.Helper()
	return mustCreateWith(t, "CreateSubscriptionKey", s.CreateSubscriptionKey, k, k.ID)
}

var subscriptionKeyTests = []test{
	{"RoundTrip", func(t *testing.T, s instore.Store) {
		credentialFixture(t, s)
		revoked := at(5)
		keys := []*instore.SubscriptionKey{
			newSubscriptionKey("key_online", instore.SurfaceOnline, "cus_a", "mer_a", base),
			newSubscriptionKey("key_access", instore.SurfaceAccess, "cus_a", "", at(1)),
			{ID: "key_revoked", Surface: instore.SurfaceAccess, CustomerID: "cus_b", Prefix: "",
				Hash: hash("revoked"), CreatedAt: at(2), RevokedAt: &revoked},
		}
		for _, k := range keys {
			mustCreateSubscriptionKey(t, s, k)
		}
		for _, k := range keys {
			got, err := s.SubscriptionKeyByHash(t.Context(), k.Hash)
			if err != nil {
				t.Fatalf("SubscriptionKeyByHash(%q's hash) = %v", k.ID, err)
			}
			if d := diff(asStored(k), got); d != "" {
				t.Errorf("SubscriptionKeyByHash(%q's hash) mismatch (-want +got):\n%s", k.ID, d)
			}
		}
	}},
	{"NotFound", func(t *testing.T, s instore.Store) {
		credentialFixture(t, s)
		k := mustCreateSubscriptionKey(t, s, newSubscriptionKey("key_1", instore.SurfaceAccess, "cus_a", "", at(0)))
		// A prefix of a stored hash is not the hash.
		for _, h := range [][]byte{hash("unknown"), k.Hash[:16]} {
			_, err := s.SubscriptionKeyByHash(t.Context(), h)
			checkNotFound(t, "SubscriptionKeyByHash(unknown)", err, "")
		}
	}},
	{"Conflict", func(t *testing.T, s instore.Store) {
		credentialFixture(t, s)
		k := mustCreateSubscriptionKey(t, s, newSubscriptionKey("key_1", instore.SurfaceAccess, "cus_a", "", at(0)))
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
		got, err := s.SubscriptionKeyByHash(t.Context(), k.Hash)
		if err != nil {
			t.Fatalf("SubscriptionKeyByHash() = %v", err)
		}
		if got.ID != k.ID {
			t.Errorf("SubscriptionKeyByHash().ID = %q after refused duplicates, want %q", got.ID, k.ID)
		}
	}},
	{"List", func(t *testing.T, s instore.Store) {
		credentialFixture(t, s)
		a2 := mustCreateSubscriptionKey(t, s, newSubscriptionKey("key_a2", instore.SurfaceOnline, "cus_a", "mer_a", at(2)))
		b1 := mustCreateSubscriptionKey(t, s, newSubscriptionKey("key_b1", instore.SurfaceAccess, "cus_b", "", at(1)))
		a3 := mustCreateSubscriptionKey(t, s, newSubscriptionKey("key_a3", instore.SurfaceAccess, "cus_a", "", at(0)))
		a1 := mustCreateSubscriptionKey(t, s, newSubscriptionKey("key_a1", instore.SurfaceOnline, "cus_a", "mer_a", at(0)))
		checkLists(t, "SubscriptionKeys", s.SubscriptionKeys, asStored[instore.SubscriptionKey], []listCase[*instore.SubscriptionKey]{
			{"cus_a", []*instore.SubscriptionKey{a1, a3, a2}},
			{"cus_b", []*instore.SubscriptionKey{b1}},
			{"", []*instore.SubscriptionKey{a1, a3, b1, a2}},
			{"cus_none", nil},
		})
	}},
	{"Revoke", func(t *testing.T, s instore.Store) {
		credentialFixture(t, s)
		k := mustCreateSubscriptionKey(t, s, newSubscriptionKey("key_1", instore.SurfaceAccess, "cus_a", "", at(0)))
		other := mustCreateSubscriptionKey(t, s, newSubscriptionKey("key_2", instore.SurfaceAccess, "cus_a", "", at(0)))
		first, second := at(10), at(20)
		for _, when := range []time.Time{first, second} {
			if err := s.RevokeSubscriptionKey(t.Context(), k.ID, when); err != nil {
				t.Fatalf("RevokeSubscriptionKey(%v) = %v", when, err)
			}
			got, err := s.SubscriptionKeyByHash(t.Context(), k.Hash)
			if err != nil {
				t.Fatalf("SubscriptionKeyByHash() = %v", err)
			}
			if d := diff(storedPtr(&first), got.RevokedAt); d != "" {
				t.Errorf("RevokedAt after RevokeSubscriptionKey(%v) mismatch, want the first time (-want +got):\n%s", when, d)
			}
		}
		got, err := s.SubscriptionKeyByHash(t.Context(), other.Hash)
		if err != nil {
			t.Fatalf("SubscriptionKeyByHash(other) = %v", err)
		}
		if got.RevokedAt != nil {
			t.Errorf("other key RevokedAt = %v, want nil: revoke changed another key", *got.RevokedAt)
		}
	}},
	{"RevokeNotFound", func(t *testing.T, s instore.Store) {
		err := s.RevokeSubscriptionKey(t.Context(), "key_missing_c0fe", at(0))
		checkNotFound(t, "RevokeSubscriptionKey(missing)", err, "key_missing_c0fe")
	}},
}
