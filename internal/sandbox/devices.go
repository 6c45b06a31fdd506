package sandbox

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"

	"github.com/instore-dev/instore"
	"github.com/instore-dev/instore/internal/admin"
)

// Device is a virtual device of sandbox mode with its secret. The
// sandbox keeps these secrets in the store in clear (settings
// "sandbox_devices") so that it can run the devices after a restart; a
// production service has no virtual devices and never does this.
type Device struct {
	SerialNumber    string `json:"serialNumber"`
	Model           string `json:"model"`
	SoftwareVersion string `json:"softwareVersion"`
	Secret          string `json:"secret"`
}

const devicesSetting = "sandbox_devices"

// serials are the virtual devices' serial numbers, one per model in
// the demo's order: countertop, mobile, PIN pad.
var serials = map[string]string{
	instore.ModelCountertop: "VT-COUNTERTOP-01",
	instore.ModelMobile:     "VT-MOBILE-01",
	instore.ModelPINPad:     "VT-PINPAD-01",
}

// EnsureDevices provisions the virtual devices at the first start
// in sandbox mode and returns them.
func EnsureDevices(ctx context.Context, st instore.Store) ([]Device, error) {
	v, err := st.Setting(ctx, devicesSetting)
	if err == nil {
		var ds []Device
		if err := json.Unmarshal([]byte(v), &ds); err != nil {
			return nil, fmt.Errorf("setting %s is damaged: %w", devicesSetting, err)
		}
		return ds, nil
	} else if !errors.Is(err, instore.ErrNotFound) {
		return nil, err
	}
	ad := admin.New(st)
	var ds []Device
	for _, model := range instore.Models {
		d, secret, err := ad.CreateDevice(ctx, serials[model], model, "")
		if err != nil {
			return nil, err
		}
		ds = append(ds, Device{SerialNumber: d.SerialNumber, Model: model, SoftwareVersion: "1.0.0", Secret: secret})
	}
	b, _ := json.Marshal(ds)
	stored, err := st.InitSetting(ctx, devicesSetting, string(b))
	if err != nil {
		return nil, err
	}
	var out []Device
	if err := json.Unmarshal([]byte(stored), &out); err != nil {
		return nil, err
	}
	return out, nil
}
