// Copyright (c) 2026 Flant JSC
// SPDX-License-Identifier: Apache-2.0

package main

// The rendered werf.yaml as werf reads it: YAML documents split on "---" lines (werf's splitContent
// also accepts trailing blanks and a comment after the dashes), documents of only comments skipped,
// each parsed strictly (yaml.v2 UnmarshalStrict: a duplicated key is an error), then read as the
// meta document (project) or an image.

import (
	"fmt"
	"regexp"
	"strings"

	yaml "go.yaml.in/yaml/v2"
)

var separator = regexp.MustCompile(`^---[ \t\r]*(#.*)?$`)

type document struct {
	Index  int // 1-based among non-empty documents, as reported
	Line   int // 1-based line of the render where the document starts
	Text   string
	Fields map[string]interface{}
}

func (d *document) where() string {
	return fmt.Sprintf("document %d (render line %d)", d.Index, d.Line)
}

func splitDocuments(render string) []*document {
	var docs []*document
	var lines []string
	start := 1
	flush := func() {
		text := strings.Join(lines, "\n")
		if !onlyComments(text) {
			docs = append(docs, &document{Index: len(docs) + 1, Line: start, Text: text})
		}
	}
	for i, line := range strings.Split(render, "\n") {
		if separator.MatchString(line) {
			flush()
			lines, start = nil, i+2
			continue
		}
		lines = append(lines, line)
	}
	flush()
	return docs
}

func onlyComments(text string) bool {
	for _, line := range strings.Split(text, "\n") {
		line = strings.TrimSpace(line)
		if line != "" && !strings.HasPrefix(line, "#") {
			return false
		}
	}
	return true
}

// parseDocuments fills Fields of every document, or returns one error per unparsable document.
func parseDocuments(docs []*document) []string {
	var problems []string
	for _, d := range docs {
		d.Fields = map[string]interface{}{}
		if err := yaml.UnmarshalStrict([]byte(d.Text), &d.Fields); err != nil {
			problems = append(problems, fmt.Sprintf("%s does not parse: %v", d.where(), err))
		}
	}
	return problems
}

type image struct {
	Name      string
	Doc       *document
	Final     bool
	From      string
	FromImage string
	Imports   []string // import[].image
	DependsOn []dependency
	Mounts    []mount
}

type dependency struct {
	Image      string
	TargetEnvs []string // imports[].targetEnv
}

type mount struct{ From, FromPath string }

func (i *image) String() string { return fmt.Sprintf("image %q (%s)", i.Name, i.Doc.where()) }

// readImage reads the fields the graph check needs; a field of the wrong type is a problem.
func readImage(d *document) (*image, []string) {
	r := fieldReader{where: d.where()}
	img := &image{Doc: d, Final: true}
	img.Name = r.str(d.Fields, "image")
	if final, ok := d.Fields["final"]; ok {
		b, isBool := final.(bool)
		img.Final = b
		if !isBool {
			r.fail("final is %v, not a boolean", final)
		}
	}
	img.From = r.str(d.Fields, "from")
	img.FromImage = r.str(d.Fields, "fromImage")
	for i, item := range r.list(d.Fields, "import") {
		img.Imports = append(img.Imports, r.str(r.mapping(item, "import", i), "image"))
	}
	for i, item := range r.list(d.Fields, "dependencies") {
		m := r.mapping(item, "dependencies", i)
		dep := dependency{Image: r.str(m, "image")}
		for j, imp := range r.list(m, "imports") {
			dep.TargetEnvs = append(dep.TargetEnvs, r.str(r.mapping(imp, "dependencies[].imports", j), "targetEnv"))
		}
		img.DependsOn = append(img.DependsOn, dep)
	}
	for i, item := range r.list(d.Fields, "mount") {
		m := r.mapping(item, "mount", i)
		img.Mounts = append(img.Mounts, mount{From: r.str(m, "from"), FromPath: r.str(m, "fromPath")})
	}
	return img, r.problems
}

type fieldReader struct {
	where    string
	problems []string
}

func (r *fieldReader) fail(format string, args ...interface{}) {
	r.problems = append(r.problems, r.where+": "+fmt.Sprintf(format, args...))
}

func (r *fieldReader) str(m map[string]interface{}, key string) string {
	v, ok := m[key]
	if !ok || v == nil {
		return ""
	}
	s, isString := v.(string)
	if !isString {
		r.fail("%s is %v, not a string", key, v)
	}
	return s
}

func (r *fieldReader) list(m map[string]interface{}, key string) []interface{} {
	v, ok := m[key]
	if !ok || v == nil {
		return nil
	}
	l, isList := v.([]interface{})
	if !isList {
		r.fail("%s is not a list", key)
	}
	return l
}

// mapping turns a yaml.v2 nested map (interface{} keys) into one with string keys.
func (r *fieldReader) mapping(v interface{}, list string, index int) map[string]interface{} {
	out := map[string]interface{}{}
	m, ok := v.(map[interface{}]interface{})
	if !ok {
		r.fail("%s[%d] is not a mapping", list, index)
		return out
	}
	for k, val := range m {
		out[fmt.Sprint(k)] = val
	}
	return out
}
