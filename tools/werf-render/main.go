// Copyright (c) 2026 Flant JSC
// SPDX-License-Identifier: Apache-2.0

// werf-render renders the module's werf.yaml as werf would and checks the image graph it describes,
// because werf itself needs a container registry and so never runs in `make test`. It only reads the
// repository; it never builds, pulls or pushes anything.
//
//	werf-render [--loose-giterminism] [--dump FILE] REPO_DIR
//
// Prints one summary line and exits 0, or lists every problem and exits 1 (2 for a usage error).
package main

import (
	"errors"
	"flag"
	"fmt"
	"os"
	"strings"
)

type options struct {
	root  string
	loose bool   // skip werf's giterminism rules, as `werf --loose-giterminism`
	dump  string // where to write the render, for reading it when a check fails
}

// checkRepo renders and checks. An error means the render itself failed; problems are the findings.
func checkRepo(opts options) (summary string, problems []string, err error) {
	var g *giterminism
	if !opts.loose {
		if g, err = loadGiterminism(opts.root); err != nil {
			return "", nil, err
		}
	}
	r := newRenderer(opts.root, g)
	render, err := r.render()
	if err != nil {
		return "", nil, fmt.Errorf("werf.yaml does not render: %w", err)
	}
	if opts.dump != "" {
		if err := os.WriteFile(opts.dump, []byte(render), 0o644); err != nil {
			return "", nil, err
		}
	}
	docs := splitDocuments(render)
	if problems = parseDocuments(docs); len(problems) > 0 {
		return "", problems, nil
	}
	graph, problems := buildGraph(docs)
	problems = append(problems, graph.referenceProblems()...)
	problems = append(problems, graph.cycleProblems()...)
	problems = append(problems, graph.digestProblems()...)
	problems = append(problems, noValueProblems(render)...)
	dirs, err := listImageDirs(opts.root)
	if err != nil {
		return "", nil, err
	}
	problems = append(problems, incFileProblems(dirs, r.included)...)
	problems = append(problems, mountPointProblems(opts.root, dirs, graph)...)
	problems = append(problems, stageDependencyProblems(opts.root, graph)...)
	mode := "loose giterminism"
	if g != nil {
		problems = append(problems, envProblems(r.deniedEnv)...)
		problems = append(problems, g.mountProblems(graph.images)...)
		mode = fmt.Sprintf("giterminism ok (env read: %s)", strings.Join(sortedKeys(r.envNames), ", "))
	}
	summary = fmt.Sprintf("werf.yaml: %d documents, %d images, %d final (%d in %s, plus %s); "+
		"%d images/*/werf.inc.yaml, %d mount-points.yaml; %s",
		len(docs), len(graph.images), graph.finalCount(), len(graph.byName[digestsImage].dependencyNames()),
		digestsImage, strings.Join(publishedByName, " and "), len(dirs.incFiles), len(dirs.mountPoints), mode)
	return summary, problems, nil
}

func (img *image) dependencyNames() []string {
	if img == nil {
		return nil
	}
	var names []string
	for _, dep := range img.DependsOn {
		names = append(names, dep.Image)
	}
	return names
}

func main() {
	var opts options
	flags := flag.NewFlagSet("werf-render", flag.ContinueOnError)
	flags.BoolVar(&opts.loose, "loose-giterminism", false, "skip werf's giterminism rules (env names, mount fromPaths)")
	flags.StringVar(&opts.dump, "dump", "", "write the rendered werf.yaml to this file")
	if err := flags.Parse(os.Args[1:]); err != nil || flags.NArg() != 1 {
		if err == nil {
			err = errors.New("one repository directory is required")
		}
		fmt.Fprintf(os.Stderr, "werf-render: %v\nusage: werf-render [--loose-giterminism] [--dump FILE] REPO_DIR\n", err)
		os.Exit(2)
	}
	opts.root = flags.Arg(0)
	summary, problems, err := checkRepo(opts)
	if err != nil {
		fmt.Fprintf(os.Stderr, "werf-render: %s: %v\n", opts.root, err)
		os.Exit(1)
	}
	if len(problems) > 0 {
		fmt.Fprintf(os.Stderr, "werf-render: %d problem(s) in %s/werf.yaml:\n", len(problems), opts.root)
		for _, p := range problems {
			fmt.Fprintf(os.Stderr, "  - %s\n", p)
		}
		os.Exit(1)
	}
	fmt.Println(summary)
}
