#!/bin/bash
# The README's "The API in one example", compiled as C99 (-pedantic
# -Werror: the public header is C) against the built library and run as two
# ranks under p2prun: the text users copy must build and do what its last
# comment says. The example's statements become main()'s body, and that
# comment ("/* done.status == P2P_OK, done.peer == peer, ... */") becomes
# the condition each rank checks after the example ran.
set -u
here=$(cd "$(dirname "$0")" && pwd)
src=${P2P_TOP_SRCDIR:-$(cd "$here/../.." && pwd)}
build=${P2P_TOP_BUILDDIR:-$src}
[ -f "$build/libucxp2p.la" ] || { echo "readme_example: $build/libucxp2p.la not built" >&2; exit 99; }

tmp=$(mktemp -d /tmp/readme_example.XXXXXX)
trap 'rm -rf "$tmp"' EXIT
cd "$tmp" || exit 99

# The first ```c block after the heading.
awk '/^## The API in one example/ {h = 1; next}
     h && /^```c$/ {c = 1; next}
     c && /^```$/ {exit}
     c {print}' "$src/README.md" > example.c
grep -q '^#include <ucxp2p/p2p.h>$' example.c ||
    { echo "FAIL: no example (or no #include <ucxp2p/p2p.h>) under the README's heading"; exit 1; }
check=$(sed -n 's|^/\* \(done\.status == .*\) \*/$|\1|p' example.c | sed 's/, / \&\& /g')
[ -n "$check" ] || { echo "FAIL: the example's '/* done.status == ... */' comment is gone"; exit 1; }
{
    echo '#include <stdio.h>'
    grep '^#include' example.c
    echo 'int main(void) {'
    grep -v '^#include' example.c
    echo "    if (!($check)) {"
    echo '        fprintf(stderr, "rank %u: status %d peer %u tensor %u bytes %zu\n", me.rank,'
    echo '                (int)done.status, done.peer, done.tensor_id, (size_t)done.bytes);'
    echo '        return 1;'
    echo '    }'
    echo '    printf("readme example OK rank %u\n", me.rank);'
    echo '    return 0;'
    echo '}'
} > main.c

# shellcheck disable=SC2086
timeout 120 ${CC:-cc} -std=c99 -pedantic -Wall -Wextra -Werror ${P2P_SAN_FLAGS-} \
    -I"$src/include" -c main.c -o main.o || { echo "FAIL: compile"; cat -n main.c; exit 1; }
# shellcheck disable=SC2086
timeout 120 "$build/libtool" --quiet --tag=CXX --mode=link ${CXX:-c++} ${P2P_SAN_FLAGS-} \
    -o readme_example main.o "$build/libucxp2p.la" || { echo "FAIL: link"; exit 1; }

# Launcher variables inherited from a job running make check would steer
# the bootstrap elsewhere; p2prun sets its own.
. "$here/../launcher_env.sh"
unset_launcher_vars
timeout -k 5 120 "$build/tools/p2prun/p2prun" -n 2 -- ./readme_example > out 2>&1
rc=$?
ok=$(grep -c 'readme example OK rank' out)
if [ $rc != 0 ] || [ "$ok" != 2 ]; then
    echo "FAIL: p2prun -n 2 readme_example (rc $rc, $ok of 2 ranks OK):"
    cat out
    exit 1
fi
echo "PASS: the README's API example builds as C99 and runs on 2 ranks ($check)"
