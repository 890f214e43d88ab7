// Copyright (c) 2026 Flant JSC
// SPDX-License-Identifier: Apache-2.0

package main

// werf-giterminism.yaml: what werf allows a giterministic build (the default of `werf build`, which
// Deckhouse's modules-actions/build runs without --loose-giterminism) to take from outside git. Only
// the two rules this repository's build can meet are read: env names in the template and mount
// fromPaths. Matching follows werf's pkg/giterminism_manager/config: an env pattern is a literal or
// /regexp/ anchored at both ends; a fromPath pattern is a glob that also covers the paths below it.

import (
	"errors"
	"fmt"
	"os"
	"path"
	"path/filepath"
	"regexp"
	"strings"

	yaml "go.yaml.in/yaml/v2"
)

const giterminismFile = "werf-giterminism.yaml"

type giterminism struct {
	Version int `yaml:"giterminismConfigVersion"`
	Config  struct {
		GoTemplateRendering struct {
			AllowEnvVariables []string `yaml:"allowEnvVariables"`
		} `yaml:"goTemplateRendering"`
		Stapel struct {
			Mount struct {
				AllowBuildDir  bool     `yaml:"allowBuildDir"`
				AllowFromPaths []string `yaml:"allowFromPaths"`
			} `yaml:"mount"`
		} `yaml:"stapel"`
	} `yaml:"config"`
}

// loadGiterminism reads werf-giterminism.yaml; without the file werf allows nothing.
func loadGiterminism(root string) (*giterminism, error) {
	g := &giterminism{Version: 1}
	data, err := os.ReadFile(filepath.Join(root, giterminismFile))
	if errors.Is(err, os.ErrNotExist) {
		return g, nil
	}
	if err != nil {
		return nil, err
	}
	if err := yaml.Unmarshal(data, g); err != nil {
		return nil, fmt.Errorf("%s: %w", giterminismFile, err)
	}
	if g.Version != 1 {
		return nil, fmt.Errorf("%s: giterminismConfigVersion must be 1, not %d", giterminismFile, g.Version)
	}
	for _, pattern := range g.Config.GoTemplateRendering.AllowEnvVariables {
		if isRegexpPattern(pattern) {
			if _, err := regexp.Compile(anchored(pattern)); err != nil {
				return nil, fmt.Errorf("%s: allowEnvVariables %s: %w", giterminismFile, pattern, err)
			}
		}
	}
	return g, nil
}

func isRegexpPattern(p string) bool {
	return len(p) >= 2 && strings.HasPrefix(p, "/") && strings.HasSuffix(p, "/")
}

func anchored(p string) string { return "^" + p[1:len(p)-1] + "$" }

func (g *giterminism) envAllowed(name string) bool {
	for _, pattern := range g.Config.GoTemplateRendering.AllowEnvVariables {
		if isRegexpPattern(pattern) {
			if regexp.MustCompile(anchored(pattern)).MatchString(name) {
				return true
			}
		} else if pattern == name {
			return true
		}
	}
	return false
}

func (g *giterminism) fromPathAllowed(p string) bool {
	for _, pattern := range g.Config.Stapel.Mount.AllowFromPaths {
		if pattern == p || strings.HasPrefix(p, strings.TrimSuffix(pattern, "/")+"/") {
			return true
		}
		if ok, _ := path.Match(pattern, p); ok {
			return true
		}
	}
	return false
}

func envProblems(denied map[string]bool) []string {
	var problems []string
	for _, name := range sortedKeys(denied) {
		problems = append(problems, fmt.Sprintf("env name %q is not allowed by giterminism: %s must list it in "+
			"config.goTemplateRendering.allowEnvVariables", name, giterminismFile))
	}
	return problems
}

// mountProblems is what werf's giterminism inspector refuses in the images' mount directives.
func (g *giterminism) mountProblems(images []*image) []string {
	var problems []string
	for _, img := range images {
		for _, m := range img.Mounts {
			switch {
			case m.FromPath != "" && !g.fromPathAllowed(m.FromPath):
				problems = append(problems, fmt.Sprintf("%s: mount fromPath %s is not allowed by giterminism: "+
					"%s must list it in config.stapel.mount.allowFromPaths", img, m.FromPath, giterminismFile))
			case m.From == "build_dir" && !g.Config.Stapel.Mount.AllowBuildDir:
				problems = append(problems, fmt.Sprintf("%s: mount from build_dir is not allowed by giterminism: "+
					"%s must set config.stapel.mount.allowBuildDir", img, giterminismFile))
			}
		}
	}
	return problems
}
