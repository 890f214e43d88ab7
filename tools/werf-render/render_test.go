// Copyright (c) 2026 Flant JSC
// SPDX-License-Identifier: Apache-2.0

package main

import (
	"os"
	"path/filepath"
	"strings"
	"testing"
)

const digest = "@sha256:0123456789abcdef0123456789abcdef0123456789abcdef0123456789abcdef"

// minimalWerf is the smallest werf.yaml every graph check accepts.
const minimalWerf = "project: p\nconfigVersion: 1\n---\n" +
	"image: images-digests\nfinal: false\nfrom: base" + digest + "\n---\n" +
	"image: bundle\nfrom: base" + digest + "\nimport:\n- image: images-digests\n  add: /d\n  to: /d\n  after: setup\n---\n" +
	"image: release-channel-version\nfrom: base" + digest + "\n"

func writeRepo(t *testing.T, files map[string]string) string {
	t.Helper()
	root := t.TempDir()
	for name, text := range files {
		full := filepath.Join(root, filepath.FromSlash(name))
		if err := os.MkdirAll(filepath.Dir(full), 0o755); err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(full, []byte(text), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	return root
}

// outcome is everything checkRepo reports, as one text to search.
func outcome(t *testing.T, opts options) string {
	t.Helper()
	summary, problems, err := checkRepo(opts)
	if err != nil {
		return "error: " + err.Error()
	}
	if len(problems) > 0 {
		return "problems:\n" + strings.Join(problems, "\n")
	}
	return "ok: " + summary
}

func TestMinimalWerfYamlPasses(t *testing.T) {
	root := writeRepo(t, map[string]string{"werf.yaml": minimalWerf})
	got := outcome(t, options{root: root})
	if !strings.HasPrefix(got, "ok: werf.yaml: 4 documents, 3 images, 2 final (0 in images-digests") {
		t.Fatalf("got %s", got)
	}
}

func TestRenderFailures(t *testing.T) {
	cases := []struct{ name, werf, want string }{
		{"unknown function", `{{ include "x" . }}`, `function "include" not defined`},
		{"glob without match", `{{ .Files.Glob "nothing/*" }}`, `{{ .Files.Glob "nothing/*" }}: no matches found`},
		{"doublestar glob", `{{ .Files.Glob "images/**" }}`, `** and {} are not supported`},
		{"file outside the project", `{{ .Files.Get "../etc/passwd" }}`, "outside the project directory"},
		{"missing file", `{{ .Files.Get "absent.yml" }}`, `{{ .Files.Get "absent.yml" }}`},
		{"bad yaml in fromYaml", `{{ "a: [" | fromYaml }}`, "fromYaml: yaml:"},
		{"env with two defaults", `{{ env "A" "b" "c" }}`, "more than 1 optional argument prohibited"},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			root := writeRepo(t, map[string]string{"werf.yaml": minimalWerf + c.werf})
			if got := outcome(t, options{root: root, loose: true}); !strings.Contains(got, c.want) {
				t.Fatalf("want %q in:\n%s", c.want, got)
			}
		})
	}
}

func TestTplErrorNamesTheIncludedFile(t *testing.T) {
	root := writeRepo(t, map[string]string{
		"werf.yaml":              minimalWerf + `{{ range $p, $c := .Files.Glob "images/*/werf.inc.yaml" }}{{ tpl $c (dict) }}{{ end }}`,
		"images/a/werf.inc.yaml": "---\nimage: a\nfrom: {{ index .Missing \"x\" }}\n",
	})
	got := outcome(t, options{root: root, loose: true})
	if !strings.Contains(got, "images/a/werf.inc.yaml:3") {
		t.Fatalf("the error should point into images/a/werf.inc.yaml line 3:\n%s", got)
	}
}

func TestEnvFollowsGiterminism(t *testing.T) {
	t.Setenv("WERF_RENDER_TEST_SET", "v1")
	werf := minimalWerf + "# workingDir: {{ env \"WERF_RENDER_TEST_UNSET\" \"dev\" }}-{{ env \"WERF_RENDER_TEST_SET\" }}\n"
	allowAll := "giterminismConfigVersion: 1\nconfig:\n  goTemplateRendering:\n    allowEnvVariables: [/WERF_RENDER_TEST_.+/]\n"
	cases := []struct {
		name  string
		files map[string]string
		loose bool
		want  string
	}{
		{"loose reads the default and the value", nil, true, "ok: "},
		{"no werf-giterminism.yaml allows no env", nil, false,
			`env name "WERF_RENDER_TEST_SET" is not allowed by giterminism`},
		{"a /regexp/ pattern allows both", map[string]string{giterminismFile: allowAll}, false,
			"giterminism ok (env read: WERF_RENDER_TEST_SET, WERF_RENDER_TEST_UNSET)"},
		{"a literal allows only its name", map[string]string{giterminismFile: strings.Replace(allowAll,
			"/WERF_RENDER_TEST_.+/", "WERF_RENDER_TEST_UNSET", 1)}, false, `env name "WERF_RENDER_TEST_SET" is not allowed`},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			files := map[string]string{"werf.yaml": werf}
			for k, v := range c.files {
				files[k] = v
			}
			opts := options{root: writeRepo(t, files), loose: c.loose, dump: filepath.Join(t.TempDir(), "render")}
			if got := outcome(t, opts); !strings.Contains(got, c.want) {
				t.Fatalf("want %q in:\n%s", c.want, got)
			}
			if c.loose {
				render, _ := os.ReadFile(opts.dump)
				if !strings.Contains(string(render), "workingDir: dev-v1") {
					t.Fatalf("env rendered wrong:\n%s", render)
				}
			}
		})
	}
}

func TestMountFromPathFollowsGiterminism(t *testing.T) {
	werf := minimalWerf + "mount:\n- fromPath: ~/.cargo/registry\n  to: /root/.cargo/registry\n"
	denied := outcome(t, options{root: writeRepo(t, map[string]string{"werf.yaml": werf})})
	if !strings.Contains(denied, "mount fromPath ~/.cargo/registry is not allowed by giterminism") {
		t.Fatalf("got %s", denied)
	}
	allowed := outcome(t, options{root: writeRepo(t, map[string]string{"werf.yaml": werf, giterminismFile: "" +
		"giterminismConfigVersion: 1\nconfig:\n  stapel:\n    mount:\n      allowFromPaths: [~/.cargo/registry]\n"})})
	if !strings.HasPrefix(allowed, "ok: ") {
		t.Fatalf("got %s", allowed)
	}
}

func TestSplitDocumentsLikeWerf(t *testing.T) {
	render := "a: 1\n--- # comment\n# only a comment\n---  \nb: |\n  ----\n  x\n----\nc: 3\n---\n"
	docs := splitDocuments(render)
	if len(docs) != 2 {
		t.Fatalf("want 2 documents, got %d: %+v", len(docs), docs)
	}
	if docs[0].Text != "a: 1" || docs[1].Line != 5 || !strings.Contains(docs[1].Text, "----\nc: 3") {
		t.Fatalf("documents split wrong: %q (line %d) / %q (line %d)", docs[0].Text, docs[0].Line, docs[1].Text, docs[1].Line)
	}
}

func TestDuplicateKeyIsAParseErrorWithTheDocumentIndex(t *testing.T) {
	root := writeRepo(t, map[string]string{"werf.yaml": minimalWerf + "---\nimage: x\nimage: y\n"})
	got := outcome(t, options{root: root, loose: true})
	if !strings.Contains(got, "document 5 (render line 19) does not parse") || !strings.Contains(got, "already set") {
		t.Fatalf("got %s", got)
	}
}

func TestGlobMatchLikeWerf(t *testing.T) {
	cases := []struct {
		pattern, path string
		want          bool
	}{
		{"**/*", "crates/a/src/lib.rs", true},
		{"**/*.rs", "crates/a/src/lib.rs", true},
		{"**/*.rs", "crates/a/src/declarations.tsv", false},
		{"Cargo.toml", "Cargo.toml", true},
		{"Cargo.toml", "crates/a/Cargo.toml", false},
		{"**/Cargo.toml", "crates/a/Cargo.toml", true},
		{"target", "target/release/x", true},
		{"*.yaml", "a/b.yaml", false},
	}
	for _, c := range cases {
		if got := globMatch(c.pattern, c.path); got != c.want {
			t.Errorf("globMatch(%q, %q) = %v, want %v", c.pattern, c.path, got, c.want)
		}
	}
}
