// Copyright (c) 2026 Flant JSC
// SPDX-License-Identifier: Apache-2.0

//go:build k8s_v037

package main

import (
	"k8s.io/dynamic-resource-allocation/cel"
	"k8s.io/dynamic-resource-allocation/structured"
)

// Kubernetes v1.37.2 as the test bed runs it: DRAPartitionableDevices and DRAConsumableCapacity
// are beta (on), DRAPrioritizedList, DRAAdminAccess and DRADeviceTaints are GA, device binding
// conditions with device status are beta (on). Alpha allocator features stay off.
var allocatorFeatures = structured.Features{
	AdminAccess:            true,
	ConsumableCapacity:     true,
	DeviceBindingAndStatus: true,
	DeviceTaints:           true,
	PartitionableDevices:   true,
	PrioritizedList:        true,
}

var celFeatures = cel.Features{EnableConsumableCapacity: true}
