# docker.io/apache/kafka: Apache Kafka (KRaft) from Maven Central jars (pom.xml, resolved by
# scripts/install-kafka-jars.sh with mvn dependency:copy-dependencies) on Debian's
# openjdk-17-jre-headless. Layout like the official image: /opt/kafka/{bin,config,libs}, user
# kafka = uid/gid 1000 (the official image's appuser is 1000 too), data in /var/lib/kafka/data.
# Also the recipe of kafka-previous (KAFKA_PREVIOUS_IMAGE): the same pom and files with an
# older Kafka release, the one the upgrade e2e starts from.
BASE=debian
CMD=(/opt/kafka/bin/kafka-server-start /opt/kafka/config/server.properties)
USER_ID=1000:1000
WORKDIR=/opt/kafka
PORTS=(9092/tcp 9093/tcp 9404/tcp)
ENV=(LANG=C.UTF-8 KAFKA_HOME=/opt/kafka)
IMAGE_PATH=/opt/kafka/bin:/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin

KAFKA_LIBS=""
TOOLS=() # "name main-class" of each launcher in /opt/kafka/bin, resolved by prepare

prepare() {
  local pom="$RECIPE_DIR/pom.xml" v
  v="$(sed -n 's:.*<kafka.version>\(.*\)</kafka.version>.*:\1:p' "$pom")"
  if [ "$ID" = kafka ]; then
    [ "$v" = "$TAG" ] || die "pom.xml has Kafka $v, but the image is tagged $TAG"
  else
    [ "$TAG" != "$v" ] && [ "$(printf '%s\n' "$TAG" "$v" | sort -V | head -n1)" = "$TAG" ] ||
      die "$NAME must be an older Kafka than pom.xml's $v"
  fi
  # The same jars the Kafka operator's tests run, resolved once into the cache.
  KAFKA_LIBS="$("$ROOT/scripts/install-kafka-jars.sh" "$TAG")"
  # Every launcher's main class must be in the jars: the first of its classes that is (a
  # tool that moved between releases lists both).
  local classes c jar name found
  classes="$(for jar in "$KAFKA_LIBS"/*.jar; do unzip -Z1 "$jar"; done)"
  grep -qxF kafka/Kafka.class <<<"$classes" || die "Kafka $TAG jars lack kafka.Kafka"
  TOOLS=()
  while read -r name rest; do
    [ -n "$name" ] || continue
    found=""
    for c in $rest; do
      grep -qxF "$(echo "$c" | tr . /).class" <<<"$classes" && { found="$c"; break; }
    done
    [ -n "$found" ] || die "Kafka $TAG jars lack every class of $name: $rest (deploy/images/kafka/tools)"
    TOOLS+=("$name $found")
  done < <(sed -e 's/#.*//' "$RECIPE_DIR/tools")
}

pre_install() {
  in_chroot "$ROOTFS" groupadd --gid 1000 kafka
  in_chroot "$ROOTFS" useradd --uid 1000 --gid 1000 --home-dir /opt/kafka --no-create-home \
    --shell /usr/sbin/nologin kafka
}

populate() {
  local k="$ROOTFS/opt/kafka" tool name class
  install -d -m 0755 "$k/bin" "$k/config" "$k/libs" "$k/agent"
  install -m 0644 "$KAFKA_LIBS"/*.jar "$k/libs/"
  # The Prometheus JMX exporter, off Kafka's classpath (kafka-server-start loads it).
  install -m 0644 "$KAFKA_LIBS/../agent/jmx_prometheus_javaagent.jar" "$k/agent/"
  install -m 0755 "$RECIPE_DIR/kafka-run-class" "$RECIPE_DIR/kafka-server-start" "$k/bin/"
  ln -s kafka-run-class "$k/bin/kafka-run-class.sh"
  ln -s kafka-server-start "$k/bin/kafka-server-start.sh"
  for tool in "${TOOLS[@]}"; do
    read -r name class <<<"$tool"
    printf '#!/bin/sh\nexec "${KAFKA_HOME:-/opt/kafka}/bin/kafka-run-class" %s "$@"\n' "$class" > "$k/bin/$name"
    chmod 0755 "$k/bin/$name"
    ln -s "$name" "$k/bin/$name.sh"
  done
  install -m 0644 "$RECIPE_DIR/server.properties" "$RECIPE_DIR/log4j2.properties" \
    "$RECIPE_DIR/tools-log4j2.properties" "$RECIPE_DIR/jmx-exporter.yaml" "$k/config/"
  install -d -m 0755 -o 1000 -g 1000 "$ROOTFS/var/lib/kafka" "$ROOTFS/var/lib/kafka/data"
  # The JVM must start in the image (it needs /proc: in_chroot mounts it).
  in_chroot "$ROOTFS" java -version 2>&1 | head -n1 >&2
}
