package instore

import (
	"fmt"
	"net/netip"
)

// The addresses a webhook may reach (docs/events.md, Targets): globally
// routable unicast only, an allow-list rather than a deny-list. An IPv4
// address is allowed unless it is in a block of specialBlocks or is
// multicast; an IPv6 address only inside 2000::/3 (the one block the IANA
// "IPv6 Address Space" registry allocates as Global Unicast) and outside
// every block of specialBlocks. The IPv4 forms embedded in IPv6 are
// decided by their own rows: the IPv4-mapped form and the well-known NAT64
// prefix are unwrapped and their IPv4 address checked (a name resolved by
// DNS64 on an IPv6-only host reaches a public IPv4 receiver through
// 64:ff9b::/96), every other form is refused outright (the deprecated
// IPv4-compatible ::/96, the local-use NAT64 64:ff9b:1::/48 whose
// embedding depends on the operator's prefix length, 6to4 2002::/16 and
// Teredo 2001::/32, tunnels through relays that no receiver needs).

// addrBlock is one row of the tables: a block, its registry name, and
// whether a webhook may reach it.
type addrBlock struct {
	prefix netip.Prefix
	name   string
	// unwrap: the block embeds an IPv4 address in its low 32 bits, which
	// is checked instead.
	unwrap bool
}

func block(p, name string) addrBlock { return addrBlock{prefix: netip.MustParsePrefix(p), name: name} }

// specialBlocks are the blocks refused: every row of the IANA "IPv4
// Special-Purpose Address Registry" and "IPv6 Special-Purpose Address
// Registry" (RFC 6890 and its updates, as of 2025) whose "Globally
// Reachable" is False or N/A, with the IPv4 multicast block (IANA "IPv4
// Multicast Address Space Registry", not unicast). Where the registry
// marks a piece of a refused block reachable (the PCP, TURN and DNS-SD
// anycast addresses, AMT, AS112-v6, ORCHIDv2 and Drone DET inside
// 192.0.0.0/24 and 2001::/23), the whole block is refused on purpose: no
// webhook receiver lives there. The IPv6 rows outside 2000::/3 are refused
// by that rule already and listed so that the table is the registry's;
// the two unwrap rows come first.
var specialBlocks = []addrBlock{
	{netip.MustParsePrefix("::ffff:0:0/96"), "IPv4-mapped Address (RFC 4291)", true},
	{netip.MustParsePrefix("64:ff9b::/96"), "IPv4-IPv6 Translation (RFC 6052)", true},

	block("0.0.0.0/8", `"This network" (RFC 791)`),
	block("10.0.0.0/8", "Private-Use (RFC 1918)"),
	block("100.64.0.0/10", "Shared Address Space (RFC 6598)"),
	block("127.0.0.0/8", "Loopback (RFC 1122)"),
	block("169.254.0.0/16", "Link Local (RFC 3927)"),
	block("172.16.0.0/12", "Private-Use (RFC 1918)"),
	block("192.0.0.0/24", "IETF Protocol Assignments (RFC 6890)"),
	block("192.0.2.0/24", "Documentation (TEST-NET-1, RFC 5737)"),
	block("192.88.99.0/24", "Deprecated 6to4 Relay Anycast (RFC 7526)"),
	block("192.168.0.0/16", "Private-Use (RFC 1918)"),
	block("198.18.0.0/15", "Benchmarking (RFC 2544)"),
	block("198.51.100.0/24", "Documentation (TEST-NET-2, RFC 5737)"),
	block("203.0.113.0/24", "Documentation (TEST-NET-3, RFC 5737)"),
	block("224.0.0.0/4", "Multicast (RFC 5771)"),
	block("240.0.0.0/4", "Reserved (RFC 1112)"),
	block("255.255.255.255/32", `Limited Broadcast (RFC 919)`),

	block("::/96", "IPv4-compatible Address, deprecated (RFC 4291)"), // holds ::/128 and ::1/128
	block("::1/128", "Loopback Address (RFC 4291)"),
	block("::/128", "Unspecified Address (RFC 4291)"),
	block("64:ff9b:1::/48", "IPv4-IPv6 Translation, local use (RFC 8215)"),
	block("100::/64", "Discard-Only Address Block (RFC 6666)"),
	block("100:0:0:1::/64", "Dummy IPv6 Prefix (RFC 9780)"),
	block("2001::/23", "IETF Protocol Assignments (RFC 2928)"),
	block("2001::/32", "TEREDO (RFC 4380)"),
	block("2001:2::/48", "Benchmarking (RFC 5180)"),
	block("2001:10::/28", "Deprecated ORCHID (RFC 4843)"),
	block("2001:db8::/32", "Documentation (RFC 3849)"),
	block("2002::/16", "6to4 (RFC 3056)"),
	block("3fff::/20", "Documentation (RFC 9637)"),
	block("5f00::/16", "Segment Routing SIDs (RFC 9602)"),
	block("fc00::/7", "Unique-Local (RFC 4193)"),
	block("fe80::/10", "Link-Local Unicast (RFC 4291)"),
	block("fec0::/10", "Site-Local, deprecated (RFC 3879)"),
	block("ff00::/8", "Multicast (RFC 4291)"),
}

// globalUnicast6 is the IPv6 global unicast space (IANA "IPv6 Address
// Space" registry; RFC 4291).
var globalUnicast6 = netip.MustParsePrefix("2000::/3")

// CheckWebhookAddr returns why a webhook may not reach a (nil: it may).
func CheckWebhookAddr(a netip.Addr) error {
	if !a.IsValid() {
		return fmt.Errorf("not an IP address")
	}
	a = a.WithZone("")
	for _, b := range specialBlocks {
		if !b.prefix.Contains(a) {
			continue
		}
		if b.unwrap {
			raw := a.As16()
			v4 := netip.AddrFrom4([4]byte(raw[12:]))
			if err := CheckWebhookAddr(v4); err != nil {
				return fmt.Errorf("%s holding %s: %w", b.name, v4, err)
			}
			return nil
		}
		return fmt.Errorf("%s is in %s, %s: not a public address", a, b.prefix, b.name)
	}
	if a.Is6() && !globalUnicast6.Contains(a) {
		return fmt.Errorf("%s is outside 2000::/3, the IPv6 global unicast space: not a public address", a)
	}
	return nil
}
