#!/usr/bin/env bash
# tools/git-hooks/commit-msg accepts subjects of up to 72 characters (with or without a body
# after a blank line) and refuses longer ones, a missing blank line and an empty subject.
set -u
hook="$1/tools/git-hooks/commit-msg"
work=$(mktemp -d)
trap 'rm -rf "$work"' EXIT
failures=0
expect() {  # expect ACCEPT|REFUSE NAME MESSAGE
  printf '%s\n' "$3" > "$work/msg"
  if "$hook" "$work/msg" 2>"$work/err"; then got=ACCEPT; else got=REFUSE; fi
  if [ "$got" != "$1" ]; then
    echo "FAIL: $2: expected $1, got $got ($(cat "$work/err"))"
    failures=$((failures + 1))
  else
    echo "ok: $2"
  fi
}
seventy_two=$(printf 'x%.0s' $(seq 72))
expect ACCEPT "a short subject" "sim: count bank conflicts per wavefront"
expect ACCEPT "72 characters" "$seventy_two"
expect ACCEPT "72 multibyte characters" "$(printf 'é%.0s' $(seq 72))"
expect REFUSE "73 characters" "${seventy_two}y"
expect ACCEPT "subject, blank line, body" "$(printf 'subject\n\nwhy it changed')"
expect REFUSE "no blank line before the body" "$(printf 'subject\nwhy it changed')"
expect ACCEPT "git's comment lines ignored" "$(printf 'subject\n# Please enter the commit message\n')"
expect REFUSE "an empty subject" "$(printf '# only a comment\n')"
exit $((failures > 0))
