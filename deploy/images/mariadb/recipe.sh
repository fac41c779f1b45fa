# docker.io/library/mariadb: Debian bookworm's MariaDB packages. Entrypoint mariadbd with no
# arguments: the operator passes its own options (and initialises the data directory with
# mariadb-install-db). Runs as mysql, uid/gid 999 like the docker-library image.
BASE=debian
ENTRYPOINT=(mariadbd)
USER_ID=999:999
WORKDIR=/var/lib/mysql
PORTS=(3306/tcp)
ENV=(LANG=C.UTF-8)

pre_install() {
  # Fixed ids before the package's postinst creates the user with whatever id is free.
  in_chroot "$ROOTFS" groupadd --system --gid 999 mysql
  in_chroot "$ROOTFS" useradd --system --uid 999 --gid 999 --home-dir /var/lib/mysql \
    --no-create-home --shell /usr/sbin/nologin mysql
}

populate() {
  local v
  v="$(in_chroot "$ROOTFS" dpkg-query -W -f='${Version}' mariadb-server)"
  [[ "$v" == 1:"$TAG".* ]] || die "mariadb-server is $v, but the image is tagged $TAG"
  log "$NAME: mariadb-server $v"
  # The postinst initialised a data directory; the operator makes its own on the volume.
  rm -rf "$ROOTFS"/var/lib/mysql/*
  install -d -m 0755 -o 999 -g 999 "$ROOTFS/var/lib/mysql" "$ROOTFS/run/mysqld"
  # As the docker-library image does: listen on every address, no DNS lookups of clients.
  sed -i 's/^\(bind-address\)/#\1/' "$ROOTFS/etc/mysql/mariadb.conf.d/50-server.cnf"
  install -m 0644 "$RECIPE_DIR/05-container.cnf" "$ROOTFS/etc/mysql/mariadb.conf.d/05-container.cnf"
}
