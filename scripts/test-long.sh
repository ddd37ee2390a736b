#!/usr/bin/env bash
# test-long.sh: the long tests, which scripts/test.sh leaves out to stay fast: data-parallel
# runs of several processes, signals at every phase, two hosts over veth, the RSS soaks and
# the exhaustive bit flips. They live in files built with the "long" tag (*_long_test.go and
# the files that say //go:build long); this runs exactly the tests of those files, package
# by package. CI runs it after scripts/test.sh (.ci/run).
set -euo pipefail
cd "$(dirname "$0")/.."
[ -x /usr/local/go/bin/go ] && export PATH="/usr/local/go/bin:$PATH"
. scripts/testenv.sh build/ldtorch
declare -A tests
while IFS= read -r f; do
  dir=./$(dirname "$f")
  names=$(sed -n 's/^func \(Test[A-Za-z0-9_]*\)(t \*testing.T).*/\1/p' "$f" | paste -sd '|')
  [ -n "$names" ] && tests[$dir]="${tests[$dir]:+${tests[$dir]}|}$names"
done < <(grep -rl --include='*_test.go' '^//go:build long' . | sed 's|^\./||' | sort)
for dir in $(printf '%s\n' "${!tests[@]}" | sort); do
  go test -count=1 -timeout 25m -tags long -vet=off -run "^(${tests[$dir]})\$" "$dir" "$@"
done
