// Copyright (c) 2026 Flant JSC
// SPDX-License-Identifier: Apache-2.0

package main

// The image graph of the rendered werf.yaml: one meta document, unique image names, every image
// reference (fromImage, import, dependencies) resolved inside the render and free of cycles, base
// images pinned by digest, and the digests file complete (Deckhouse reads global.modulesImages.digests
// from images-digests; an image missing there cannot be pulled by the module's templates).

import (
	"fmt"
	"regexp"
	"sort"
	"strings"
)

// publishedByName are final images the build publishes by name rather than by digest:
// deckhouse/modules-actions build/action.yml copies .Images."bundle" and ."release-channel-version".
var publishedByName = []string{"bundle", "release-channel-version"}

const digestsImage = "images-digests"

var pinned = regexp.MustCompile(`@sha256:[0-9a-f]{64}$`)

type graph struct {
	images []*image
	byName map[string]*image
}

func buildGraph(docs []*document) (*graph, []string) {
	g := &graph{byName: map[string]*image{}}
	var problems []string
	metas := 0
	for _, d := range docs {
		_, isMeta := d.Fields["project"]
		_, isImage := d.Fields["image"]
		switch {
		case isMeta && !isImage:
			metas++
			if v := d.Fields["configVersion"]; v != 1 {
				problems = append(problems, fmt.Sprintf("%s: configVersion is %v, werf wants 1", d.where(), v))
			}
		case isImage && !isMeta:
			img, bad := readImage(d)
			problems = append(problems, bad...)
			if first, dup := g.byName[img.Name]; dup {
				problems = append(problems, fmt.Sprintf("%s: image %q is defined twice (first in %s)",
					d.where(), img.Name, first.Doc.where()))
				continue
			}
			g.images = append(g.images, img)
			g.byName[img.Name] = img
		default:
			problems = append(problems, fmt.Sprintf("%s: neither a meta document (project) nor an image", d.where()))
		}
	}
	if metas != 1 {
		problems = append(problems, fmt.Sprintf("%d meta documents (project, configVersion); werf wants one", metas))
	}
	return g, problems
}

func (g *graph) referenceProblems() []string {
	var problems []string
	for _, img := range g.images {
		switch {
		case img.From == "" && img.FromImage == "":
			problems = append(problems, fmt.Sprintf("%s has neither from nor fromImage", img))
		case img.From != "" && img.FromImage != "":
			problems = append(problems, fmt.Sprintf("%s has both from and fromImage", img))
		case img.From != "" && !pinned.MatchString(img.From):
			problems = append(problems, fmt.Sprintf("%s: from %q is not pinned by digest (@sha256:<64 hex>)",
				img, img.From))
		}
		if img.FromImage != "" && g.byName[img.FromImage] == nil {
			problems = append(problems, fmt.Sprintf("%s: fromImage %q, which no document defines", img, img.FromImage))
		}
		for _, name := range img.Imports {
			if name == "" {
				problems = append(problems, fmt.Sprintf("%s has an import that names no image", img))
			} else if g.byName[name] == nil {
				problems = append(problems, fmt.Sprintf("%s imports image %q, which no document defines", img, name))
			}
		}
		for _, dep := range img.DependsOn {
			if g.byName[dep.Image] == nil {
				problems = append(problems, fmt.Sprintf("%s depends on image %q, which no document defines",
					img, dep.Image))
			}
		}
	}
	return problems
}

func (img *image) uses() []string {
	var names []string
	if img.FromImage != "" {
		names = append(names, img.FromImage)
	}
	names = append(names, img.Imports...)
	for _, dep := range img.DependsOn {
		names = append(names, dep.Image)
	}
	return names
}

// cycleProblems reports images that need themselves (werf refuses such a config).
func (g *graph) cycleProblems() []string {
	const (
		visiting = 1
		done     = 2
	)
	state := map[string]int{}
	var problems []string
	var path []string
	var visit func(name string)
	visit = func(name string) {
		img := g.byName[name]
		if img == nil || state[name] == done {
			return
		}
		if state[name] == visiting {
			start := 0
			for path[start] != name {
				start++
			}
			cycle := append(append([]string{}, path[start:]...), name)
			problems = append(problems, "images need each other in a cycle: "+strings.Join(cycle, " -> "))
			return
		}
		state[name] = visiting
		path = append(path, name)
		for _, used := range img.uses() {
			visit(used)
		}
		path = path[:len(path)-1]
		state[name] = done
	}
	for _, img := range g.images {
		visit(img.Name)
	}
	return problems
}

// digestProblems: every final image is in images-digests (or published by name), nothing else is,
// and no two images share a MODULE_IMAGE_DIGEST_* variable (their keys in images_digests.json).
func (g *graph) digestProblems() []string {
	var problems []string
	digests := g.byName[digestsImage]
	if digests == nil {
		return []string{fmt.Sprintf("no image %q: Deckhouse reads the module's image digests from it", digestsImage)}
	}
	listed := map[string]bool{}
	envOwner := map[string]string{}
	for _, dep := range digests.DependsOn {
		listed[dep.Image] = true
		if img := g.byName[dep.Image]; img != nil && !img.Final {
			problems = append(problems, fmt.Sprintf("%s lists %s, which is final: false", digests, img))
		}
		for _, env := range dep.TargetEnvs {
			if owner, taken := envOwner[env]; taken && owner != dep.Image {
				problems = append(problems, fmt.Sprintf("%s: images %q and %q both set %s", digests, owner, dep.Image, env))
			}
			envOwner[env] = dep.Image
		}
	}
	for _, img := range g.images {
		if img.Final && !listed[img.Name] && !isPublishedByName(img.Name) {
			problems = append(problems, fmt.Sprintf("final %s is not in %s's dependencies (mark it final: false "+
				"if the module never runs it)", img, digestsImage))
		}
	}
	for _, name := range publishedByName {
		if img := g.byName[name]; img == nil || !img.Final {
			problems = append(problems, fmt.Sprintf("no final image %q: the module build publishes it by that name", name))
		}
	}
	if bundle := g.byName["bundle"]; bundle != nil && !contains(bundle.Imports, digestsImage) {
		problems = append(problems, fmt.Sprintf("%s does not import %s (images_digests.json)", bundle, digestsImage))
	}
	return problems
}

func (g *graph) finalCount() int {
	n := 0
	for _, img := range g.images {
		if img.Final {
			n++
		}
	}
	return n
}

// noValueProblems finds "<no value>": text/template's output for a key the data does not have.
func noValueProblems(render string) []string {
	var lines []string
	for i, line := range strings.Split(render, "\n") {
		if strings.Contains(line, "<no value>") {
			lines = append(lines, fmt.Sprint(i+1))
		}
	}
	if len(lines) == 0 {
		return nil
	}
	return []string{"the render reads a missing key (\"<no value>\") on line(s) " + strings.Join(lines, ", ")}
}

func isPublishedByName(name string) bool { return contains(publishedByName, name) }

func contains(list []string, s string) bool {
	for _, item := range list {
		if item == s {
			return true
		}
	}
	return false
}

func sortedKeys(m map[string]bool) []string {
	keys := make([]string, 0, len(m))
	for k := range m {
		keys = append(keys, k)
	}
	sort.Strings(keys)
	return keys
}
