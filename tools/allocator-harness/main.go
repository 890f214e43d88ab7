// Copyright (c) 2026 Flant JSC
// SPDX-License-Identifier: Apache-2.0

// Command allocator-harness runs the kube-scheduler's structured allocator
// (k8s.io/dynamic-resource-allocation/structured) on JSON cases, so the Rust
// allocation engine of the gpu module can be compared with the real thing.
//
// Protocol: one JSON case per stdin line, one JSON answer per stdout line, in order.
//
//	case:   {"slices":[ResourceSlice], "classes":[DeviceClass], "allocated":[ResourceClaim],
//	         "nodes":[Node], "claim":ResourceClaim, "taintRules":[DeviceTaintRule]}
//	answer: {"node":"n1","allocation":AllocationResult} | {"unsatisfiable":true} | {"error":"..."}
//
// Benchmark mode (bench.go) uses the same stream with request lines {"load":...},
// {"bench":...} and {"replay":...} instead of cases; CEL mode (cel.go) uses
// {"celCompile":...} and {"celDeclarations":true}.
//
// The claim is offered to each node in the given order; the first node where the
// allocator finds a solution wins, exactly as one scheduling attempt per node would.
// The feature set is the one the test bed enables for this release (features_*.go).
package main

import (
	"bufio"
	"context"
	"encoding/json"
	"fmt"
	"os"

	v1 "k8s.io/api/core/v1"
	resourceapi "k8s.io/api/resource/v1"
	"k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apimachinery/pkg/util/sets"
	"k8s.io/dynamic-resource-allocation/cel"
	"k8s.io/dynamic-resource-allocation/structured"
)

type harnessCase struct {
	Slices    []*resourceapi.ResourceSlice `json:"slices"`
	Classes   []*resourceapi.DeviceClass   `json:"classes"`
	Allocated []*resourceapi.ResourceClaim `json:"allocated"`
	Nodes     []*v1.Node                   `json:"nodes"`
	Claim     *resourceapi.ResourceClaim   `json:"claim"`
	// DeviceTaintRules of the release's served version (v1alpha3 on 1.34, v1 on 1.37), applied
	// to the slices by upstream's ResourceSlice tracker (taint_rules_*.go).
	TaintRules json.RawMessage `json:"taintRules,omitempty"`
}

type answer struct {
	Node          string                        `json:"node,omitempty"`
	Allocation    *resourceapi.AllocationResult `json:"allocation,omitempty"`
	Unsatisfiable bool                          `json:"unsatisfiable,omitempty"`
	Error         string                        `json:"error,omitempty"`
}

type classLister map[string]*resourceapi.DeviceClass

func (l classLister) List() ([]*resourceapi.DeviceClass, error) {
	out := make([]*resourceapi.DeviceClass, 0, len(l))
	for _, c := range l {
		out = append(out, c)
	}
	return out, nil
}

func (l classLister) Get(name string) (*resourceapi.DeviceClass, error) {
	if c, ok := l[name]; ok {
		return c, nil
	}
	return nil, errors.NewNotFound(schema.GroupResource{Group: "resource.k8s.io", Resource: "deviceclasses"}, name)
}

// allocatedState mirrors the scheduler's GatherAllocatedState over allocated claims.
func allocatedState(claims []*resourceapi.ResourceClaim) structured.AllocatedState {
	state := emptyAllocatedState()
	for _, claim := range claims {
		if claim.Status.Allocation != nil {
			addAllocation(state, claim.Status.Allocation)
		}
	}
	return state
}

func emptyAllocatedState() structured.AllocatedState {
	return structured.AllocatedState{
		AllocatedDevices:         sets.New[structured.DeviceID](),
		AllocatedSharedDeviceIDs: sets.New[structured.SharedDeviceID](),
		AggregatedCapacity:       structured.NewConsumedCapacityCollection(),
	}
}

// addAllocation counts one allocation as the scheduler does: admin-access results are not
// counted, shared results (with a shareID) count as capacity, others as devices.
func addAllocation(state structured.AllocatedState, allocation *resourceapi.AllocationResult) {
	for _, r := range allocation.Devices.Results {
		if r.AdminAccess != nil && *r.AdminAccess {
			continue
		}
		id := structured.MakeDeviceID(r.Driver, r.Pool, r.Device)
		if r.ShareID == nil {
			state.AllocatedDevices.Insert(id)
			continue
		}
		state.AllocatedSharedDeviceIDs.Insert(structured.MakeSharedDeviceID(id, r.ShareID))
		if r.ConsumedCapacity != nil {
			state.AggregatedCapacity.Insert(structured.NewDeviceConsumedCapacity(id, r.ConsumedCapacity))
		}
	}
}

func run(ctx context.Context, cache *cel.Cache, c *harnessCase) (a answer) {
	// A panic inside the allocator is a finding about that release, not the end of the batch.
	defer func() {
		if r := recover(); r != nil {
			a = answer{Error: fmt.Sprintf("panic: %v", r)}
		}
	}()
	classes := classLister{}
	for _, class := range c.Classes {
		classes[class.Name] = class
	}
	slices, err := patchedSlices(ctx, c.Slices, c.Classes, c.TaintRules)
	if err != nil {
		return answer{Error: err.Error()}
	}
	allocator, err := structured.NewAllocator(ctx, allocatorFeatures, allocatedState(c.Allocated), classes, slices, cache)
	if err != nil {
		return answer{Error: err.Error()}
	}
	var lastErr error
	for _, node := range c.Nodes {
		results, err := allocator.Allocate(ctx, node, []*resourceapi.ResourceClaim{c.Claim})
		if err != nil {
			// An error on one node (an invalid pool there) does not stop the scheduler
			// from trying the other nodes.
			lastErr = err
			continue
		}
		if len(results) == 1 {
			return answer{Node: node.Name, Allocation: &results[0]}
		}
	}
	if lastErr != nil {
		return answer{Error: lastErr.Error()}
	}
	return answer{Unsatisfiable: true}
}

func main() {
	ctx := context.Background()
	cache := cel.NewCache(1000, celFeatures)
	in := bufio.NewReaderSize(os.Stdin, 1<<20)
	out := bufio.NewWriter(os.Stdout)
	defer out.Flush()
	decoder := json.NewDecoder(in)
	encoder := json.NewEncoder(out)
	session := &benchSession{}
	for decoder.More() {
		var c requestLine
		var a any
		if err := decoder.Decode(&c); err != nil {
			_ = encoder.Encode(answer{Error: fmt.Sprintf("decode case: %v", err)})
			return
		}
		switch {
		case c.CelCompile != nil:
			a = celCompile(*c.CelCompile)
		case c.CelDeclarations:
			a = celDeclarations()
		case c.Load != nil:
			a = session.load(c.Load)
		case c.Bench != nil:
			a = session.bench(ctx, cache, c.Bench)
		case c.Replay != nil:
			a = session.replay(ctx, cache, c.Replay)
		default:
			a = run(ctx, cache, &c.harnessCase)
		}
		if err := encoder.Encode(a); err != nil {
			fmt.Fprintln(os.Stderr, err)
			os.Exit(1)
		}
	}
}
