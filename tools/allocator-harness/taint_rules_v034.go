// Copyright (c) 2026 Flant JSC
// SPDX-License-Identifier: Apache-2.0

//go:build k8s_v034

package main

import (
	"encoding/json"

	resourcealphaapi "k8s.io/api/resource/v1alpha3"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/client-go/informers"
	"k8s.io/dynamic-resource-allocation/resourceslice/tracker"
)

// decodeRules reads v1.34's DeviceTaintRules (resource.k8s.io/v1alpha3).
func decodeRules(raw json.RawMessage) ([]runtime.Object, error) {
	var rules []*resourcealphaapi.DeviceTaintRule
	if len(raw) > 0 {
		if err := json.Unmarshal(raw, &rules); err != nil {
			return nil, err
		}
	}
	objects := make([]runtime.Object, 0, len(rules))
	for _, r := range rules {
		objects = append(objects, r)
	}
	return objects, nil
}

// trackerOptions: the v1.34 tracker as the scheduler starts it with DRADeviceTaints on; it reads
// DeviceClasses too, for rules that select by class.
func trackerOptions(factory informers.SharedInformerFactory) tracker.Options {
	return tracker.Options{
		EnableDeviceTaints:       true,
		EnableConsumableCapacity: true,
		SliceInformer:            factory.Resource().V1().ResourceSlices(),
		TaintInformer:            factory.Resource().V1alpha3().DeviceTaintRules(),
		ClassInformer:            factory.Resource().V1().DeviceClasses(),
	}
}
