package service

import (
	"context"

	"github.com/instore-dev/instore"
	"github.com/instore-dev/instore/lifecycle"
)

// TerminalForwarded applies a terminal's report on forwarding an offline
// approval (protocol message forwarded): the transaction's forwarding
// moves by the lifecycle (lifecycle.NextForwarding) in one commit with its
// timeline entry FORWARDED or FORWARD_DECLINED and its event
// transaction.forwarded or transaction.forward_declined. The terminal
// resends the report until the gateway confirms it, which it does once
// this returns nil: a report applied before, or one on a transaction this
// device does not have or that was not approved offline, changes nothing
// and returns nil (logged), so that it never blocks the terminal; only a
// failure to store it returns an error (no confirm: the terminal resends).
func (s *Service) TerminalForwarded(ctx context.Context, serial string, r instore.ForwardReport) error {
	if t, err := s.reportedOn(ctx, serial, r.Ref, "forwarding report for an unknown transaction; confirmed and ignored"); t == nil {
		return err
	}
	// From the store, not the state this node last knew (known nil): a
	// stale copy without the forwarding (the result applied on another
	// node) would make the report change nothing, and it would be lost.
	t, st, err := s.apply(ctx, r.Ref, nil, lifecycle.Event{Kind: instore.EventForwarded, At: s.now(), Forward: &r})
	if err != nil {
		return err
	}
	switch {
	case st.Changed && st.Event.Kind == instore.EventForwardDeclined:
		s.log().Warn("offline approval declined by the issuer when forwarded: the merchant was not paid", "ref", t.ID)
		if o, ok := s.Observer.(instore.ForwardObserver); ok {
			o.ForwardDeclined(t)
		}
	case st.Changed:
		s.log().Info("offline approval forwarded", "ref", t.ID)
	case t.Forwarding == nil:
		s.log().Warn("forwarding report on a transaction not approved offline; confirmed and ignored", "ref", t.ID)
	case t.Forwarding.State != forwardState(r):
		s.log().Warn("forwarding report contradicts the one applied; the first stands", "ref", t.ID,
			"applied", t.Forwarding.State, "reported", forwardState(r))
	}
	return nil
}

// forwardState is the forwarding state r reports.
func forwardState(r instore.ForwardReport) instore.ForwardingState {
	if r.Declined {
		return instore.ForwardDeclined
	}
	return instore.ForwardForwarded
}
