# The shell tests' few words (sourced by cli_test.sh and golden_cli_test.sh): each check
# prints one PASS/FAIL line and counts failures; the script ends with `finish NAME`.
failures=0
check() {  # check NAME CONDITION...: runs the condition, prints one line
  local name=$1
  shift
  if "$@"; then
    echo "PASS  $name"
  else
    echo "FAIL  $name"
    failures=$((failures + 1))
  fi
}
# run OUT_PREFIX CMD...: runs CMD with stdout/stderr in OUT_PREFIX.out/.err; sets $rc.
run() {
  local prefix=$1
  shift
  "$@" >"$prefix.out" 2>"$prefix.err"
  rc=$?
}
has() { grep -qF -- "$2" "$1"; }
show() { sed 's/^/    | /' "$1"; }
