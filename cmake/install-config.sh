#!/bin/sh
# install-config.sh TEMPLATE OUT PREFIX HOME NAME=VALUE ...
# Writes TEMPLATE to OUT (make install: the package files of CMake and Python) with every
# @NAME@ replaced by VALUE, and @DISTAL_PREFIX@ by the way from HOME, the folder OUT is
# installed in (without DESTDIR), to PREFIX: relative ("../../..") when HOME lies under
# PREFIX, so that a tree installed with DESTDIR or moved afterwards still finds itself;
# absolute otherwise.  A VALUE of a NAME ending in DIR that lies under PREFIX is written
# relative to PREFIX.
set -eu
[ $# -ge 4 ] || { echo "usage: install-config.sh TEMPLATE OUT PREFIX HOME [NAME=VALUE ...]" >&2; exit 2; }
template=$1 out=$2 prefix=${3%/} home=${4%/}
shift 4
# a value as the replacement of a sed s||| command
quote() { printf '%s' "$1" | sed 's/[\\&|]/\\&/g'; }
case $home/ in
  "$prefix"/*)
    up=.
    rest=${home#"$prefix"}
    while [ -n "$rest" ]; do
      rest=${rest%/*}
      up=$up/..
    done
    up=${up#./} ;;
  *) up=$prefix ;;
esac
script="s|@DISTAL_PREFIX@|$(quote "$up")|g"
for kv in "$@"; do
  name=${kv%%=*} value=${kv#*=}
  case $name in
    *DIR)
      case $value/ in
        "$prefix"/) value=. ;;
        "$prefix"/*) value=${value#"$prefix"/} ;;
      esac ;;
  esac
  script="$script
s|@$name@|$(quote "$value")|g"
done
sed "$script" "$template" > "$out.tmp"
if grep -n '@DISTAL_[A-Z_]*@' "$out.tmp" >&2; then
  echo "install-config.sh: $template: placeholders left without a value" >&2
  rm -f "$out.tmp"
  exit 1
fi
mv "$out.tmp" "$out"
