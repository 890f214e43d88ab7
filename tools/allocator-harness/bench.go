// Copyright (c) 2026 Flant JSC
// SPDX-License-Identifier: Apache-2.0

package main

// Benchmark mode: the Rust benchmark (crates/dra-allocator/benches/allocator_vs_scheduler)
// loads one inventory, then has a claim stream allocated here in-process, timed per claim, so
// process start-up and JSON I/O are not measured; and replays our engine's allocations, pinned
// to our devices, to check each one is valid under this release.
//
//	{"load":   {"slices":[...], "classes":[...], "nodes":[...]}}          -> {"loaded": n}
//	{"bench":  {"claims":[...], "nodeOrder":"rotating"|"fixed", "untilFirstFailure":bool}}
//	        -> {"latenciesNs":[...], "wallNs":n, "nodes":["node" or "" per claim]}
//	{"replay": {"steps":[{"node":"n", "claim":pinned claim, "allocation":ours}]}}
//	        -> {"answers":[answer per step]}
//
// One bench step is what the scheduler does for one pod: NewAllocator over the current allocated
// state (once per scheduling cycle), then Allocate node after node until one fits, then the
// allocation is counted in the state. "rotating" starts after the node the previous claim took,
// as the scheduler's nextStartNodeIndex does; "fixed" always starts at the first node.

import (
	"context"
	"fmt"
	"time"

	v1 "k8s.io/api/core/v1"
	resourceapi "k8s.io/api/resource/v1"
	"k8s.io/dynamic-resource-allocation/cel"
	"k8s.io/dynamic-resource-allocation/structured"
)

type request struct {
	harnessCase
	Load   *harnessCase   `json:"load,omitempty"`
	Bench  *benchRequest  `json:"bench,omitempty"`
	Replay *replayRequest `json:"replay,omitempty"`
}

type benchRequest struct {
	Claims            []*resourceapi.ResourceClaim `json:"claims"`
	NodeOrder         string                       `json:"nodeOrder"`
	UntilFirstFailure bool                         `json:"untilFirstFailure"`
}

type benchAnswer struct {
	LatenciesNs []int64  `json:"latenciesNs"`
	WallNs      int64    `json:"wallNs"`
	Nodes       []string `json:"nodes"`
	Error       string   `json:"error,omitempty"`
}

type replayStep struct {
	Node       string                        `json:"node"`
	Claim      *resourceapi.ResourceClaim    `json:"claim"`
	Allocation *resourceapi.AllocationResult `json:"allocation"`
}

type replayRequest struct {
	Steps []replayStep `json:"steps"`
}

type replayAnswer struct {
	Answers []answer `json:"answers"`
}

// benchSession holds the loaded inventory between requests.
type benchSession struct {
	slices  []*resourceapi.ResourceSlice
	classes classLister
	nodes   []*v1.Node
	byName  map[string]*v1.Node
}

func (s *benchSession) load(c *harnessCase) any {
	s.slices, s.nodes = c.Slices, c.Nodes
	s.classes = classLister{}
	for _, class := range c.Classes {
		s.classes[class.Name] = class
	}
	s.byName = map[string]*v1.Node{}
	for _, node := range c.Nodes {
		s.byName[node.Name] = node
	}
	return map[string]int{"loaded": len(c.Slices)}
}

func (s *benchSession) bench(ctx context.Context, cache *cel.Cache, b *benchRequest) (a benchAnswer) {
	defer func() {
		if r := recover(); r != nil {
			a = benchAnswer{Error: fmt.Sprintf("panic: %v", r)}
		}
	}()
	state := emptyAllocatedState()
	a.LatenciesNs = make([]int64, 0, len(b.Claims))
	cursor := 0
	began := time.Now()
	for i := range b.Claims {
		started := time.Now()
		allocator, err := structured.NewAllocator(ctx, allocatorFeatures, state, s.classes, s.slices, cache)
		if err != nil {
			return benchAnswer{Error: err.Error()}
		}
		placedOn := ""
		for k := range s.nodes {
			index := (cursor + k) % len(s.nodes)
			results, err := allocator.Allocate(ctx, s.nodes[index], b.Claims[i:i+1])
			if err != nil {
				// Invalid input is fatal for the scheduler too; the benchmark's input must be valid.
				return benchAnswer{Error: fmt.Sprintf("claim %s on %s: %v", b.Claims[i].Name, s.nodes[index].Name, err)}
			}
			if len(results) == 1 {
				addAllocation(state, &results[0])
				placedOn = s.nodes[index].Name
				if b.NodeOrder == "rotating" {
					cursor = (index + 1) % len(s.nodes)
				}
				break
			}
		}
		a.LatenciesNs = append(a.LatenciesNs, time.Since(started).Nanoseconds())
		a.Nodes = append(a.Nodes, placedOn)
		if placedOn == "" && b.UntilFirstFailure {
			break
		}
	}
	a.WallNs = time.Since(began).Nanoseconds()
	return a
}

// replay offers each pinned claim on our node over the state of our earlier allocations, then
// counts our allocation, whatever Go answered, so later steps see the state ours saw.
func (s *benchSession) replay(ctx context.Context, cache *cel.Cache, r *replayRequest) replayAnswer {
	state := emptyAllocatedState()
	answers := make([]answer, 0, len(r.Steps))
	for _, step := range r.Steps {
		answers = append(answers, s.judge(ctx, cache, state, step))
		addAllocation(state, step.Allocation)
	}
	return replayAnswer{Answers: answers}
}

func (s *benchSession) judge(ctx context.Context, cache *cel.Cache, state structured.AllocatedState, step replayStep) (a answer) {
	defer func() {
		if r := recover(); r != nil {
			a = answer{Error: fmt.Sprintf("panic: %v", r)}
		}
	}()
	node, ok := s.byName[step.Node]
	if !ok {
		return answer{Error: "unknown node " + step.Node}
	}
	allocator, err := structured.NewAllocator(ctx, allocatorFeatures, state, s.classes, s.slices, cache)
	if err != nil {
		return answer{Error: err.Error()}
	}
	results, err := allocator.Allocate(ctx, node, []*resourceapi.ResourceClaim{step.Claim})
	if err != nil {
		return answer{Error: err.Error()}
	}
	if len(results) != 1 {
		return answer{Unsatisfiable: true}
	}
	return answer{Node: node.Name, Allocation: &results[0]}
}
