package server

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"

	"github.com/instore-dev/instore"
	"github.com/instore-dev/instore/internal/admin"
)

// SandboxDevice is a virtual device of sandbox mode with its secret. The
// sandbox keeps these secrets in the store in clear (settings
// "sandbox_devices") so that it can run the devices after a restart; a
// production service has no virtual devices and never does this.
type SandboxDevice struct {
	SerialNumber    string `json:"serialNumber"`
	Model           string `json:"model"`
	SoftwareVersion string `json:"softwareVersion"`
	Secret          string `json:"secret"`
}

const sandboxDevicesSetting = "sandbox_devices"

// sandboxSerials are the virtual devices' serial numbers, one per model in
// the demo's order: countertop, mobile, PIN pad.
var sandboxSerials = map[string]string{
	instore.ModelCountertop: "VT-COUNTERTOP-01",
	instore.ModelMobile:     "VT-MOBILE-01",
	instore.ModelPINPad:     "VT-PINPAD-01",
}

// ensureSandboxDevices provisions the virtual devices at the first start
// in sandbox mode and returns them.
func ensureSandboxDevices(ctx context.Context, st instore.Store) ([]SandboxDevice, error) {
	v, err := st.Setting(ctx, sandboxDevicesSetting)
	if err == nil {
		var ds []SandboxDevice
		if err := json.Unmarshal([]byte(v), &ds); err != nil {
			return nil, fmt.Errorf("setting %s is damaged: %w", sandboxDevicesSetting, err)
		}
		return ds, nil
	} else if !errors.Is(err, instore.ErrNotFound) {
		return nil, err
	}
	ad := admin.New(st)
	var ds []SandboxDevice
	for _, model := range instore.Models {
		d, secret, err := ad.CreateDevice(ctx, sandboxSerials[model], model, "")
		if err != nil {
			return nil, err
		}
		ds = append(ds, SandboxDevice{SerialNumber: d.SerialNumber, Model: model, SoftwareVersion: "1.0.0", Secret: secret})
	}
	b, _ := json.Marshal(ds)
	stored, err := st.InitSetting(ctx, sandboxDevicesSetting, string(b))
	if err != nil {
		return nil, err
	}
	var out []SandboxDevice
	if err := json.Unmarshal([]byte(stored), &out); err != nil {
		return nil, err
	}
	return out, nil
}
