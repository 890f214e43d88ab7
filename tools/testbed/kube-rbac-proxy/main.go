// Copyright (c) 2026 Flant JSC
// SPDX-License-Identifier: Apache-2.0

// kube-rbac-proxy as Deckhouse's common image runs it, for the test bed's real node (no registry can
// serve that image here). It is the upstream project's authentication and authorization (a
// TokenReview, then a SubjectAccessReview per request, from github.com/brancz/kube-rbac-proxy/pkg) with
// the interface of Deckhouse's build of it, which the module's sidecars are written against:
//   - KUBE_RBAC_PROXY_CONFIG: YAML with `excludePaths` (served without authentication) and `upstreams`,
//     each `{upstream: <url>, path: <prefix>, authorization: {resourceAttributes: ...}}`; a request under
//     `path` goes to `upstream` with the prefix replaced by the upstream URL's path;
//   - --livez-path: answers 200 itself (the sidecar's own probes);
//   - --secure-listen-address, --tls-cert-file, --tls-private-key-file, --tls-cipher-suites;
//   - --v, --logtostderr and --stale-cache-interval are accepted; the stale cache (answers kept while the
//     API server is away) is not modelled: the test bed's API server stays up.
package main

import (
	"context"
	"crypto/tls"
	"flag"
	"fmt"
	"log"
	"net/http"
	"net/http/httputil"
	"net/url"
	"os"
	"path"
	"strings"
	"time"

	"github.com/brancz/kube-rbac-proxy/pkg/authn"
	"github.com/brancz/kube-rbac-proxy/pkg/authz"
	"github.com/brancz/kube-rbac-proxy/pkg/filters"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/rest"
	"sigs.k8s.io/yaml"
)

type upstream struct {
	Upstream      string       `json:"upstream"`
	Path          string       `json:"path"`
	Authorization *authz.Config `json:"authorization,omitempty"`
}

type config struct {
	ExcludePaths []string   `json:"excludePaths,omitempty"`
	Upstreams    []upstream `json:"upstreams,omitempty"`
}

func main() {
	listen := flag.String("secure-listen-address", "", "address:port to serve TLS on")
	certFile := flag.String("tls-cert-file", "", "serving certificate")
	keyFile := flag.String("tls-private-key-file", "", "serving key")
	ciphers := flag.String("tls-cipher-suites", "", "comma-separated cipher suite names")
	livez := flag.String("livez-path", "", "path answered 200 by the proxy itself")
	ignore := flag.String("ignore-paths", "", "comma-separated paths served without authentication")
	flag.Int("v", 0, "log verbosity (accepted)")
	flag.Bool("logtostderr", true, "log to stderr (accepted)")
	flag.Duration("stale-cache-interval", 0, "accepted; the stale cache is not modelled")
	flag.Parse()
	if *listen == "" {
		log.Fatal("--secure-listen-address is required")
	}

	var cfg config
	if err := yaml.Unmarshal([]byte(os.Getenv("KUBE_RBAC_PROXY_CONFIG")), &cfg); err != nil {
		log.Fatalf("KUBE_RBAC_PROXY_CONFIG: %v", err)
	}
	if *ignore != "" {
		cfg.ExcludePaths = append(cfg.ExcludePaths, strings.Split(*ignore, ",")...)
	}

	restConfig, err := rest.InClusterConfig()
	if err != nil {
		log.Fatalf("in-cluster config: %v", err)
	}
	client, err := kubernetes.NewForConfig(restConfig)
	if err != nil {
		log.Fatalf("client: %v", err)
	}
	authenticator, err := authn.NewDelegatingAuthenticator(client.AuthenticationV1(), &authn.AuthnConfig{
		X509: &authn.X509Config{}, Header: &authn.AuthnHeaderConfig{}, Token: &authn.TokenConfig{},
	})
	if err != nil {
		log.Fatalf("authenticator: %v", err)
	}
	go authenticator.Run(context.Background())
	authorizer, err := authz.NewSarAuthorizer(client.AuthorizationV1())
	if err != nil {
		log.Fatalf("authorizer: %v", err)
	}

	mux := http.NewServeMux()
	if *livez != "" {
		mux.HandleFunc(*livez, func(w http.ResponseWriter, _ *http.Request) { _, _ = w.Write([]byte("OK")) })
	}
	for _, u := range cfg.Upstreams {
		target, err := url.Parse(u.Upstream)
		if err != nil {
			log.Fatalf("upstream %q: %v", u.Upstream, err)
		}
		prefix := u.Path
		forward := &httputil.ReverseProxy{Rewrite: func(r *httputil.ProxyRequest) {
			r.Out.URL.Scheme, r.Out.URL.Host = target.Scheme, target.Host
			r.Out.URL.Path = target.Path + strings.TrimPrefix(r.In.URL.Path, prefix)
			r.Out.URL.RawPath = ""
		}}
		authorization := u.Authorization
		if authorization == nil {
			authorization = &authz.Config{}
		}
		guarded := filters.WithAuthentication(authenticator, nil,
			filters.WithAuthorization(authorizer, authorization, forward.ServeHTTP))
		mux.HandleFunc(prefix, func(w http.ResponseWriter, r *http.Request) {
			if excluded(cfg.ExcludePaths, r.URL.Path) {
				forward.ServeHTTP(w, r)
				return
			}
			guarded(w, r)
		})
		log.Printf("upstream %s serves %s", u.Upstream, prefix)
	}

	tlsConfig := &tls.Config{MinVersion: tls.VersionTLS12}
	if *ciphers != "" {
		tlsConfig.CipherSuites, err = cipherSuites(*ciphers)
		if err != nil {
			log.Fatal(err)
		}
	}
	server := &http.Server{Addr: *listen, Handler: mux, TLSConfig: tlsConfig, ReadHeaderTimeout: 10 * time.Second}
	log.Printf("listening on %s", *listen)
	log.Fatal(server.ListenAndServeTLS(*certFile, *keyFile))
}

func excluded(patterns []string, p string) bool {
	for _, pattern := range patterns {
		if ok, _ := path.Match(pattern, p); ok {
			return true
		}
	}
	return false
}

func cipherSuites(names string) ([]uint16, error) {
	known := map[string]uint16{}
	for _, s := range append(tls.CipherSuites(), tls.InsecureCipherSuites()...) {
		known[s.Name] = s.ID
	}
	var ids []uint16
	for _, name := range strings.Split(names, ",") {
		id, ok := known[strings.TrimSpace(name)]
		if !ok {
			return nil, fmt.Errorf("unknown TLS cipher suite %q", name)
		}
		ids = append(ids, id)
	}
	return ids, nil
}
