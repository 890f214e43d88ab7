// Copyright (c) 2026 Flant JSC
// SPDX-License-Identifier: Apache-2.0

//go:build k8s_v034

package main

import (
	"k8s.io/dynamic-resource-allocation/cel"
	"k8s.io/dynamic-resource-allocation/structured"
)

// Kubernetes v1.34.4 as the test bed runs it: DRAPartitionableDevices and DRAConsumableCapacity
// switched on (alpha), DRAPrioritizedList, DRAAdminAccess and DRAResourceClaimDeviceStatus on by
// default (beta), DRADeviceTaints switched on (alpha; tools/testbed/versions.sh), so device taints,
// also those of DeviceTaintRules, are honoured. DRADeviceBindingConditions is alpha and stays off.
var allocatorFeatures = structured.Features{
	AdminAccess:          true,
	ConsumableCapacity:   true,
	DeviceTaints:         true,
	DeviceStatus:         true,
	PartitionableDevices: true,
	PrioritizedList:      true,
}

var celFeatures = cel.Features{EnableConsumableCapacity: true}
