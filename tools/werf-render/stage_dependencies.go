// Copyright (c) 2026 Flant JSC
// SPDX-License-Identifier: Apache-2.0

package main

// Stage dependencies: werf re-runs an image's shell stages only when a file matching that stage's
// stageDependencies changes. An image that runs shell over files it adds from git must list every
// such file, or a change to it (a source, a proto, include_str! data such as dra-cel's
// declarations.tsv) ships in git but not in the built binary. Each file under a git `add` path (less
// excludePaths) must match some stageDependencies pattern (werf's globs, ** included).

import (
	"fmt"
	"io/fs"
	"os"
	"path"
	"path/filepath"
	"regexp"
	"strings"
)

type gitAdd struct {
	Add          string
	ExcludePaths []string
	Patterns     []string // every stage's stageDependencies
}

// readGitAdds reads the git entries of an image document.
func readGitAdds(d *document) ([]gitAdd, []string) {
	r := fieldReader{where: d.where()}
	var adds []gitAdd
	for i, item := range r.list(d.Fields, "git") {
		m := r.mapping(item, "git", i)
		g := gitAdd{Add: r.str(m, "add")}
		for _, p := range r.list(m, "excludePaths") {
			g.ExcludePaths = append(g.ExcludePaths, fmt.Sprint(p))
		}
		if deps, ok := m["stageDependencies"]; ok {
			for stage, patterns := range r.mapping(deps, "git[].stageDependencies", i) {
				list, isList := patterns.([]interface{})
				if !isList {
					r.fail("git[%d].stageDependencies.%s is not a list", i, stage)
					continue
				}
				for _, p := range list {
					g.Patterns = append(g.Patterns, fmt.Sprint(p))
				}
			}
		}
		adds = append(adds, g)
	}
	return adds, r.problems
}

// stageDependencyProblems checks every image that has shell stages.
func stageDependencyProblems(root string, g *graph) []string {
	var problems []string
	for _, img := range g.images {
		if _, hasShell := img.Doc.Fields["shell"]; !hasShell {
			continue
		}
		adds, bad := readGitAdds(img.Doc)
		problems = append(problems, bad...)
		for _, add := range adds {
			uncovered, err := uncoveredFiles(root, add)
			if err != nil {
				problems = append(problems, fmt.Sprintf("%s: git add %s: %v", img, add.Add, err))
			}
			for _, file := range uncovered {
				problems = append(problems, fmt.Sprintf("%s: git add %s: %s matches no stageDependencies "+
					"pattern, so changing it would not rebuild the image", img, add.Add, file))
			}
		}
	}
	return problems
}

func uncoveredFiles(root string, add gitAdd) ([]string, error) {
	base := filepath.Join(root, filepath.FromSlash(strings.TrimPrefix(add.Add, "/")))
	if _, err := os.Stat(base); os.IsNotExist(err) {
		return nil, nil // the copies of the self-test carry no sources
	}
	var uncovered []string
	err := filepath.WalkDir(base, func(p string, d fs.DirEntry, err error) error {
		if err != nil {
			return err
		}
		rel, _ := filepath.Rel(base, p)
		rel = filepath.ToSlash(rel)
		if rel == "." {
			return nil
		}
		if matchesAny(add.ExcludePaths, rel) {
			if d.IsDir() {
				return filepath.SkipDir
			}
			return nil
		}
		if !d.IsDir() && !matchesAny(add.Patterns, rel) {
			uncovered = append(uncovered, rel)
		}
		return nil
	})
	return uncovered, err
}

func matchesAny(patterns []string, rel string) bool {
	for _, p := range patterns {
		if globMatch(p, rel) {
			return true
		}
	}
	return false
}

// globMatch is werf's path glob: * and ? within one path segment, ** across segments; a pattern that
// names a directory matches everything below it.
func globMatch(pattern, rel string) bool {
	var re strings.Builder
	re.WriteString("^")
	for i := 0; i < len(pattern); i++ {
		switch c := pattern[i]; {
		case strings.HasPrefix(pattern[i:], "**/"):
			re.WriteString("(.*/)?")
			i += 2
		case strings.HasPrefix(pattern[i:], "**"):
			re.WriteString(".*")
			i++
		case c == '*':
			re.WriteString("[^/]*")
		case c == '?':
			re.WriteString("[^/]")
		default:
			re.WriteString(regexp.QuoteMeta(string(c)))
		}
	}
	re.WriteString("(/.*)?$")
	ok, err := regexp.MatchString(re.String(), path.Clean(rel))
	return err == nil && ok
}
