// Package api holds the machine-readable API documents of the service, embedded
// so that the server can serve them and tests can validate responses against
// them. Each document is exposed as a byte slice named after its API
// (OnlineYAML, AccessYAML).
package api

import _ "embed"

// OnlineYAML is the OpenAPI 3.1 document of the Online API
// (/in-store/api/v1 and /oauth2/token), as YAML. It is the machine-readable
// form of the Online API contract; the server serves it at
// /in-store/api/v1/openapi.yaml. Callers must not modify it.
//
//go:embed online-api.yaml
var OnlineYAML []byte

// AccessYAML is the OpenAPI 3.1 document of Access API 2.0 (its own base
// URL: /getTerminalId, /getTerminalInfo, /terminal/getPackages,
// /terminal/createUpdate and /oauth2/token), as YAML. The server serves it
// at {access_base_url}/openapi.yaml. Callers must not modify it.
//
//go:embed access-api.yaml
var AccessYAML []byte
