#!/usr/bin/env bash
# Copies the JUnit console launcher (one standalone jar: the JUnit 5 platform, Jupiter and its
# parameterized tests) that `make test-jvm` runs the Java tests with, from Maven Central, once,
# at set-up. Kept out of .jars/: the local Spark session loads every jar there.
set -euo pipefail
dest=${1:-.test-jars}
version=1.14.4 # the JUnit 5.14.4 platform
mkdir -p "$dest"
if [ ! -f "$dest/junit-platform-console-standalone-$version.jar" ]; then
  mvn -q -B -U dependency:copy \
    -Dartifact="org.junit.platform:junit-platform-console-standalone:$version" \
    -DoutputDirectory="$dest" -Dmdep.overWriteReleases=false
fi
echo "test jars in $dest: $(ls "$dest"/*.jar | wc -l)"
