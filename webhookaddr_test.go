package instore_test

import (
	"net/netip"
	"testing"

	"github.com/instore-dev/instore"
)

// registryRows are the rows of the IANA IPv4 and IPv6 Special-Purpose
// Address Registries (and the multicast and reserved blocks), written out
// here from the registries rather than from the code's table: the first
// and the last address of each must be refused, except where the
// registry marks the block globally reachable and it stands outside any
// refused block (public).
var registryRows = []struct {
	prefix string
	public bool
}{
	{"0.0.0.0/8", false},
	{"0.0.0.0/32", false},
	{"10.0.0.0/8", false},
	{"100.64.0.0/10", false},
	{"127.0.0.0/8", false},
	{"169.254.0.0/16", false},
	{"172.16.0.0/12", false},
	{"192.0.0.0/24", false},
	{"192.0.0.0/29", false},
	{"192.0.0.8/32", false},
	{"192.0.0.9/32", false},  // PCP anycast: reachable, refused with its /24
	{"192.0.0.10/32", false}, // TURN anycast: likewise
	{"192.0.0.170/32", false},
	{"192.0.0.171/32", false},
	{"192.0.2.0/24", false},
	{"192.31.196.0/24", true}, // AS112-v4
	{"192.52.193.0/24", true}, // AMT
	{"192.88.99.0/24", false},
	{"192.168.0.0/16", false},
	{"192.175.48.0/24", true}, // AS112 direct delegation
	{"198.18.0.0/15", false},
	{"198.51.100.0/24", false},
	{"203.0.113.0/24", false},
	{"224.0.0.0/4", false},
	{"240.0.0.0/4", false},
	{"255.255.255.255/32", false},

	{"::1/128", false},
	{"::/128", false},
	{"::ffff:0:0/96", false}, // its first and last: 0.0.0.0 and 255.255.255.255
	{"64:ff9b::/96", false},  // likewise
	{"64:ff9b:1::/48", false},
	{"100::/64", false},
	{"100:0:0:1::/64", false},
	{"2001::/23", false},
	{"2001::/32", false},
	{"2001:1::1/128", false}, // PCP anycast: refused with 2001::/23
	{"2001:1::2/128", false},
	{"2001:1::3/128", false},
	{"2001:2::/48", false},
	{"2001:3::/32", false},
	{"2001:4:112::/48", false},
	{"2001:10::/28", false},
	{"2001:20::/28", false},
	{"2001:30::/28", false},
	{"2001:db8::/32", false},
	{"2002::/16", false},
	{"2620:4f:8000::/48", true}, // AS112 direct delegation
	{"3fff::/20", false},
	{"5f00::/16", false},
	{"fc00::/7", false},
	{"fe80::/10", false},
	{"ff00::/8", false},
}

// lastAddr is the last address of p.
func lastAddr(p netip.Prefix) netip.Addr {
	b := p.Masked().Addr().AsSlice()
	for i := p.Bits(); i < len(b)*8; i++ {
		b[i/8] |= 0x80 >> (i % 8)
	}
	a, _ := netip.AddrFromSlice(b)
	return a
}

func TestWebhookAddrRegistries(t *testing.T) {
	for _, r := range registryRows {
		p := netip.MustParsePrefix(r.prefix)
		for _, a := range []netip.Addr{p.Addr(), lastAddr(p)} {
			err := instore.CheckWebhookAddr(a)
			if r.public && err != nil {
				t.Errorf("%s (in %s, globally reachable): refused: %v", a, r.prefix, err)
			}
			if !r.public && err == nil {
				t.Errorf("%s (in %s): allowed, want refused", a, r.prefix)
			}
		}
	}
}

// TestWebhookAddrForms: the forms the review reached, every IPv4 form
// embedded in IPv6, and public neighbours of the refused blocks.
func TestWebhookAddrForms(t *testing.T) {
	refused := []string{
		// From the review.
		"192.0.2.2", "0.1.2.3", "::7f00:1", "64:ff9b::7f00:1", "2002:7f00:1::",
		// Loopback, private and metadata in every embedding.
		"127.0.0.1", "::ffff:127.0.0.1", "::ffff:7f00:1", "::127.0.0.1", "64:ff9b::127.0.0.1",
		"64:ff9b::10.0.0.1", "64:ff9b::169.254.169.254", "::ffff:169.254.169.254", "::ffff:192.0.2.1",
		"64:ff9b:1::7f00:1", "64:ff9b:1::808:808", // local-use NAT64: refused outright
		"2002:808:808::1",                      // 6to4 of a public address: refused outright
		"2001:0:4136:e378:8000:63bf:3fff:fdd2", // Teredo: refused outright
		"::8.8.8.8",                            // IPv4-compatible, deprecated: refused outright
		"::", "::1", "0.0.0.0", "255.255.255.255", "224.0.0.1", "239.255.255.250", "fe80::1%eth0",
		"fd00::1", "fec0::1", "ff02::1", "100.64.0.1", "198.18.0.1", "3fff::1", "2001:db8::1",
		"4000::1", "::ffff:0:808:808", // outside 2000::/3 (IPv4-translated, RFC 2765)
	}
	allowed := []string{
		"8.8.8.8", "1.1.1.1", "9.255.255.255", "11.0.0.0", "100.63.255.255", "100.128.0.0", "126.255.255.255",
		"128.0.0.0", "169.253.255.255", "172.15.255.255", "172.32.0.0", "192.0.1.255", "192.0.3.0",
		"192.167.255.255", "192.169.0.0", "198.17.255.255", "198.20.0.0", "223.255.255.255",
		"::ffff:8.8.8.8", "64:ff9b::8.8.8.8", "64:ff9b::808:808",
		"2606:4700:4700::1111", "2a00:1450:4001:81b::200e", "2001:200::1", "3ffe::1", "2620:4f:8000::1",
	}
	for _, s := range refused {
		if err := instore.CheckWebhookAddr(netip.MustParseAddr(s)); err == nil {
			t.Errorf("%s: allowed, want refused", s)
		}
	}
	for _, s := range allowed {
		if err := instore.CheckWebhookAddr(netip.MustParseAddr(s)); err != nil {
			t.Errorf("%s: refused: %v", s, err)
		}
	}
	if instore.CheckWebhookAddr(netip.Addr{}) == nil {
		t.Error("the zero Addr is allowed")
	}
}
