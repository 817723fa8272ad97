#!/usr/bin/env bash
# SPDX-License-Identifier: MIT
#
# The manual page: cmake --install puts dioloop and dioloop.1 under the
# prefix; the page renders without a warning from groff, documents every
# command that `dioloop --help` lists, and carries the reference's
# operations text (the same source: docs/readme2man.py).
source "$(dirname "${BASH_SOURCE[0]}")/lib.sh"

it_begin "dioloop.1: made from the README, installed by cmake --install" cmake groff man

BUILD=$(dirname "$DIOLOOP_BIN")
[[ -f $BUILD/CMakeCache.txt ]] || it_die "$BUILD (the directory of DIOLOOP_BIN) is no CMake build directory"
PREFIX=$IT_TMP/prefix
must "cmake --install $BUILD --prefix \$T/prefix" cmake --install "$BUILD" --prefix "$PREFIX"
PAGE=$PREFIX/share/man/man1/dioloop.1
expect_eq "installed: bin/dioloop and share/man/man1/dioloop.1" "yes yes" \
	"$([[ -x $PREFIX/bin/dioloop ]] && echo yes || echo no) $([[ -s $PAGE ]] && echo yes || echo no)"
groff -man -ww -z "$PAGE" >"$IT_TMP/groff.out" 2>&1
expect_eq "groff -man -ww: no warning" "" "$(cat "$IT_TMP/groff.out")"
MANWIDTH=100 man -l "$PAGE" 2>"$IT_TMP/man.err" | col -bx >"$IT_TMP/man.txt"
expect_eq "man -l: nothing on stderr" "" "$(cat "$IT_TMP/man.err")"
for section in NAME SYNOPSIS DESCRIPTION COMMANDS NODES OPERATIONS "EXIT STATUS" FILES "SEE ALSO"; do
	expect_eq "section $section" 1 "$(grep -c "^$section\$" "$IT_TMP/man.txt")"
done
CMDS=$("$PREFIX/bin/dioloop" --help | awk '/^Commands:/ { on = 1; next } on && !NF { exit } on { print $1 }')
expect_match "dioloop --help lists the commands" ".*limit.*fault.*stats.*" "${CMDS//$'\n'/ }"
for cmd in $CMDS; do
	# (man justifies lines: words may be apart by more than one space)
	expect_eq "dioloop $cmd (from dioloop --help) is in the synopsis and the commands" yes \
		"$(grep -qE "^ *dioloop +$cmd( |$)" "$IT_TMP/man.txt" &&
			grep -qE "• dioloop +$cmd( |$)" "$IT_TMP/man.txt" && echo yes || echo no)"
done
for text in "total_bps" "stats.json" "not served: the image is in use by" "fuse.dioloop" \
	"user_allow_other" "WantedBy=multi-user.target" "_netdev"; do
	expect_eq "the operations text mentions '$text'" yes \
		"$(grep -qF -- "$text" "$IT_TMP/man.txt" && echo yes || echo no)"
done

it_end
