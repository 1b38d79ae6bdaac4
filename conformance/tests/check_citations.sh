#!/usr/bin/env bash
# Every citation in the repository must resolve: to a page of docs/ (and a heading anchor in it) or
# to the official source (repository, version or commit, file). This check fails on
#   * citations of material that is not in the repository (a private "spec", its section signs and
#     test ids, paths on a development machine), and
#   * relative Markdown links, and docs/...md mentions in code, whose file or #anchor does not exist.
# Usage: check_citations.sh [ROOT]   (default: this repository). Exit 0 clean, 1 findings, 2 usage.
# Pure bash, grep and sed: the C++ suite tests without Python.
set -uo pipefail
export LC_ALL=C

root=${1:-"$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"}
if [[ $# -gt 1 || ! -d $root ]]; then
  echo "usage: check_citations.sh [ROOT]  ('$root' is not a directory)" >&2
  exit 2
fi
cd "$root" || exit 2

# Text files that hold comments, policies or documentation. Build trees, virtual environments and
# this checker and its self-test (which spell the forbidden patterns out) are not scanned.
mapfile -t files < <(find . -type d \( -name .git -o -name 'build*' -o -name .venv -o -name node_modules \
                                         -o -name __pycache__ \) -prune -o -type f \
                       \( -name '*.cpp' -o -name '*.hpp' -o -name '*.h' -o -name '*.cu' -o -name '*.cuh' \
                          -o -name '*.md' -o -name '*.json' -o -name '*.py' -o -name '*.sh' -o -name '*.txt' \
                          -o -name '*.cmake' -o -name '*.toml' -o -name '*.yml' -o -name '*.yaml' \) \
                       ! -path ./conformance/tests/check_citations.sh ! -path ./conformance/tests/test_check_citations.sh \
                       -print | sed 's|^\./||' | sort)

findings=0
report() {  # FILE:LINE: what
  echo "$1"
  findings=$((findings + 1))
}

# ---- 1. Citations of material outside the repository ---------------------------------------------
# Each pattern names what it catches; the fix is always the same: state the fact on a docs/ page,
# with its official source, and cite that page.
forbidden=(
  'shared/'                                        # the private notes' directory
  '(^|[^[:alnum:]_])spec/'                         # ... and its spec/ folder
  'codebook_and_fp8'                               # the private notes' file names
  'coat\.md`? *§'                                  # "coat.md §7.3" (our docs/formats/coat.md has no §)
  '§ *[0-9]'                                       # section signs: cite a page#anchor instead
  '\b[Tt]he spec(ification)?\b'                    # "the spec", "the specification"
  '\bspec(ification)?('"'"'s|:? *`?(§|T[0-9]|R[0-9]|coat|codebook|Appendix))'  # "spec's", "spec T17", "spec: coat..."
  '\(T[0-9]{1,2}[),]|[ ,]T[0-9]{1,2}\)|\bT[0-9]{1,2}[-/]T[0-9]{1,2}\b'   # the notes' test ids: (T24), T17/T18
  '\bR[0-9]\.[0-9]\b'                              # the notes' rule ids: R2.4
  '/work/'                                         # paths on a development machine
)
declare -A reported  # one finding per line, under the first pattern that matches it
for pattern in "${forbidden[@]}"; do
  while IFS= read -r hit; do
    where=$(cut -d: -f1,2 <<<"$hit")
    [[ -n ${reported[$where]+set} ]] && continue
    reported[$where]=1
    report "$where: cites material outside the repository (/${pattern}/): $(cut -d: -f3- <<<"$hit" | sed 's/^[[:space:]]*//' | cut -c1-100)"
  done < <(grep -nHE -- "$pattern" "${files[@]}" 2>/dev/null)
done

# ---- 2. Links to docs pages and their anchors ---------------------------------------------------
# GitHub's heading anchors: lower case, ASCII punctuation other than - and _ dropped, spaces to
# hyphens, a repeated heading numbered -1, -2, ...; explicit <a id="..."> / <a name="..."> anchors too.
declare -A anchors_of
anchors() {
  local page=$1
  if [[ -z ${anchors_of[$page]+set} ]]; then
    anchors_of[$page]=" $(awk '
        /^(```|~~~)/ { fence = !fence; next }
        fence { next }
        /^#+[ \t]/ {
          h = $0
          sub(/^#+[ \t]+/, "", h); sub(/[ \t]+#*[ \t]*$/, "", h)
          h = tolower(h)
          gsub(/[][!"#$%&'"'"'()*+,.\/:;<=>?@\\^`{|}~]/, "", h)
          gsub(/ /, "-", h)
          n = seen[h]++
          print (n ? h "-" n : h)
        }
        { while (match($0, /<a (id|name)="[^"]+"/)) {
            a = substr($0, RSTART, RLENGTH); sub(/^<a (id|name)="/, "", a); sub(/"$/, "", a); print a
            $0 = substr($0, RSTART + RLENGTH) } }
      ' "$page" | tr '\n' ' ')"
  fi
  [[ ${anchors_of[$page]} == *" $2 "* ]]
}

check_target() {  # WHERE  BASE_DIR  TARGET(path[#anchor])  SELF(page for a bare #anchor)
  local where=$1 base=$2 target=$3 self=$4 path anchor
  path=${target%%#*}
  anchor=
  [[ $target == *'#'* ]] && anchor=${target#*#}
  if [[ -z $path ]]; then
    path=$self
  else
    path=$base/$path
  fi
  if [[ ! -e $path ]]; then
    report "$where: dead link: $target (no file $path)"
  elif [[ -n $anchor && $path == *.md && -f $path ]] && ! anchors "$path" "$anchor"; then
    report "$where: dead link: $target (no heading or anchor '#$anchor' in $path)"
  fi
}

for f in "${files[@]}"; do
  dir=$(dirname "$f")
  # Markdown links [text](target) in pages: relative to the page.
  if [[ $f == *.md ]]; then
    while IFS= read -r hit; do
      line=${hit%%:*}
      target=${hit#*:}
      target=${target#*](}
      target=${target%)}
      target=${target%% *}                         # [text](path "title")
      case $target in
        http://* | https://* | mailto:* | '') continue ;;
      esac
      check_target "$f:$line" "$dir" "$target" "$f"
    done < <(grep -noE '\]\([^)[:space:]]+( "[^"]*")?\)' "$f")
  fi
  # docs/...md mentioned anywhere (comments, strings, pages): relative to the repository root.
  while IFS= read -r hit; do
    check_target "$f:${hit%%:*}" . "${hit#*:}" "$f"
  done < <(grep -noE '(^|[^[:alnum:]_./-])docs/[[:alnum:]_./-]*\.md(#[[:alnum:]_-]+)?' "$f" |
           sed -E 's/^([0-9]+):[^d]*/\1:/')
done

if ((findings)); then
  echo "check_citations: $findings finding(s) in $root" >&2
  exit 1
fi
echo "check_citations: ${#files[@]} files, every citation resolves"
