# registry.k8s.io/pause: the pod sandbox. pause.c compiled with gcc -static (about 700 KB)
# on an empty root filesystem; runs as 65535 like Kubernetes' own pause image.
BASE=empty
ENTRYPOINT=(/pause)
USER_ID=65535:65535

populate() {
  gcc -static -Os -s -Wall -Wextra -Werror -DVERSION="\"$TAG\"" -o "$ROOTFS/pause" "$RECIPE_DIR/pause.c"
  chmod 0755 "$ROOTFS/pause"
}
