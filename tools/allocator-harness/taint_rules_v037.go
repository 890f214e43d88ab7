// Copyright (c) 2026 Flant JSC
// SPDX-License-Identifier: Apache-2.0

//go:build k8s_v037

package main

import (
	"encoding/json"

	resourceapi "k8s.io/api/resource/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/client-go/informers"
	"k8s.io/dynamic-resource-allocation/resourceslice/tracker"
)

// decodeRules reads v1.37's DeviceTaintRules (resource.k8s.io/v1).
func decodeRules(raw json.RawMessage) ([]runtime.Object, error) {
	var rules []*resourceapi.DeviceTaintRule
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

// trackerOptions: the v1.37 tracker as the scheduler starts it (DRADeviceTaintRules is GA).
func trackerOptions(factory informers.SharedInformerFactory) tracker.Options {
	return tracker.Options{
		EnableDeviceTaintRules:   true,
		EnableConsumableCapacity: true,
		SliceInformer:            factory.Resource().V1().ResourceSlices(),
		TaintInformer:            factory.Resource().V1().DeviceTaintRules(),
	}
}
