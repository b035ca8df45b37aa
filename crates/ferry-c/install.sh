#!/bin/sh
# Installs ferry's C API under PREFIX, for pkg-config and CMake:
#
#   PREFIX/lib/libferry_c.so, PREFIX/lib/libferry_c.a
#   PREFIX/include/ferry.h, PREFIX/include/ferry.hpp
#   PREFIX/lib/pkgconfig/ferry.pc                    pkg-config --cflags --libs ferry
#   PREFIX/lib/cmake/ferry/ferryConfig.cmake         find_package(ferry): ferry::ferry,
#   PREFIX/lib/cmake/ferry/ferryConfigVersion.cmake                       ferry::ferry_static
#
# Usage (from anywhere in the repository): crates/ferry-c/install.sh PREFIX
#
# It builds the libraries first (cargo build --release --locked -p ferry-c, in cargo's target
# directory: the repository's target/ unless CARGO_TARGET_DIR says otherwise).
# FERRY_C_LIB_DIR=DIR installs the libferry_c.so and libferry_c.a found in DIR instead, without
# building. The files in crates/ferry-c/pkg/ are the templates of the pkg-config and CMake files.
set -eu

if [ $# -ne 1 ] || [ -z "$1" ]; then
    echo "usage: crates/ferry-c/install.sh PREFIX   (FERRY_C_LIB_DIR=DIR: install the libraries in DIR, no build)" >&2
    exit 2
fi
here=$(cd "$(dirname "$0")" && pwd)
root=$(cd "$here/../.." && pwd)
mkdir -p "$1"
prefix=$(cd "$1" && pwd)
# A prefix with a character that sed's replacement would read (\ & |) is refused rather than
# written wrong into the pkg-config and CMake files.
case $prefix in
    *[\\\&\|]*) echo "install.sh: PREFIX may not contain \\, & or |: $prefix" >&2; exit 1 ;;
esac

if [ -n "${FERRY_C_LIB_DIR:-}" ]; then
    libs=$FERRY_C_LIB_DIR
else
    cargo=${CARGO:-cargo}
    (cd "$root" && "$cargo" build --release --locked -p ferry-c)
    # Where cargo put them: its target directory, wherever CARGO_TARGET_DIR or a config put it.
    target=$(cd "$root" && "$cargo" metadata --format-version 1 --no-deps --locked |
        sed -n 's/.*"target_directory":"\([^"]*\)".*/\1/p')
    libs=$target/release
fi
for lib in libferry_c.so libferry_c.a; do
    if [ ! -f "$libs/$lib" ]; then
        echo "install.sh: no $lib in $libs" >&2
        exit 1
    fi
done

# The workspace's version: the first `version = "..."` of the root Cargo.toml's
# [workspace.package].
version=$(sed -n '/^\[workspace\.package\]/,/^\[/s/^version *= *"\([^"]*\)".*/\1/p' "$root/Cargo.toml" | head -n 1)
case $version in
    [0-9]*.[0-9]*.[0-9]*) ;;
    *) echo "install.sh: no version found in $root/Cargo.toml" >&2; exit 1 ;;
esac
major=${version%%.*}
minor=${version#*.}
minor=${minor%%.*}

mkdir -p "$prefix/lib/pkgconfig" "$prefix/lib/cmake/ferry" "$prefix/include"
install -m 0755 "$libs/libferry_c.so" "$prefix/lib/libferry_c.so"
install -m 0644 "$libs/libferry_c.a" "$prefix/lib/libferry_c.a"
install -m 0644 "$here/include/ferry.h" "$here/include/ferry.hpp" "$prefix/include/"

fill() {
    sed -e "s|@PREFIX@|$prefix|g" -e "s|@VERSION@|$version|g" \
        -e "s|@VERSION_MAJOR@|$major|g" -e "s|@VERSION_MINOR@|$minor|g" "$1" >"$2"
}
fill "$here/pkg/ferry.pc.in" "$prefix/lib/pkgconfig/ferry.pc"
fill "$here/pkg/ferryConfig.cmake.in" "$prefix/lib/cmake/ferry/ferryConfig.cmake"
fill "$here/pkg/ferryConfigVersion.cmake.in" "$prefix/lib/cmake/ferry/ferryConfigVersion.cmake"

echo "installed ferry $version under $prefix"
echo "  pkg-config: PKG_CONFIG_PATH=$prefix/lib/pkgconfig pkg-config --cflags --libs ferry"
echo "  CMake:      cmake -DCMAKE_PREFIX_PATH=$prefix ...  (find_package(ferry); ferry::ferry)"
