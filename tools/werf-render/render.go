// Copyright (c) 2026 Flant JSC
// SPDX-License-Identifier: Apache-2.0

package main

// Renders werf.yaml the way werf does (werf/werf pkg/config/parser.go): text/template with sprig's
// TxtFuncMap minus expandenv, plus the werf functions this repository calls: fromYaml, tpl, env, and
// .Files.Get/.Files.Glob. Anything else (include, required, .werf/*.tmpl) is deliberately missing, so
// a werf.yaml that starts to use it fails here with text/template's "function ... not defined"
// instead of rendering differently from werf.

import (
	"bytes"
	"errors"
	"fmt"
	"hash/adler32"
	"os"
	"path/filepath"
	"strings"
	"text/template"

	"github.com/Masterminds/sprig/v3"
	yaml "go.yaml.in/yaml/v2"
)

type renderer struct {
	root        string
	giterminism *giterminism // nil: --loose-giterminism, as werf's flag of that name
	tmpl        *template.Template
	// Contents read through .Files, to name a tpl template after its file and to know which
	// images/*/werf.inc.yaml rendered to what.
	sources   map[string][]string
	included  map[string][]string
	envNames  map[string]bool
	deniedEnv map[string]bool
}

func newRenderer(root string, g *giterminism) *renderer {
	r := &renderer{
		root:        root,
		giterminism: g,
		sources:     map[string][]string{},
		included:    map[string][]string{},
		envNames:    map[string]bool{},
		deniedEnv:   map[string]bool{},
	}
	r.tmpl = template.New("werf.yaml")
	funcs := sprig.TxtFuncMap()
	delete(funcs, "expandenv")
	funcs["fromYaml"] = fromYaml
	funcs["tpl"] = r.tpl
	funcs["env"] = r.env
	r.tmpl.Funcs(funcs)
	return r
}

// render returns werf.yaml rendered with the data werf gives it (.Files and .Env; werf's --env is
// empty by default). A key werf also sets but this repository does not read (.Commit) renders as
// "<no value>", which the graph check reports.
func (r *renderer) render() (string, error) {
	if info, err := os.Stat(filepath.Join(r.root, ".werf")); err == nil && info.IsDir() {
		return "", errors.New(".werf/ exists: werf parses its *.tmpl files as templates, which this renderer does not do")
	}
	text, err := os.ReadFile(filepath.Join(r.root, "werf.yaml"))
	if err != nil {
		return "", err
	}
	if _, err := r.tmpl.Parse(string(text)); err != nil {
		return "", err
	}
	data := map[string]interface{}{"Files": files{r}, "Env": ""}
	var out bytes.Buffer
	if err := r.tmpl.ExecuteTemplate(&out, "werf.yaml", data); err != nil {
		return "", err
	}
	return out.String(), nil
}

// fromYaml is werf's: yaml.v2 into a map (nested maps stay map[interface{}]interface{}), and a
// parse error fails the render.
func fromYaml(text string) (map[string]interface{}, error) {
	m := map[string]interface{}{}
	if err := yaml.Unmarshal([]byte(text), &m); err != nil {
		return nil, fmt.Errorf("fromYaml: %w", err)
	}
	return m, nil
}

// tpl adds the text as a template of the same set (so it sees the same functions) and runs it.
// werf names it tpl-<adler32>; naming it after the file it was read from makes errors point there.
func (r *renderer) tpl(content string, data interface{}) (string, error) {
	paths := r.sources[content]
	name := fmt.Sprintf("tpl-%d", adler32.Checksum([]byte(content)))
	if len(paths) > 0 {
		name = paths[0]
	}
	if _, err := r.tmpl.New(name).Parse(content); err != nil {
		return "", err
	}
	var out bytes.Buffer
	if err := r.tmpl.ExecuteTemplate(&out, name, data); err != nil {
		return "", err
	}
	for _, path := range paths {
		r.included[path] = append(r.included[path], out.String())
	}
	return out.String(), nil
}

// env is werf's: an optional default, and under giterminism only names werf-giterminism.yaml
// allows, and an unset variable without a default is an error.
func (r *renderer) env(value interface{}, args ...string) (string, error) {
	if len(args) > 1 {
		return "", errors.New("env: more than 1 optional argument prohibited")
	}
	name := fmt.Sprint(value)
	r.envNames[name] = true
	// werf stops at the first name giterminism refuses; recording it and going on reports them all.
	if r.giterminism != nil && !r.giterminism.envAllowed(name) {
		r.deniedEnv[name] = true
	}
	val, found := os.LookupEnv(name)
	if (!found || val == "") && len(args) == 1 {
		return args[0], nil
	}
	if !found && r.giterminism != nil {
		return "", fmt.Errorf("the environment variable %q must be set or default must be provided", name)
	}
	return val, nil
}

// files is werf's .Files: paths relative to the project root, contents as strings.
type files struct{ r *renderer }

func (f files) Get(rel string) (string, error) {
	full, err := f.r.inside(rel)
	if err != nil {
		return "", fmt.Errorf("{{ .Files.Get %q }}: %w", rel, err)
	}
	data, err := os.ReadFile(full)
	if err != nil {
		return "", fmt.Errorf("{{ .Files.Get %q }}: %w", rel, err)
	}
	f.r.remember(rel, string(data))
	return string(data), nil
}

// Glob is werf's for the patterns filepath.Match understands; werf matches with doublestar, so
// "**" and "{a,b}" are refused here rather than matched differently.
func (f files) Glob(pattern string) (map[string]interface{}, error) {
	if strings.Contains(pattern, "**") || strings.ContainsAny(pattern, "{}") {
		return nil, fmt.Errorf("{{ .Files.Glob %q }}: ** and {} are not supported by this renderer", pattern)
	}
	if _, err := f.r.inside(pattern); err != nil {
		return nil, fmt.Errorf("{{ .Files.Glob %q }}: %w", pattern, err)
	}
	matches, err := filepath.Glob(filepath.Join(f.r.root, filepath.FromSlash(pattern)))
	if err != nil {
		return nil, fmt.Errorf("{{ .Files.Glob %q }}: %w", pattern, err)
	}
	result := map[string]interface{}{}
	for _, full := range matches {
		if info, err := os.Stat(full); err != nil || !info.Mode().IsRegular() {
			continue
		}
		data, err := os.ReadFile(full)
		if err != nil {
			return nil, fmt.Errorf("{{ .Files.Glob %q }}: %w", pattern, err)
		}
		rel, _ := filepath.Rel(f.r.root, full)
		rel = filepath.ToSlash(rel)
		f.r.remember(rel, string(data))
		result[rel] = string(data)
	}
	if len(result) == 0 {
		return nil, fmt.Errorf("{{ .Files.Glob %q }}: no matches found", pattern)
	}
	return result, nil
}

func (r *renderer) remember(rel, content string) {
	for _, known := range r.sources[content] {
		if known == rel {
			return
		}
	}
	r.sources[content] = append(r.sources[content], rel)
}

// inside resolves a project-relative path; werf reads nothing outside the project.
func (r *renderer) inside(rel string) (string, error) {
	clean := filepath.Clean(filepath.FromSlash(rel))
	if filepath.IsAbs(clean) || clean == ".." || strings.HasPrefix(clean, ".."+string(filepath.Separator)) {
		return "", errors.New("the path is outside the project directory")
	}
	return filepath.Join(r.root, clean), nil
}
