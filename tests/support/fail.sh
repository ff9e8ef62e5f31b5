# Sourced by the shell tests: `fail MESSAGE...` prints "FAIL: MESSAGE" on stderr and ends the
# script with status 1. A script with logs worth reading on failure defines fail_context, whose
# output follows the message (on stderr too). Inside $(...) it ends only that subshell, as exit
# does. Counting a failure and going on is check_failed (tests/support/expect.sh).
fail() {
  echo "FAIL: $*" >&2
  if declare -F fail_context > /dev/null; then fail_context >&2; fi
  exit 1
}
