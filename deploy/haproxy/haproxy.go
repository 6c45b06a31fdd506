// Package haproxy holds the HAProxy configuration in front of several
// instore nodes (instore.cfg), embedded for `instore loadtest cluster`,
// which runs it as it is.
package haproxy

import _ "embed"

// Config is instore.cfg.
//
//go:embed instore.cfg
var Config []byte
