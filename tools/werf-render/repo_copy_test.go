// Copyright (c) 2026 Flant JSC
// SPDX-License-Identifier: Apache-2.0

package main

// The self-test on the repository's own build files: a copy of werf.yaml, build/ and images/*/
// {werf.inc.yaml,mount-points.yaml} passes, and each deliberate break of that copy fails with the
// message that names it. WERF_RENDER_REPO overrides the repository (default: two levels up).

import (
	"io/fs"
	"os"
	"path/filepath"
	"strings"
	"testing"
)

func repoRoot(t *testing.T) string {
	if root := os.Getenv("WERF_RENDER_REPO"); root != "" {
		return root
	}
	root, err := filepath.Abs(filepath.Join("..", ".."))
	if err != nil {
		t.Fatal(err)
	}
	return root
}

// copyBuildFiles copies what werf.yaml reads, not images/gpu-artifact's sources or target/.
func copyBuildFiles(t *testing.T, from string) string {
	t.Helper()
	to := t.TempDir()
	var rel []string
	for _, pattern := range []string{"werf.yaml", giterminismFile, "images/*/werf.inc.yaml", "images/*/mount-points.yaml"} {
		matches, _ := filepath.Glob(filepath.Join(from, pattern))
		for _, m := range matches {
			r, _ := filepath.Rel(from, m)
			rel = append(rel, r)
		}
	}
	err := filepath.WalkDir(filepath.Join(from, "build"), func(p string, d fs.DirEntry, err error) error {
		if err == nil && d.Type().IsRegular() {
			r, _ := filepath.Rel(from, p)
			rel = append(rel, r)
		}
		return err
	})
	if err != nil {
		t.Fatal(err)
	}
	for _, r := range rel {
		data, err := os.ReadFile(filepath.Join(from, r))
		if err != nil {
			t.Fatal(err)
		}
		write(t, to, r, string(data))
	}
	return to
}

func write(t *testing.T, root, rel, text string) {
	t.Helper()
	full := filepath.Join(root, filepath.FromSlash(rel))
	if err := os.MkdirAll(filepath.Dir(full), 0o755); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(full, []byte(text), 0o644); err != nil {
		t.Fatal(err)
	}
}

func read(t *testing.T, root, rel string) string {
	t.Helper()
	data, err := os.ReadFile(filepath.Join(root, filepath.FromSlash(rel)))
	if err != nil {
		t.Fatal(err)
	}
	return string(data)
}

func appendTo(rel, text string) func(*testing.T, string) {
	return func(t *testing.T, root string) { write(t, root, rel, read(t, root, rel)+text) }
}

// replaceIn fails the test when the text to break is gone, so a changed werf.yaml cannot turn a
// break into a no-op that "passes" by failing for another reason.
func replaceIn(rel, old, new string) func(*testing.T, string) {
	return func(t *testing.T, root string) {
		text := read(t, root, rel)
		if !strings.Contains(text, old) {
			t.Fatalf("the break needs %q in %s; update this test with the file", old, rel)
		}
		write(t, root, rel, strings.Replace(text, old, new, 1))
	}
}

func newFile(rel, text string) func(*testing.T, string) {
	return func(t *testing.T, root string) { write(t, root, rel, text) }
}

func TestTheRepositoryCopyPasses(t *testing.T) {
	root := copyBuildFiles(t, repoRoot(t))
	if got := outcome(t, options{root: root, loose: true}); !strings.HasPrefix(got, "ok: ") {
		t.Fatalf("the unbroken copy must pass before any break means something:\n%s", got)
	}
}

func TestEachBreakOfTheRepositoryCopyFails(t *testing.T) {
	const werf = "werf.yaml"
	const pinnedFrom = "from: registry.example/base" + digest + "\n"
	cases := []struct {
		name   string
		breaks []func(*testing.T, string)
		want   string
	}{
		{"import of an undefined image",
			[]func(*testing.T, string){replaceIn("images/gpu-controller/werf.inc.yaml", "- image: gpu-artifact", "- image: gpu-artefact")},
			`imports image "gpu-artefact", which no document defines`},
		{"fromImage of an undefined image",
			[]func(*testing.T, string){appendTo(werf, "---\nimage: orphan\nfinal: false\nfromImage: builder/altt\n")},
			`fromImage "builder/altt", which no document defines`},
		{"dependency on an undefined image",
			[]func(*testing.T, string){appendTo(werf, "---\nimage: needy\nfinal: false\nfromImage: builder/alt\n"+
				"dependencies:\n- image: ghost\n  imports:\n  - {type: ImageDigest, targetEnv: GHOST}\n")},
			`depends on image "ghost", which no document defines`},
		{"from by tag", []func(*testing.T, string){appendTo(werf, "---\nimage: tagged\nfinal: false\nfrom: alpine:3.20\n")},
			`from "alpine:3.20" is not pinned by digest`},
		{"an image defined twice", []func(*testing.T, string){appendTo(werf, "---\nimage: builder/alt\nfinal: false\n"+pinnedFrom)},
			`image "builder/alt" is defined twice`},
		{"a final image missing from images-digests",
			[]func(*testing.T, string){appendTo(werf, "---\nimage: stray\n"+pinnedFrom)},
			`final image "stray"`},
		{"a werf.inc.yaml defining another name",
			[]func(*testing.T, string){newFile("images/extra-tool/werf.inc.yaml", "---\nimage: extra\nfinal: false\n"+pinnedFrom)},
			`images/extra-tool/werf.inc.yaml defines no image named "extra-tool" (it defines: extra)`},
		{"mount-points.yaml whose image does not import them",
			[]func(*testing.T, string){
				newFile("images/extra-tool/werf.inc.yaml", "---\nimage: {{ .ImageName }}\nfinal: false\n"+pinnedFrom),
				newFile("images/extra-tool/mount-points.yaml", "dirs:\n- /var/run/extra\n"),
			},
			`does not import "extra-tool-mount-points"`},
		{"mount-points image renamed",
			[]func(*testing.T, string){replaceIn(werf, "image: {{ $name }}-mount-points", "image: {{ $name }}-mounts")},
			`images/gpu-handler/mount-points.yaml has no image "gpu-handler-mount-points" in the render`},
		{"mount-points.yaml with a relative path",
			[]func(*testing.T, string){appendTo("images/gpu-handler/mount-points.yaml", "files:\n- etc/x\n")},
			`images/gpu-handler/mount-points.yaml: "etc/x" is not a clean absolute path`},
		{"images needing each other",
			[]func(*testing.T, string){appendTo(werf, "---\nimage: loop-a\nfinal: false\nfromImage: loop-b\n"+
				"---\nimage: loop-b\nfinal: false\nfromImage: loop-a\n")},
			"images need each other in a cycle: loop-a -> loop-b -> loop-a"},
		{"a missing template key", []func(*testing.T, string){appendTo(werf, "---\nimage: nokey\nfinal: false\nfrom: {{ .Commit }}\n")},
			`the render reads a missing key ("<no value>")`},
		{"an unknown template function", []func(*testing.T, string){appendTo(werf, `{{ frobnicate "x" }}`)},
			`function "frobnicate" not defined`},
		{"a source file outside the stage dependencies",
			[]func(*testing.T, string){
				newFile("images/gpu-artifact/crates/dra-cel/src/check/declarations.tsv", "name\ttype\n"),
				replaceIn("images/gpu-artifact/werf.inc.yaml", `setup: ["**/*"]`, `setup: ["**/*.rs"]`),
			},
			"crates/dra-cel/src/check/declarations.tsv matches no stageDependencies pattern"},
		{"a document that is not YAML", []func(*testing.T, string){appendTo(werf, "---\nimage: broken\n  from: [\n")},
			") does not parse: yaml: line 2: mapping values are not allowed"},
	}
	from := repoRoot(t)
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			root := copyBuildFiles(t, from)
			for _, b := range c.breaks {
				b(t, root)
			}
			if got := outcome(t, options{root: root, loose: true}); !strings.Contains(got, c.want) {
				t.Fatalf("want %q in:\n%s", c.want, got)
			}
		})
	}
}

func TestTheRepositoryCopyWithoutGiterminismAllowsNoEnv(t *testing.T) {
	root := copyBuildFiles(t, repoRoot(t))
	write(t, root, giterminismFile, "giterminismConfigVersion: 1\n")
	if got := outcome(t, options{root: root}); !strings.Contains(got, "not allowed by giterminism") {
		t.Fatalf("werf.yaml reads env or mounts a host path, which an empty %s must refuse:\n%s", giterminismFile, got)
	}
}
