#!/usr/bin/env bash
# Resolves the Kafka jars of deploy/images/kafka/pom.xml (broker/controller, tools, log4j 2)
# from Maven Central into $CACHE/kafka/<version>-<hash of the pom>/libs, the Prometheus JMX
# exporter's javaagent into .../agent/jmx_prometheus_javaagent.jar (off Kafka's classpath),
# and points $CACHE/kafka/current at that directory. The Kafka operator's integration tests start real
# Kafka processes from `$CACHE/kafka/current/libs` (`java -cp 'libs/*' kafka.Kafka ...`); the
# image recipe copies the same jars. Idempotent: a `.done` marker records a complete resolve,
# so a second run does nothing but print the path.
#
#   scripts/install-kafka-jars.sh           the pom's version (and the `current` link)
#   scripts/install-kafka-jars.sh 4.3.2     another release with the same pom (the image the
#                                           upgrade e2e starts from); `current` stays
source "$(dirname "$0")/lib.sh"

POM="$ROOT/deploy/images/kafka/pom.xml"
pom_version="$(sed -n 's:.*<kafka.version>\(.*\)</kafka.version>.*:\1:p' "$POM")"
[ -n "$pom_version" ] || { echo "no <kafka.version> in $POM" >&2; exit 1; }
version="${1:-$pom_version}"
[[ "$version" =~ ^[0-9]+\.[0-9]+\.[0-9]+$ ]] || { echo "not a Kafka version: $version" >&2; exit 1; }
dir="$CACHE/kafka/$version-$(inputs_hash "$POM")"

if [ -f "$dir/.done" ]; then
  log "Kafka $version jars: up to date in $dir/libs"
else
  command -v mvn >/dev/null || { echo "mvn not found: install Maven (Debian: maven) first" >&2; exit 1; }
  command -v java >/dev/null || { echo "java not found: install a JRE 17 (Debian: openjdk-17-jre-headless) first" >&2; exit 1; }
  log "resolving Kafka $version jars from Maven Central (cold: ~1 min)"
  rm -rf "$dir"
  mkdir -p "$dir"
  # stdout is the path alone: what mvn says goes to stderr.
  mvn -B -q -Dstyle.color=never -f "$POM" -Dkafka.version="$version" dependency:copy-dependencies \
    -DincludeScope=runtime -DoutputDirectory="$dir/libs" >&2
  agent_version="$(sed -n 's:.*<jmx-exporter.version>\(.*\)</jmx-exporter.version>.*:\1:p' "$POM")"
  [ -n "$agent_version" ] || { echo "no <jmx-exporter.version> in $POM" >&2; exit 1; }
  mvn -B -q -Dstyle.color=never dependency:copy \
    -Dartifact="io.prometheus.jmx:jmx_prometheus_javaagent:$agent_version" \
    -DoutputDirectory="$dir/agent" -Dmdep.stripVersion=true >&2
  [ -f "$dir/agent/jmx_prometheus_javaagent.jar" ] || { echo "the JMX exporter agent was not copied" >&2; exit 1; }
  # The harness runs these two classes; a pom that lost them must fail here, not in a test.
  classes="$(for jar in "$dir"/libs/*.jar; do unzip -Z1 "$jar"; done)"
  for class in kafka.Kafka kafka.tools.StorageTool; do
    grep -qxF "$(echo "$class" | tr . /).class" <<<"$classes" || { echo "Kafka $version jars lack $class" >&2; exit 1; }
  done
  touch "$dir/.done"
  log "Kafka $version jars in $dir/libs"
fi

if [ "$version" != "$pom_version" ]; then
  echo "$dir/libs"
  exit 0
fi
# A stable path for the tests: a relative link, so a moved cache keeps working.
ln -sfn "$(basename "$dir")" "$CACHE/kafka/current"
echo "$CACHE/kafka/current/libs"
