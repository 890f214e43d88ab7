#!/usr/bin/env bash
# Copyright (c) 2026 Flant JSC
# SPDX-License-Identifier: Apache-2.0
# Credentials of the node's daemons, signed by the control plane's CA: the kubelet as
# system:node:<name> (group system:nodes, what the Node authorizer and NodeRestriction expect) with a
# serving certificate for its address, and kube-proxy as system:kube-proxy.
#   node-certs.sh <node dir> <API server port inside the node>
set -euo pipefail
dir="$1"; port="$2"
source "$dir/node.env"
pki="$dir/cluster/pki"; config="$dir/config"
q() { openssl "$@" 2>/dev/null; }
sign() { # name subject extended-usage [san]
  q req -newkey rsa:2048 -nodes -subj "$2" -keyout "$config/$1.key" -out "$config/$1.csr"
  { echo "basicConstraints=CA:FALSE"; echo "keyUsage=digitalSignature,keyEncipherment"
    echo "extendedKeyUsage=$3"; [ -n "${4:-}" ] && echo "subjectAltName=$4"; } > "$config/$1.ext"
  q x509 -req -in "$config/$1.csr" -CA "$pki/ca.crt" -CAkey "$pki/ca.key" -CAcreateserial -days 3650 \
    -extfile "$config/$1.ext" -out "$config/$1.crt"
}
kubeconfig() { # name
  cat > "$config/$1.kubeconfig" <<KC
apiVersion: v1
kind: Config
clusters:
- name: testbed
  cluster: {server: "https://127.0.0.1:$port", certificate-authority: "$pki/ca.crt"}
users:
- name: $1
  user: {client-certificate: "$config/$1.crt", client-key: "$config/$1.key"}
contexts:
- name: testbed
  context: {cluster: testbed, user: $1}
current-context: testbed
KC
}
sign kubelet "/O=system:nodes/CN=system:node:$NODE_NAME" clientAuth
sign kubelet-serving "/CN=$NODE_NAME" serverAuth "IP:$NODE_IP,DNS:$NODE_NAME"
sign kube-proxy "/CN=system:kube-proxy" clientAuth
kubeconfig kubelet; kubeconfig kube-proxy
