// Copyright (c) 2026 Flant JSC
// SPDX-License-Identifier: Apache-2.0

package main

// The images/<name>/ directories against the render: each werf.inc.yaml is rendered by werf.yaml and
// defines an image <name>; each mount-points.yaml (Deckhouse's format: dirs and files, absolute
// paths the distroless image must already contain) has its <name>-mount-points image, and image
// <name> imports it, or the paths never reach the image.

import (
	"fmt"
	"os"
	"path"
	"path/filepath"
	"sort"
	"strings"

	yaml "go.yaml.in/yaml/v2"
)

type imageDirs struct {
	incFiles    []string // names of images/<name>/ with a werf.inc.yaml
	mountPoints []string // names of images/<name>/ with a mount-points.yaml
}

func listImageDirs(root string) (imageDirs, error) {
	var dirs imageDirs
	for file, into := range map[string]*[]string{"werf.inc.yaml": &dirs.incFiles, "mount-points.yaml": &dirs.mountPoints} {
		matches, err := filepath.Glob(filepath.Join(root, "images", "*", file))
		if err != nil {
			return dirs, err
		}
		for _, m := range matches {
			*into = append(*into, filepath.Base(filepath.Dir(m)))
		}
		sort.Strings(*into)
	}
	return dirs, nil
}

// incFileProblems uses what each werf.inc.yaml rendered to through tpl (renderer.included).
func incFileProblems(dirs imageDirs, included map[string][]string) []string {
	var problems []string
	for _, name := range dirs.incFiles {
		file := "images/" + name + "/werf.inc.yaml"
		outputs, rendered := included[file]
		if !rendered {
			problems = append(problems, file+" is never rendered by werf.yaml (no tpl of its content)")
			continue
		}
		defined := map[string]bool{}
		for _, out := range outputs {
			docs := splitDocuments(out)
			parseDocuments(docs) // a parse error is already reported for the whole render
			for _, d := range docs {
				if s, ok := d.Fields["image"].(string); ok {
					defined[s] = true
				}
			}
		}
		if !defined[name] {
			problems = append(problems, fmt.Sprintf("%s defines no image named %q (it defines: %s)",
				file, name, strings.Join(sortedKeys(defined), ", ")))
		}
	}
	return problems
}

type mountPointsFile struct {
	Dirs  []string `yaml:"dirs"`
	Files []string `yaml:"files"`
}

func mountPointProblems(root string, dirs imageDirs, g *graph) []string {
	var problems []string
	for _, name := range dirs.mountPoints {
		file := "images/" + name + "/mount-points.yaml"
		data, err := os.ReadFile(filepath.Join(root, filepath.FromSlash(file)))
		if err != nil {
			problems = append(problems, fmt.Sprintf("%s: %v", file, err))
			continue
		}
		var mp mountPointsFile
		if err := yaml.UnmarshalStrict(data, &mp); err != nil {
			problems = append(problems, fmt.Sprintf("%s (only dirs and files): %v", file, err))
		}
		for _, p := range append(append([]string{}, mp.Dirs...), mp.Files...) {
			if !path.IsAbs(p) || path.Clean(p) != p {
				problems = append(problems, fmt.Sprintf("%s: %q is not a clean absolute path", file, p))
			}
		}
		mounts := name + "-mount-points"
		if g.byName[mounts] == nil {
			problems = append(problems, fmt.Sprintf("%s has no image %q in the render", file, mounts))
		}
		switch img := g.byName[name]; {
		case img == nil:
			problems = append(problems, fmt.Sprintf("%s: no image %q in the render to carry the paths", file, name))
		case !contains(img.Imports, mounts):
			problems = append(problems, fmt.Sprintf("%s does not import %q, so %s never reaches the image",
				img, mounts, file))
		}
	}
	return problems
}
