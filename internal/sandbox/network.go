package sandbox

import (
	"fmt"
	"net/http"

	"github.com/instore-dev/instore"
	"github.com/instore-dev/instore/internal/httpapi"
	"github.com/instore-dev/instore/internal/sim"
)

// The card network of a virtual terminal (store and forward, sim's
// offline.go): POST .../card-network takes it down, with a floor limit
// and an offline queue, or brings it back (which forwards the queue);
// POST .../next-forward makes the next forwarded approval declined by the
// issuer. Both answer the device with its cardNetwork.

// Defaults of POST .../card-network {"online": false}.
const (
	DefaultFloorLimit = 5000
	DefaultQueueSize  = 10
)

// cardNetworkBody is the body of POST .../card-network.
type cardNetworkBody struct {
	Online     *bool  `json:"online"`
	FloorLimit *int64 `json:"floorLimit"`
	QueueSize  *int   `json:"queueSize"`
}

// check lists what is wrong with a card-network body and fills in the
// floor limit's and the queue's defaults.
func (b *cardNetworkBody) check() []instore.FieldError {
	var bad []instore.FieldError
	online := b.Online != nil && *b.Online
	switch {
	case b.Online == nil:
		bad = append(bad, instore.FieldError{Field: "/online", Message: "is required: false takes the card network down, true brings it back"})
	case online && b.FloorLimit != nil:
		bad = append(bad, instore.FieldError{Field: "/floorLimit", Message: "only with online false"})
	case online && b.QueueSize != nil:
		bad = append(bad, instore.FieldError{Field: "/queueSize", Message: "only with online false"})
	}
	if b.FloorLimit == nil {
		b.FloorLimit = new(int64(DefaultFloorLimit))
	} else if floor := *b.FloorLimit; floor < 0 || floor > instore.MaxAmount {
		bad = append(bad, instore.FieldError{Field: "/floorLimit", Message: fmt.Sprintf("must be from 0 to %d (minor units)", instore.MaxAmount)})
	}
	if b.QueueSize == nil {
		b.QueueSize = new(int(DefaultQueueSize))
	} else if size := *b.QueueSize; size < 1 || size > sim.MaxOfflineQueue {
		bad = append(bad, instore.FieldError{Field: "/queueSize", Message: fmt.Sprintf("must be from 1 to %d", sim.MaxOfflineQueue)})
	}
	return bad
}

// apply takes a virtual terminal's card network down or back up.
func (b *cardNetworkBody) apply(w http.ResponseWriter, s *sandbox, vt *sim.Terminal) error {
	if err := vt.SetCardNetwork(*b.Online, *b.FloorLimit, *b.QueueSize); err != nil {
		return httpapi.Validation(instore.FieldError{Field: "/online", Message: err.Error()})
	}
	return s.state(w, vt)
}

// nextForwardBody is the body of POST .../next-forward.
type nextForwardBody struct {
	Declined *bool `json:"declined"`
}

// check lists what is wrong with a next-forward body.
func (b *nextForwardBody) check() []instore.FieldError {
	if b.Declined == nil {
		return []instore.FieldError{{Field: "/declined", Message: "is required: true declines the next forwarded approval, false accepts it"}}
	}
	return nil
}

// apply sets whether the next approval the virtual terminal forwards is
// declined by the issuer.
func (b *nextForwardBody) apply(w http.ResponseWriter, s *sandbox, vt *sim.Terminal) error {
	vt.SetNextForward(*b.Declined)
	return s.state(w, vt)
}

// cardNetworkOf is st's card network as the sandbox shows it
// (DeviceJSON.CardNetwork): the virtual terminal's own, up before the
// terminal ever reported one.
func cardNetworkOf(st sim.State) sim.CardNetwork {
	if st.CardNetwork == nil {
		return sim.CardNetwork{Online: true, Queued: []string{}, Unconfirmed: []string{}}
	}
	return *st.CardNetwork
}

// networkAction is a console action on a virtual terminal's card network:
// down (with the default floor limit and queue size), up (the queue
// forwarded), or the next forward declined.
func networkAction(t *sim.Terminal, action string) {
	switch action {
	case "card-network-down":
		_ = t.SetCardNetwork(false, DefaultFloorLimit, DefaultQueueSize) // the defaults are valid
	case "card-network-up":
		_ = t.SetCardNetwork(true, 0, 0)
	case "next-forward-declined":
		t.SetNextForward(true)
	}
}
