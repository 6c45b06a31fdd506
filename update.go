package instore

import ()

// MaxUpdateReasonLen bounds the reason a terminal gives for a FAILED
// update, in characters (free text: ValidText).
const MaxUpdateReasonLen = 200

// CatalogueSetting names the setting the store changes with every import
// that adds packages, so that nodes notice a new catalogue.
const CatalogueSetting = "package_catalogue"

// UpdateReport is what a device reports about an update: DOWNLOADING,
// INSTALLED with the version it now runs, or FAILED with a reason.
type UpdateReport struct {
	Status          UpdateStatus
	SoftwareVersion string
	Reason          string
}
