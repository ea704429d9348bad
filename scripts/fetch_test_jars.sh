#!/usr/bin/env bash
# Copies the JUnit console launcher (one standalone jar: the JUnit 5 platform, Jupiter and its
# parameterized tests) that `make test-jvm` runs the Java tests with, and Hadoop's HDFS
# mini-cluster (below), from Maven Central, once, at set-up. Kept out of .jars/: the local
# Spark session loads every jar there. Arguments: the folder, and the Python whose pyspark
# the mini-cluster's Hadoop release follows.
set -euo pipefail
dest=${1:-.test-jars}
python=${2:-.venv/bin/python}
version=1.14.4 # the JUnit 5.14.4 platform
mkdir -p "$dest"
if [ ! -f "$dest/junit-platform-console-standalone-$version.jar" ]; then
  mvn -q -B -U dependency:copy \
    -Dartifact="org.junit.platform:junit-platform-console-standalone:$version" \
    -DoutputDirectory="$dest" -Dmdep.overWriteReleases=false
fi
# An HDFS mini-cluster (tests/support/hdfs.py) for the tests of exports and outputs on a
# remote file system: the release of the Hadoop client pyspark ships, so that one Hadoop
# serves both sides.
pyspark_jars=$("$python" -c 'import os, pyspark; print(os.path.dirname(pyspark.__file__))')/jars
hadoop=$(ls "$pyspark_jars"/hadoop-client-api-*.jar 2>/dev/null \
  | sed -E 's/.*hadoop-client-api-(.*)\.jar/\1/' | head -1)
if [ -n "$hadoop" ] && [ ! -f "$dest/hadoop-client-minicluster-$hadoop.jar" ]; then
  mvn -q -B -U dependency:copy \
    -Dartifact="org.apache.hadoop:hadoop-client-minicluster:$hadoop" \
    -DoutputDirectory="$dest" -Dmdep.overWriteReleases=false
fi
echo "test jars in $dest: $(ls "$dest"/*.jar | wc -l)"
