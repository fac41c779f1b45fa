# Certificates and kubeconfigs of the local cluster, made with openssl. Sourced by up.sh.
# One CA signs everything; each component gets the identity Kubernetes' default RBAC
# and the Node authorizer expect (CN = user, O = groups).

PKI="$CLUSTER_DIR/pki"

# cert NAME SUBJECT [SANS]: a key and a certificate signed by the cluster CA.
cert() {
  local name="$1" subject="$2" sans="${3:-}" ext="$PKI/$1.ext"
  openssl genrsa -out "$PKI/$name.key" 2048 2>/dev/null
  openssl req -new -key "$PKI/$name.key" -subj "$subject" -out "$PKI/$name.csr" 2>/dev/null
  {
    echo "basicConstraints=CA:FALSE"
    echo "keyUsage=critical,digitalSignature,keyEncipherment"
    if [ -n "$sans" ]; then
      echo "extendedKeyUsage=serverAuth,clientAuth"
      echo "subjectAltName=$sans"
    else
      echo "extendedKeyUsage=clientAuth"
    fi
  } > "$ext"
  openssl x509 -req -in "$PKI/$name.csr" -CA "$PKI/ca.crt" -CAkey "$PKI/ca.key" -CAcreateserial \
    -days 365 -sha256 -extfile "$ext" -out "$PKI/$name.crt" 2>/dev/null
  rm -f "$PKI/$name.csr" "$ext"
}

# kubeconfig NAME CERT: a kubeconfig for component NAME authenticating with CERT.
kubeconfig() {
  local file="$CLUSTER_DIR/$1.kubeconfig" cert="$2"
  local kc=(kubectl --kubeconfig "$file")
  "${kc[@]}" config set-cluster statecraft --server "https://$NODE_IP:$APISERVER_PORT" \
    --certificate-authority "$PKI/ca.crt" --embed-certs >/dev/null
  "${kc[@]}" config set-credentials "$1" --client-certificate "$PKI/$cert.crt" \
    --client-key "$PKI/$cert.key" --embed-certs >/dev/null
  "${kc[@]}" config set-context statecraft --cluster statecraft --user "$1" >/dev/null
  "${kc[@]}" config use-context statecraft >/dev/null
  chmod 600 "$file"
}

make_pki() {
  mkdir -p "$PKI"
  chmod 700 "$PKI"
  openssl genrsa -out "$PKI/ca.key" 2048 2>/dev/null
  openssl req -x509 -new -key "$PKI/ca.key" -subj "/CN=statecraft-local-ca" -days 365 -sha256 \
    -addext "basicConstraints=critical,CA:TRUE" -addext "keyUsage=critical,keyCertSign,cRLSign,digitalSignature" \
    -out "$PKI/ca.crt" 2>/dev/null

  cert apiserver "/CN=kube-apiserver" \
    "IP:$NODE_IP,IP:127.0.0.1,IP:$KUBERNETES_SERVICE_IP,DNS:localhost,DNS:kubernetes,DNS:kubernetes.default,DNS:kubernetes.default.svc,DNS:kubernetes.default.svc.$CLUSTER_DOMAIN"
  cert apiserver-kubelet-client "/O=system:masters/CN=kube-apiserver-kubelet-client"
  cert admin "/O=system:masters/CN=statecraft-admin"
  cert controller-manager "/CN=system:kube-controller-manager"
  cert scheduler "/CN=system:kube-scheduler"
  cert kube-proxy "/CN=system:kube-proxy"
  cert kubelet-client "/O=system:nodes/CN=system:node:$NODE_NAME"
  cert kubelet-serving "/CN=$NODE_NAME" "IP:$NODE_IP,DNS:$NODE_NAME"
  openssl genrsa -out "$PKI/sa.key" 2048 2>/dev/null
  openssl rsa -in "$PKI/sa.key" -pubout -out "$PKI/sa.pub" 2>/dev/null

  kubeconfig admin admin
  kubeconfig controller-manager controller-manager
  kubeconfig scheduler scheduler
  kubeconfig kube-proxy kube-proxy
  kubeconfig kubelet kubelet-client
}
