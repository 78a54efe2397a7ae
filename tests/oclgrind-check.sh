#!/bin/sh
# Runs a test program on the Oclgrind simulator and fails when Oclgrind
# reports an error inside a kernel (invalid or uninitialised access, data
# race, API misuse), even if the program itself passed.
# usage: oclgrind-check.sh /path/to/oclgrind PROGRAM [ARGS...]
oclgrind="$1"; shift
log=$(mktemp "${TMPDIR:-/tmp}/clf-oclgrind.XXXXXX") || exit 1
"$oclgrind" --check-api --uninitialized --log "$log" "$@"
rc=$?
if [ -s "$log" ]; then
  echo "Oclgrind reported errors:" >&2
  head -c 20000 "$log" >&2
  [ "$rc" -eq 0 ] && rc=1
fi
rm -f "$log"
exit "$rc"
