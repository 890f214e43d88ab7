// Copyright (c) 2026 Flant JSC
// SPDX-License-Identifier: Apache-2.0

package main

import (
	"context"
	"encoding/json"
	"fmt"

	resourceapi "k8s.io/api/resource/v1"
	"k8s.io/client-go/informers"
	"k8s.io/client-go/kubernetes/fake"
	"k8s.io/client-go/tools/cache"
	"k8s.io/dynamic-resource-allocation/resourceslice/tracker"
)

// patchedSlices gives the slices as the kube-scheduler's allocator sees them: with the taints of
// the case's DeviceTaintRules (in the release's served version, taint_rules_*.go) added by
// upstream's own ResourceSlice tracker (tracker.applyPatches), fed through informers of a fake
// clientset, as the scheduler feeds it through informers of the API server.
func patchedSlices(ctx context.Context, slices []*resourceapi.ResourceSlice, classes []*resourceapi.DeviceClass, raw json.RawMessage) ([]*resourceapi.ResourceSlice, error) {
	rules, err := decodeRules(raw)
	if err != nil {
		return nil, fmt.Errorf("decode taintRules: %w", err)
	}
	if len(rules) == 0 {
		return slices, nil
	}
	objects := rules
	for _, s := range slices {
		objects = append(objects, s)
	}
	for _, c := range classes {
		objects = append(objects, c)
	}
	client := fake.NewSimpleClientset(objects...)
	factory := informers.NewSharedInformerFactory(client, 0)
	ctx, cancel := context.WithCancel(ctx)
	// Shutdown waits for the informers, which stop once ctx is cancelled.
	defer func() { cancel(); factory.Shutdown() }()
	t, err := tracker.StartTracker(ctx, trackerOptions(factory))
	if err != nil {
		return nil, err
	}
	defer t.Stop()
	factory.Start(ctx.Done())
	if !cache.WaitForCacheSync(ctx.Done(), t.HasSynced) {
		return nil, fmt.Errorf("the ResourceSlice tracker did not sync")
	}
	return t.ListPatchedResourceSlices()
}
