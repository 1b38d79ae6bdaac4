#!/usr/bin/env bash
# The citation checker catches what it is for: a small clean tree passes, and the same tree with one
# bad line added fails, naming that file and line. Each bad line is one kind of citation that does
# not resolve inside the repository.
set -uo pipefail
checker="$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)/check_citations.sh"
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT
failures=0
fail() {
  echo "FAIL: $*"
  failures=$((failures + 1))
}

make_clean_tree() {  # DIR: a page with two headings, code and a page that cite them correctly
  mkdir -p "$1/docs/formats" "$1/reference"
  printf '# Rounding\n\n## Ties go to even\n\n## Ties go to even\n\nSee [the other page](other.md#overflow-satfinite).\n' \
    >"$1/docs/formats/page.md"
  printf '# Other\n\n## Overflow: `satfinite`\n\nBack to [ties](page.md#ties-go-to-even-1).\n' >"$1/docs/formats/other.md"
  printf '// Ties: docs/formats/page.md#ties-go-to-even (NVlabs/COAT 80ec99f coat/x.cu).\n' >"$1/reference/ok.cpp"
}

make_clean_tree "$tmp/clean"
out=$(bash "$checker" "$tmp/clean" 2>&1) || fail "a clean tree is reported: $out"

# One bad line each; the checker must exit 1 and name bad.cpp:2 or bad.md:2.
bad_code_lines=(
  '// expected values: spec coat.md §7.3'
  '// Expected values come from ../shared/spec/codebook_and_fp8.md'
  '// as the spec states'
  '// codes as in §4.4'
  'TEST_CASE("the sign fix (T22)") {'
  '// see docs/formats/missing.md'
  '// see docs/formats/page.md#no-such-heading'
  '// git --git-dir=/work/.mirror/NVlabs+COAT/repo archive HEAD'
)
i=0
for line in "${bad_code_lines[@]}"; do
  i=$((i + 1))
  make_clean_tree "$tmp/c$i"
  printf '// a first, clean line\n%s\n' "$line" >"$tmp/c$i/reference/bad.cpp"
  out=$(bash "$checker" "$tmp/c$i" 2>&1)
  rc=$?
  [[ $rc == 1 ]] || fail "exit $rc, not 1, for: $line"
  [[ $out == *"reference/bad.cpp:2:"* ]] || fail "no finding at reference/bad.cpp:2 for: $line ($out)"
done

bad_page_lines=(
  'See [a page that is not there](missing.md).'
  'See [a heading that is not there](other.md#underflow).'
  'See [above](#no-such-heading).'
  'Source: the specification `codebook_and_fp8.md` R2.4.'
)
for line in "${bad_page_lines[@]}"; do
  i=$((i + 1))
  make_clean_tree "$tmp/c$i"
  printf '# Bad\n%s\n' "$line" >"$tmp/c$i/docs/formats/bad.md"
  out=$(bash "$checker" "$tmp/c$i" 2>&1)
  rc=$?
  [[ $rc == 1 ]] || fail "exit $rc, not 1, for: $line"
  [[ $out == *"docs/formats/bad.md:2:"* ]] || fail "no finding at docs/formats/bad.md:2 for: $line ($out)"
done

# The same words used for what they mean here must pass: an input spec, a special value.
make_clean_tree "$tmp/words"
printf '// parse the input spec "normal:n=8"; special values; std::shared_ptr\n' >"$tmp/words/reference/words.cpp"
out=$(bash "$checker" "$tmp/words" 2>&1) || fail "ordinary words are reported: $out"

if ((failures)); then
  echo "$failures check(s) failed"
  exit 1
fi
echo "the checker passes a clean tree and catches all ${i} bad lines"
