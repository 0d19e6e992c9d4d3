# shellcheck shell=bash
# check-option.sh - the command line of the scripts that write a generated file and, given
# --check, only compare it with the committed one (scripts/gen-dashboards.sh,
# scripts/render-mixin.sh). Sourced from the repository root with the script's arguments:
# sets CHECK to 1 with --check (else 0), prints the script's header (lines 2 to 12) for
# --help, and refuses anything else.
# shellcheck disable=SC2034  # the sourcing script reads CHECK
CHECK=0
case "${1:-}" in
  --check) CHECK=1 ;;
  "") ;;
  -h|--help) sed -n '2,12p' "$0"; exit 0 ;;
  *) echo "usage: $0 [--check]" >&2; exit 2 ;;
esac
