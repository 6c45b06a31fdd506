package storetest

import (
	"testing"

	"github.com/instore-dev/instore"
)

var customerTests = []test{
	{"RoundTrip", func(t *testing.T, s instore.Store) {
		c := &instore.Customer{ID: "cus_8f3a", Name: "Acme Retail", CreatedAt: base}
		if err := s.CreateCustomer(t.Context(), c); err != nil {
			t.Fatalf("CreateCustomer() = %v", err)
		}
		got, err := s.Customer(t.Context(), c.ID)
		if err != nil {
			t.Fatalf("Customer() = %v", err)
		}
		want := &instore.Customer{ID: "cus_8f3a", Name: "Acme Retail", CreatedAt: stored(base)}
		if d := diff(want, got); d != "" {
			t.Errorf("Customer() mismatch (-want +got):\n%s", d)
		}
	}},
	{"NotFound", func(t *testing.T, s instore.Store) {
		checkMissing(t, "Customer(missing)", s.Customer, "cus_missing_71c4", "cus_missing_71c4")
	}},
	{"DuplicateID", func(t *testing.T, s instore.Store) {
		mustCreateCustomer(t, s, "cus_1", at(0))
		err := s.CreateCustomer(t.Context(), &instore.Customer{ID: "cus_1", Name: "Other", CreatedAt: at(1)})
		checkConflict(t, "CreateCustomer(duplicate id)", err)
		got, err := s.Customer(t.Context(), "cus_1")
		if err != nil {
			t.Fatalf("Customer() = %v", err)
		}
		if got.Name != "Customer cus_1" {
			t.Errorf("Customer().Name = %q after a refused duplicate, want %q", got.Name, "Customer cus_1")
		}
	}},
	{"List", func(t *testing.T, s instore.Store) {
		checkAll(t, "Customers", s.Customers)
		// Created out of order; equal times are ordered by id.
		c2 := mustCreateCustomer(t, s, "cus_2", at(1))
		c3 := mustCreateCustomer(t, s, "cus_3", at(0))
		c1 := mustCreateCustomer(t, s, "cus_1", at(0))
		checkAll(t, "Customers", s.Customers, c1, c3, c2)
	}},
}

var merchantTests = []test{
	{"RoundTrip", func(t *testing.T, s instore.Store) {
		mustCreateCustomer(t, s, "cus_1", at(0))
		for _, m := range []*instore.Merchant{
			{ID: "mer_active", CustomerID: "cus_1", Name: "Shop One", Active: true, CreatedAt: base},
			{ID: "mer_inactive", CustomerID: "cus_1", Name: "Shop Two", Active: false, CreatedAt: at(1)},
		} {
			checkRoundTrip(t, "Merchant", s.CreateMerchant, s.Merchant, m, m.ID)
		}
	}},
	{"NotFound", func(t *testing.T, s instore.Store) {
		checkMissing(t, "Merchant(missing)", s.Merchant, "mer_missing_0d9e", "mer_missing_0d9e")
	}},
	{"DuplicateID", func(t *testing.T, s instore.Store) {
		mustCreateCustomer(t, s, "cus_1", at(0))
		mustCreateMerchant(t, s, "mer_1", "cus_1", at(0))
		err := s.CreateMerchant(t.Context(), &instore.Merchant{ID: "mer_1", CustomerID: "cus_1", Name: "Other", CreatedAt: at(1)})
		checkConflict(t, "CreateMerchant(duplicate id)", err)
	}},
	{"MissingCustomer", func(t *testing.T, s instore.Store) {
		err := s.CreateMerchant(t.Context(), &instore.Merchant{ID: "mer_1", CustomerID: "cus_missing", Name: "Orphan", CreatedAt: at(0)})
		checkConflict(t, "CreateMerchant(missing customer)", err)
		checkMissing(t, "Merchant(refused)", s.Merchant, "mer_1", "")
	}},
	{"List", func(t *testing.T, s instore.Store) {
		mustCreateCustomer(t, s, "cus_a", at(0))
		mustCreateCustomer(t, s, "cus_b", at(0))
		a2 := mustCreateMerchant(t, s, "mer_a2", "cus_a", at(2))
		b1 := mustCreateMerchant(t, s, "mer_b1", "cus_b", at(1))
		a3 := mustCreateMerchant(t, s, "mer_a3", "cus_a", at(0))
		a1 := mustCreateMerchant(t, s, "mer_a1", "cus_a", at(0))
		checkLists(t, "Merchants", s.Merchants, asStored[instore.Merchant], []listCase[*instore.Merchant]{
			{"cus_a", []*instore.Merchant{a1, a3, a2}},
			{"cus_b", []*instore.Merchant{b1}},
			{"", []*instore.Merchant{a1, a3, b1, a2}},
			{"cus_none", nil},
		})
	}},
	{"SetActive", func(t *testing.T, s instore.Store) {
		mustCreateCustomer(t, s, "cus_1", at(0))
		mustCreateMerchant(t, s, "mer_1", "cus_1", at(0))
		mustCreateMerchant(t, s, "mer_2", "cus_1", at(0))
		// Setting the current value again is not an error.
		for _, active := range []bool{false, false, true, true, false} {
			if err := s.SetMerchantActive(t.Context(), "mer_1", active); err != nil {
				t.Fatalf("SetMerchantActive(%v) = %v", active, err)
			}
			got, err := s.Merchant(t.Context(), "mer_1")
			if err != nil {
				t.Fatalf("Merchant() = %v", err)
			}
			if got.Active != active {
				t.Errorf("Merchant().Active = %v after SetMerchantActive(%v), want %v", got.Active, active, active)
			}
		}
		other, err := s.Merchant(t.Context(), "mer_2")
		if err != nil {
			t.Fatalf("Merchant(other) = %v", err)
		}
		if !other.Active {
			t.Errorf("Merchant(other).Active = false, want true: SetMerchantActive changed another merchant")
		}
	}},
	{"SetActiveNotFound", func(t *testing.T, s instore.Store) {
		err := s.SetMerchantActive(t.Context(), "mer_missing_4a7b", false)
		checkNotFound(t, "SetMerchantActive(missing)", err, "mer_missing_4a7b")
	}},
}
