#!/usr/bin/env bash
# Bundles fwlab's third-party libraries from Debian 12's packages into one relocatable prefix (a tarball), for a
# machine without Debian that has a compiler, CMake, ninja, nvcc and PyTorch but none of the other libraries (a GPU
# box). Not bundled: libtorch (the PyTorch install brings it), the compiler and its OpenMP (libgomp), CMake, ninja,
# nvcc.
#
#   scripts/bundle_deps.sh OUT.tar.gz          make the bundle (Debian 12, root or not; downloads ~37 MB of .debs)
#   scripts/bundle_deps.sh --full-boost OUT    ... with all of Boost's headers instead of Boost.Process's closure
#   scripts/bundle_deps.sh --check DIR         check an extracted bundle: no /usr in its .cmake/.pc files, no
#                                              absolute or dangling symlinks, the headers and libraries fwlab uses
#   scripts/bundle_deps.sh --check DIR --compile   ... and configure, build and run a small CMake project against
#                                              it (every library, both values of _GLIBCXX_USE_CXX11_ABI)
#   scripts/bundle_deps.sh --self-test         make a bundle, extract it elsewhere, --check --compile it (exit 77
#                                              where this is not Debian 12 or apt cannot download)
#
# On the GPU box (see README, "Building on a machine without Debian"):
#   tar xzf fwlab-deps.tar.gz -C /opt
#   cmake -S fwlab -B build -G Ninja -DCMAKE_PROJECT_INCLUDE=/opt/fwlab-deps/fwlab-deps.cmake \
#         -DCMAKE_PREFIX_PATH="$(python3 -c 'import torch; print(torch.utils.cmake_prefix_path)')"
#
# What the bundle is (all from `apt-get download` + `dpkg -x`, nothing installed on this machine):
#  - headers + CMake/pkg-config files of fmt, nlohmann_json, simdjson, SQLite3, TOML++, CLI11, Catch2 2.x, ICU,
#    OpenSSL, SentencePiece, cpp-httplib (with Brotli; zlib is the host's), md4c (C), pkgconf (bin/, for hosts without
#    pkg-config), and Boost.Process's headers (the transitive #include closure of the Boost headers fwlab includes,
#    conservative: every #include line whatever its #if, plus all of boost/mpl and boost/preprocessor, whose
#    headers are reached through macro-built file names: ~3 MB compressed instead of 16 MB for all of Boost;
#    fwlab uses no Boost library binary and no find_package(Boost), so Boost's CMake files are left out);
#  - the shared libraries of simdjson, SQLite, ICU, OpenSSL and md4c, with RUNPATH $ORIGIN (libicuuc finds libicudata
#    next to it also where the linker writes DT_RUNPATH, which does not apply to indirect dependencies).
#  - fmt and TOML++ are made header-only (FMT_HEADER_ONLY, TOML_HEADER_ONLY; fwlab itself takes only fmt's headers
#    and compiles its implementation once, cmake/fmt_library.cmake) and Catch2WithMain compiles its main
#    into each test binary (INTERFACE_SOURCES) instead of Debian's prebuilt libCatch2WithMain.a: these C++ APIs pass
#    std::string, and PyTorch's pip wheels before 2.7 are (mostly) built with _GLIBCXX_USE_CXX11_ABI=0, which
#    fwlab applies to every target: Debian's libfmt.so and libCatch2WithMain.a would not link with it, and
#    libtomlplusplus.so would link and then read another std::string layout (toml::table holds std::string keys).
#    What stays compiled (simdjson, ICU's C API, OpenSSL, SQLite) does not pass std::string to fwlab; SentencePiece
#    and cpp-httplib do, so with a pre-2.7 PyTorch (ABI 0) the worker and cli do not link against the bundle.
#  - Relocatable: library symlinks are relative (checked), .pc files say prefix=${pcfiledir}/../.. and the CMake
#    files compute the prefix from their own location (Debian's "/usr move" blocks removed); OpenSSL's multiarch
#    headers (include/x86_64-linux-gnu/openssl) are merged into include/openssl, where any compiler finds them.
#  - Debian's multiarch lib/x86_64-linux-gnu is kept: CMake searches <prefix>/lib/<arch> only when
#    CMAKE_LIBRARY_ARCHITECTURE is set, which it detects on Debian/Ubuntu but not on RHEL-like or other hosts, so
#    fwlab-deps.cmake sets it to x86_64-linux-gnu where it is empty (a no-op elsewhere: CMake searches
#    nonexistent <prefix>/lib/<arch> directories silently). pkg-config users: see fwlab-deps.cmake's header.
#
# Run time: binaries in the build tree find the bundle's libraries through CMake's build RPATH (absolute: if the
# bundle moves after the build, rebuild or set LD_LIBRARY_PATH=<bundle>/lib/x86_64-linux-gnu); installed or
# copied binaries need LD_LIBRARY_PATH=<bundle>/lib/x86_64-linux-gnu.
#
# Host requirements: Debian 12's libraries need glibc >= 2.34 (pthread/dl symbols moved into libc: SQLite,
# libcrypto, ICU) and libstdc++ with GLIBCXX_3.4.30, i.e. GCC 12's (ICU's libicuuc); the script prints the
# maxima it finds and writes them into fwlab-deps.cmake, which stops the configure with a clear message on a host
# below them. Ubuntu 22.04 (glibc 2.35, libstdc++ 12.3) and 24.04, Debian 12/13, Fedora >= 36 are fine; Ubuntu
# 20.04 (glibc 2.31) and RHEL/Rocky 8 (2.28) are not; RHEL/Rocky 9 has glibc 2.34 but GCC 11's libstdc++
# (GLIBCXX_3.4.29), so libicuuc does not link there unless a newer libstdc++ is on the library path. x86_64 only.
set -euo pipefail
script=$(readlink -f "$0")
root=$(cd "$(dirname "$script")/.." && pwd)
arch=x86_64-linux-gnu

die() { echo "bundle_deps: $*" >&2; exit 1; }
cleanup=()
on_exit() { trap 'rm -rf "${cleanup[@]}"' EXIT; }  # (re)installed by whoever adds to cleanup: subshells reset traps
usage() { sed -n '2,/^set -euo/p' "$script" | sed '$d; s/^# \{0,1\}//'; }

# ---------------------------------------------------------------------------------------------------------------
# --check DIR [--compile]
check_bundle() {
  local dir compile=0 fail=0 f
  dir=$(readlink -f "$1"); [ "${2:-}" = --compile ] && compile=1
  [ -d "$dir" ] || die "--check: no directory $1"
  bad() { echo "bundle check: $*" >&2; fail=1; }

  [ -f "$dir/fwlab-deps.cmake" ] || bad "no fwlab-deps.cmake"
  local usr; usr=$(find "$dir" \( -name '*.cmake' -o -name '*.pc' \) -type f -exec grep -l -e '/usr' -e '/build/' {} + || true)
  [ -z "$usr" ] || bad "absolute /usr or /build paths in: ${usr//$dir\//}"
  local abs; abs=$(find "$dir" -type l -lname '/*' -printf '%P -> %l\n')
  [ -z "$abs" ] || bad "absolute symlinks: $abs"
  local dangling; dangling=$(find "$dir" -xtype l -printf '%P\n')
  [ -z "$dangling" ] || bad "dangling symlinks: $dangling"
  for f in fmt/format.h fmt/ranges.h nlohmann/json.hpp simdjson.h sqlite3.h toml++/toml.h boost/process.hpp \
           boost/process/extend.hpp CLI/CLI.hpp catch2/catch.hpp unicode/uchar.h openssl/evp.h openssl/configuration.h \
           sentencepiece_processor.h httplib.h md4c-html.h; do
    [ -f "$dir/include/$f" ] || bad "missing include/$f"
  done
  for f in libsimdjson.so libsqlite3.so libicuuc.so libicudata.so libcrypto.so libmd4c-html.so; do
    [ -e "$dir/lib/$arch/$f" ] || bad "missing lib/$arch/$f"
  done
  for f in lib/$arch/cmake/fmt/fmt-config.cmake lib/$arch/cmake/simdjson/simdjson-config.cmake \
           lib/$arch/cmake/tomlplusplus/tomlplusplusConfig.cmake share/cmake/nlohmann_json/nlohmann_jsonConfig.cmake \
           share/cmake/CLI11/CLI11Config.cmake lib/cmake/Catch2/Catch2Config.cmake share/fwlab-deps/catch2_main.cpp; do
    [ -f "$dir/$f" ] || bad "missing $f"
  done
  # Every library a bundled library needs is either bundled or part of glibc / the compiler's runtime.
  if command -v readelf >/dev/null; then
    local so need
    while IFS= read -r so; do
      for need in $(readelf -d "$so" 2>/dev/null | sed -n 's/.*(NEEDED).*\[\(.*\)\]/\1/p'); do
        case $need in libc.so.*|libm.so.*|libdl.so.*|libpthread.so.*|librt.so.*|ld-linux*|libstdc++.so.*|libgcc_s.so.*|libz.so.1) ;;  # zlib: every host has one
          *) [ -e "$dir/lib/$arch/$need" ] || bad "${so##*/} needs $need, not in the bundle"
             [[ $(readelf -d "$so") == *'PATH)'*'$ORIGIN'* ]] || bad "${so##*/} needs $need but has no RUNPATH \$ORIGIN" ;;
        esac
      done
    done < <(find "$dir/lib/$arch" -maxdepth 1 -type f -name '*.so*')
  fi
  [ "$fail" = 0 ] || return 1
  echo "bundle check: $dir: paths relative, symlinks relative and resolved, headers and libraries present"
  [ "$compile" = 1 ] || return 0

  command -v cmake >/dev/null || die "--compile needs cmake"
  local work; work=$(mktemp -d "${TMPDIR:-/tmp}/fwlab-bundle-check.XXXXXX")
  cleanup+=("$work"); on_exit
  write_check_project "$work/src"
  local gen=(); command -v ninja >/dev/null && gen=(-G Ninja)
  local abi
  for abi in 1 0; do
    local b="$work/build-abi$abi"
    echo "bundle check: building a consumer of every library with -D_GLIBCXX_USE_CXX11_ABI=$abi"
    if ! cmake -S "$work/src" -B "$b" "${gen[@]}" -DCMAKE_BUILD_TYPE=Release -DCMAKE_PROJECT_INCLUDE="$dir/fwlab-deps.cmake" \
           -DCMAKE_CXX_FLAGS="-D_GLIBCXX_USE_CXX11_ABI=$abi" >"$work/configure-$abi.log" 2>&1; then
      tail -30 "$work/configure-$abi.log"; return 1
    fi
    if ! cmake --build "$b" --parallel "${CMAKE_BUILD_PARALLEL_LEVEL:-1}" >"$work/build-$abi.log" 2>&1; then tail -40 "$work/build-$abi.log"; return 1; fi
    "$b/bundle_check" --name bundle || { echo "bundle check: bundle_check failed" >&2; return 1; }
    "$b/bundle_catch" >/dev/null || { echo "bundle check: bundle_catch failed" >&2; return 1; }
    # At run time the bundle's copies are the ones loaded (the build RPATH points into the bundle).
    if command -v ldd >/dev/null; then
      local lib path
      for lib in libsimdjson.so libsqlite3.so libicuuc.so libicudata.so libcrypto.so; do
        path=$(ldd "$b/bundle_check" | awk -v l="$lib" 'index($1, l) == 1 {print $3}')
        case $path in "$dir"/*) ;; *) echo "bundle check: $lib resolves to '${path:-nothing}', not into $dir" >&2; return 1 ;; esac
      done
    fi
  done
  echo "bundle check: consumer project configured, built and ran against $dir (both libstdc++ ABIs)"
}

# A CMake project that finds every package as fwlab does, asserts that each resolves into the bundle, and uses
# each library in one program (and Catch2WithMain in another).
write_check_project() {
  mkdir -p "$1"
  cat >"$1/CMakeLists.txt" <<'EOF'
cmake_minimum_required(VERSION 3.24)
project(fwlab_bundle_check LANGUAGES CXX)
set(CMAKE_CXX_STANDARD 20)
find_package(nlohmann_json 3.10 REQUIRED)
find_package(fmt REQUIRED)
find_package(simdjson REQUIRED)
find_package(OpenSSL REQUIRED COMPONENTS Crypto)
find_package(ICU REQUIRED COMPONENTS uc)
find_package(CLI11 REQUIRED)
find_package(SQLite3 REQUIRED)
find_package(tomlplusplus REQUIRED)
find_package(Catch2 2.13 REQUIRED)
set(paths "${SQLite3_INCLUDE_DIRS}" "${SQLite3_LIBRARIES}" "${ICU_INCLUDE_DIRS}" "${ICU_UC_LIBRARY}" "${OPENSSL_INCLUDE_DIR}"
          "${OPENSSL_CRYPTO_LIBRARY}")
foreach(t fmt::fmt-header-only simdjson::simdjson nlohmann_json::nlohmann_json CLI11::CLI11 tomlplusplus::tomlplusplus
          Catch2::Catch2 OpenSSL::Crypto ICU::uc SQLite::SQLite3)
  get_target_property(inc ${t} INTERFACE_INCLUDE_DIRECTORIES)
  list(APPEND paths "${inc}")
  get_target_property(type ${t} TYPE)
  if(NOT type STREQUAL "INTERFACE_LIBRARY")
    get_target_property(loc ${t} LOCATION)
    list(APPEND paths "${loc}")
  endif()
endforeach()
foreach(p IN LISTS paths)
  get_filename_component(real "${p}" REALPATH)
  string(FIND "${real}" "${FWLAB_DEPS_ROOT}/" at)
  if(NOT at EQUAL 0)
    message(FATAL_ERROR "resolved outside the bundle ${FWLAB_DEPS_ROOT}: ${p}")
  endif()
endforeach()
find_package(Threads REQUIRED)
add_executable(bundle_check check.cpp)
target_link_libraries(bundle_check PRIVATE nlohmann_json::nlohmann_json fmt::fmt simdjson::simdjson OpenSSL::Crypto ICU::uc
                                           CLI11::CLI11 SQLite::SQLite3 tomlplusplus::tomlplusplus Threads::Threads)
target_compile_definitions(bundle_check PRIVATE BOOST_PROCESS_USE_STD_FS TOML_EXCEPTIONS=1)
add_executable(bundle_catch catch.cpp)
target_link_libraries(bundle_catch PRIVATE Catch2::Catch2WithMain)
EOF
  cat >"$1/check.cpp" <<'EOF'
#include <CLI/CLI.hpp>
#include <boost/process.hpp>
#include <fmt/format.h>
#include <fmt/ranges.h>
#include <nlohmann/json.hpp>
#include <openssl/evp.h>
#include <simdjson.h>
#include <sqlite3.h>
#include <toml++/toml.h>
#include <unicode/uchar.h>

#include <cstdio>
#include <string>
#include <vector>

int main(int argc, char** argv) {
  CLI::App app{"bundle check"};
  std::string name = "?";
  app.add_option("--name", name);
  CLI11_PARSE(app, argc, argv);
  auto json = nlohmann::json::parse(R"({"a": [1, 2, 3]})");
  simdjson::dom::parser parser;
  simdjson::padded_string doc(std::string(R"({"n": 42})"));
  int64_t n = parser.parse(doc)["n"].get_int64().value();
  toml::table table = toml::parse("k = 7\n");
  unsigned char md[EVP_MAX_MD_SIZE];
  unsigned md_len = 0;
  EVP_Digest("abc", 3, md, &md_len, EVP_sha256(), nullptr);
  sqlite3* db = nullptr;
  int one = 0;
  sqlite3_open(":memory:", &db);
  sqlite3_exec(db, "select 1", [](void* out, int, char** v, char**) { *static_cast<int*>(out) = std::stoi(v[0]); return 0; }, &one, nullptr);
  sqlite3_close(db);
  bool letter = u_isalpha(0x00E9);  // é
  int rc = boost::process::system("/bin/sh", "-c", "exit 0");
  std::string out = fmt::format("{}: json {} simdjson {} toml {} sha256 {:02x}{:02x} sqlite {} ({}) icu {} boost.process {} ranges {}",
                                name, json["a"].size(), n, table["k"].value_or(0), md[0], md[1], sqlite3_libversion(), one,
                                letter, rc, std::vector<int>{1, 2});
  std::puts(out.c_str());
  return n == 42 && md_len == 32 && md[0] == 0xba && md[1] == 0x78 && one == 1 && letter && rc == 0 && table["k"].value_or(0) == 7 ? 0 : 1;
}
EOF
  cat >"$1/catch.cpp" <<'EOF'
#include <catch2/catch.hpp>

#include <string>

TEST_CASE("Catch2WithMain's main is compiled with this binary's flags") {
  std::string s = "abc";
  REQUIRE(s.size() == 3);
}
EOF
}

# ---------------------------------------------------------------------------------------------------------------
# Boost: the conservative #include closure of the seeds (level by level, one grep per level).
boost_closure() {  # INCLUDE_DIR SEED... -> prints the relative paths
  local inc=$1; shift
  local -A seen=() whole=()
  local -a frontier=() next=()
  local f m
  add() {  # a header reached: queue it, and all of a directory whose headers are reached through macros
    local lib c
    [[ -n ${seen[$1]:-} || ! -f $inc/$1 ]] && return 0
    seen[$1]=1; next+=("$1")
    case $1 in boost/mpl/*|boost/preprocessor/*)
      lib=${1#boost/}; lib=boost/${lib%%/*}
      if [[ -z ${whole[$lib]:-} ]]; then
        whole[$lib]=1
        while IFS= read -r c; do add "$c"; done < <(cd "$inc" && find "$lib" -type f)
      fi ;;
    esac
  }
  normalise() {  # a/b/../c -> a/c, in REPLY
    local IFS=/ p; local -a parts=()
    for p in $1; do case $p in .|'') ;; ..) ((${#parts[@]})) && unset 'parts[${#parts[@]}-1]' ;; *) parts+=("$p") ;; esac; done
    REPLY="${parts[*]}"
  }
  for f in "$@"; do add "$f"; done
  while ((${#next[@]})); do
    frontier=("${next[@]}"); next=()
    while IFS= read -r m; do
      f=${m%%:*}; m=${m#*:}; m=${m:1:${#m}-2}
      if [[ $m == boost/* ]]; then add "$m"; else normalise "${f%/*}/$m"; add "$REPLY"; fi
    done < <(cd "$inc" && printf '%s\0' "${frontier[@]}" | xargs -0 grep -oHE '[<"][A-Za-z0-9_./+-]+\.(hpp|h|ipp|inl)[>"]' /dev/null || true)
  done
  printf '%s\n' "${!seen[@]}" | sort
}

# The Boost headers fwlab's sources include (so a new #include <boost/...> is bundled without editing this script).
boost_seeds() {
  { echo boost/process.hpp; echo boost/process/extend.hpp
    for d in contract worker harness analysis models kernels bench tests; do
      [ -d "$root/$d" ] && grep -rhoE '#\s*include\s*<boost/[^>]+>' "$root/$d" --include='*.cpp' --include='*.h' \
        --include='*.hpp' --include='*.cu' --include='*.cuh' | sed -E 's/.*<(boost\/[^>]+)>/\1/'
    done; } | sort -u
}

# ---------------------------------------------------------------------------------------------------------------
make_bundle() {
  local out=$1 full_boost=$2
  command -v apt-get >/dev/null && command -v dpkg >/dev/null || die "needs Debian's apt-get and dpkg"
  [ -r /etc/os-release ] && . /etc/os-release
  if [ "${VERSION_CODENAME:-}" != bookworm ] && [ -z "${FWLAB_BUNDLE_ANY_DEBIAN:-}" ]; then
    die "this is ${PRETTY_NAME:-not Debian}; the bundle is made on Debian 12 (bookworm), e.g. in a debian:12 container (FWLAB_BUNDLE_ANY_DEBIAN=1 to try anyway)"
  fi
  [[ $out == /* ]] || out=$PWD/$out
  mkdir -p "$(dirname "$out")"

  local work; work=$(mktemp -d "${TMPDIR:-/tmp}/fwlab-bundle.XXXXXX")
  cleanup+=("$work"); on_exit
  mkdir -p "$work/debs" "$work/root" "$work/tools"

  candidate() { apt-cache policy "$1" 2>/dev/null | awk '/Candidate:/ {print $2}'; }
  [ -n "$(candidate libfmt-dev)" ] && [ "$(candidate libfmt-dev)" != "(none)" ] ||
    die "apt knows no libfmt-dev: the package lists are empty; run 'apt-get update' (as root) first"

  # Boost: the newest libboostX.Y-dev (the project uses 1.81; bookworm's libboost-dev still means 1.74).
  local boost_pkg=${FWLAB_BUNDLE_BOOST_PKG:-$(apt-cache search --names-only '^libboost1\.[0-9]+-dev$' | awk '{print $1}' | sort -V | tail -1)}
  [ -n "$boost_pkg" ] || die "no libboost1.XX-dev package known to apt"
  local dev_pkgs=(libfmt-dev nlohmann-json3-dev libsimdjson-dev libsqlite3-dev libtomlplusplus-dev libcli11-dev catch2
                  libicu-dev libssl-dev libsentencepiece-dev libcpp-httplib-dev libbrotli-dev libmd4c-dev libmd4c-html0-dev
                  "$boost_pkg")
  local header_only_runtime='^(libfmt[0-9]+|libtomlplusplus[0-9]+)$'  # made header-only below: their .so is not needed
  local specs=() p v dep
  for p in "${dev_pkgs[@]}"; do
    v=$(candidate "$p"); [ -n "$v" ] && [ "$v" != "(none)" ] || die "apt has no candidate for $p"
    specs+=("$p=$v")
    # The runtime library packages: the dependencies pinned to the same source version, "libfoo1 (= 1.2-3)".
    for dep in $(apt-cache show --no-all-versions "$p=$v" | sed -n 's/^Depends: //p' | tr ',' '\n' |
                 sed -nE 's/^ *(lib[a-z0-9.+-]+)(:any)? \(= ([^)]+)\).*/\1=\3/p'); do
      [[ ${dep%%=*} =~ $header_only_runtime ]] || specs+=("$dep")
    done
  done
  local patchelf; patchelf=$(command -v patchelf || true)
  [ -n "$patchelf" ] || specs+=("patchelf=$(candidate patchelf)")
  specs+=("pkgconf-bin=$(candidate pkgconf-bin)" "libpkgconf3=$(candidate libpkgconf3)")  # the worker's and cli's pkg_check_modules
  echo "bundle_deps: downloading ${specs[*]}"
  local sandbox=(); [ "$(id -u)" -eq 0 ] && sandbox=(-o APT::Sandbox::User=root)
  (cd "$work/debs" && apt-get download -q "${sandbox[@]}" "${specs[@]}" >"$work/download.log" 2>&1) ||
    { cat "$work/download.log"; die "apt-get download failed"; }
  local deb
  for deb in "$work"/debs/*.deb; do
    case ${deb##*/} in patchelf_*) dpkg -x "$deb" "$work/tools" ;; pkgconf-bin_*|libpkgconf3_*) dpkg -x "$deb" "$work/pkgconf" ;;
                       *) dpkg -x "$deb" "$work/root" ;; esac
  done
  [ -n "$patchelf" ] || patchelf=$work/tools/usr/bin/patchelf

  local pre=$work/fwlab-deps
  mv "$work/root/usr" "$pre"
  [ -z "$(ls -A "$work/root")" ] || die "packages installed files outside /usr: $(ls "$work/root")"
  mkdir -p "$pre/share/fwlab-deps"
  ( cd "$work/debs" && for deb in *.deb; do dpkg-deb -W --showformat='${Package} ${Version}\n' "$deb"; done ) |
    grep -v '^patchelf ' >"$pre/share/fwlab-deps/packages.txt"

  # Prune: documentation except the licences, static libraries, ICU's and Boost's build-system files, OpenSSL's
  # engines and providers (libcrypto loads them from a path compiled in as Debian's /usr/lib, and SHA-256 is built in).
  find "$pre/share/doc" -type f ! -name copyright -delete
  find "$pre/share/doc" -type l -delete
  find "$pre/share/doc" -depth -type d -empty -delete
  rm -rf "${pre:?}/share/man" "$pre/share/lintian" "$pre/share/doc-base" "$pre/share/icu" "${pre:?}/bin" "$pre/lib/$arch/icu" \
         "$pre/lib/$arch/engines-3" "$pre/lib/$arch/ossl-modules" "$pre/lib/$arch"/cmake/Boost* "$pre/lib/$arch"/cmake/boost*
  find "$pre/lib" -name '*.a' -delete
  rm -f "$pre/lib/$arch"/libfmt.so* "$pre/lib/$arch"/libtomlplusplus.so*
  # pkgconf, for hosts without pkg-config (fwlab-deps.cmake points FindPkgConfig at it), finding its library next door.
  mkdir -p "$pre/bin"
  cp "$work/pkgconf/usr/bin/pkgconf" "$pre/bin/"
  cp -a "$work/pkgconf/usr/lib/$arch"/libpkgconf.so.* "$pre/lib/$arch/"
  "$patchelf" --set-rpath "\$ORIGIN/../lib/$arch" "$pre/bin/pkgconf"
  # cpp-httplib's zlib: the host's libz.so.1 (every glibc system has one); zlib1g-dev's symlink points outside /usr.
  sed -i -E 's/, *zlib//' "$pre/lib/$arch/pkgconfig/cpp-httplib.pc"

  # OpenSSL's multiarch headers into include/openssl, where a compiler without Debian's multiarch paths finds them.
  if [ -d "$pre/include/$arch/openssl" ]; then
    for f in "$pre/include/$arch/openssl"/*; do
      [ ! -e "$pre/include/openssl/${f##*/}" ] || die "OpenSSL header ${f##*/} in both include/ and include/$arch/"
      mv "$f" "$pre/include/openssl/"
    done
    rmdir "$pre/include/$arch/openssl"; rmdir "$pre/include/$arch" 2>/dev/null || true
  fi

  # Boost: only the closure of what fwlab includes.
  if [ "$full_boost" = 0 ]; then
    local seeds; mapfile -t seeds < <(boost_seeds)
    boost_closure "$pre/include" "${seeds[@]}" >"$work/boost-files.txt"
    mkdir -p "$work/boost-subset"
    (cd "$pre/include" && tar cf - -T "$work/boost-files.txt") | (cd "$work/boost-subset" && tar xf -)
    rm -rf "$pre/include/boost"; mv "$work/boost-subset/boost" "$pre/include/boost"
  fi

  # fmt and TOML++ header-only, Catch2WithMain as a source compiled into each test binary (see the header).
  local cm=$pre/lib/$arch/cmake
  rm -f "$cm/fmt/fmt-targets"*.cmake
  cat >"$cm/fmt/fmt-config.cmake" <<'EOF'
# fwlab bundle: fmt as header-only (FMT_HEADER_ONLY), so that it follows the consumer's _GLIBCXX_USE_CXX11_ABI.
get_filename_component(_fwlab_fmt_prefix "${CMAKE_CURRENT_LIST_DIR}/../../../.." ABSOLUTE)
if(NOT TARGET fmt::fmt-header-only)
  add_library(fmt::fmt-header-only INTERFACE IMPORTED)
  set_target_properties(fmt::fmt-header-only PROPERTIES INTERFACE_COMPILE_DEFINITIONS "FMT_HEADER_ONLY=1"
    INTERFACE_COMPILE_FEATURES "cxx_variadic_templates" INTERFACE_INCLUDE_DIRECTORIES "${_fwlab_fmt_prefix}/include")
endif()
if(NOT TARGET fmt::fmt)
  add_library(fmt::fmt INTERFACE IMPORTED)
  set_target_properties(fmt::fmt PROPERTIES INTERFACE_LINK_LIBRARIES fmt::fmt-header-only)
endif()
unset(_fwlab_fmt_prefix)
set(fmt_FOUND TRUE)
EOF
  cat >"$cm/tomlplusplus/tomlplusplusConfig.cmake" <<'EOF'
# fwlab bundle: TOML++ as header-only (TOML_HEADER_ONLY=1), so that it follows the consumer's _GLIBCXX_USE_CXX11_ABI.
get_filename_component(_fwlab_toml_prefix "${CMAKE_CURRENT_LIST_DIR}/../../../.." ABSOLUTE)
if(NOT TARGET tomlplusplus::tomlplusplus)
  add_library(tomlplusplus::tomlplusplus INTERFACE IMPORTED)
  set_target_properties(tomlplusplus::tomlplusplus PROPERTIES INTERFACE_COMPILE_DEFINITIONS "TOML_HEADER_ONLY=1"
    INTERFACE_COMPILE_FEATURES "cxx_std_17" INTERFACE_INCLUDE_DIRECTORIES "${_fwlab_toml_prefix}/include")
endif()
unset(_fwlab_toml_prefix)
set(tomlplusplus_FOUND TRUE)
EOF
  rm -f "$pre/lib/cmake/Catch2/Catch2Targets-"*.cmake
  cat >"$pre/lib/cmake/Catch2/Catch2Targets.cmake" <<'EOF'
# fwlab bundle: Catch2 2.x is header-only; Catch2WithMain compiles share/fwlab-deps/catch2_main.cpp into each binary
# that links it (with that binary's flags, _GLIBCXX_USE_CXX11_ABI included) instead of Debian's libCatch2WithMain.a.
get_filename_component(_fwlab_catch2_prefix "${CMAKE_CURRENT_LIST_DIR}/../../.." ABSOLUTE)
if(NOT TARGET Catch2::Catch2)
  add_library(Catch2::Catch2 INTERFACE IMPORTED)
  set_target_properties(Catch2::Catch2 PROPERTIES INTERFACE_COMPILE_FEATURES "cxx_std_11"
    INTERFACE_INCLUDE_DIRECTORIES "${_fwlab_catch2_prefix}/include")
  add_library(Catch2::Catch2WithMain INTERFACE IMPORTED)
  set_target_properties(Catch2::Catch2WithMain PROPERTIES INTERFACE_LINK_LIBRARIES Catch2::Catch2
    INTERFACE_SOURCES "${_fwlab_catch2_prefix}/share/fwlab-deps/catch2_main.cpp")
endif()
unset(_fwlab_catch2_prefix)
EOF
  printf '%s\n' '// Catch2 2.x main for Catch2::Catch2WithMain (fwlab bundle): compiled into each test binary with its flags.' \
    '#define CATCH_CONFIG_MAIN' '#include <catch2/catch.hpp>' >"$pre/share/fwlab-deps/catch2_main.cpp"

  # CMake files: drop Debian's "/usr move" blocks (they compare the file's location with Debian's /usr path).
  find "$pre" -name '*.cmake' -type f -exec sed -i '/^# Use original install prefix when loaded through a/,/^unset(_realCurr)$/d' {} +
  # pkg-config files: the prefix relative to the file, every other /usr through ${prefix}; fmt and TOML++ header-only.
  local pc rel
  while IFS= read -r pc; do
    case ${pc#$pre/} in lib/$arch/pkgconfig/*) rel=../../.. ;; lib/pkgconfig/*|share/pkgconfig/*) rel=../.. ;; *) die "unexpected $pc" ;; esac
    sed -i -E '/^prefix *=/d; s#/usr(/|$)#${prefix}\1#g' "$pc"
    sed -i "1i prefix=\${pcfiledir}/$rel" "$pc"
  done < <(find "$pre" -name '*.pc' -type f)
  sed -i -E 's/^Libs:.*/Libs:/; s/^Cflags:.*/Cflags: -I${includedir} -DFMT_HEADER_ONLY=1/' "$pre/lib/$arch/pkgconfig/fmt.pc"
  sed -i -E 's/^Libs:.*/Libs:/; s/^Cflags:.*/Cflags: -I${includedir} -DTOML_HEADER_ONLY=1/' "$pre/lib/$arch/pkgconfig/tomlplusplus.pc"

  # Shared libraries that need another bundled one find it next to themselves.
  local so need own
  while IFS= read -r so; do
    own=0
    for need in $("$patchelf" --print-needed "$so"); do [ -e "$pre/lib/$arch/$need" ] && own=1; done
    [ "$own" = 1 ] && "$patchelf" --set-rpath '$ORIGIN' "$so"
  done < <(find "$pre/lib/$arch" -maxdepth 1 -type f -name '*.so*')

  # Symlinks: make absolute ones relative (none in bookworm's packages, but cheap to guarantee).
  local l t
  while IFS= read -r l; do
    t=$(readlink "$l"); case $t in /usr/*) ln -sfn "$(realpath -m --relative-to="$(dirname "$l")" "$pre${t#/usr}")" "$l" ;; esac
  done < <(find "$pre" -type l -lname '/*')

  # Host requirements: the newest symbol versions the bundled libraries need.
  local glibc glibcxx cxxabi
  glibc=$(find "$pre/lib/$arch" -maxdepth 1 -type f -name '*.so*' -exec grep -aohE 'GLIBC_2\.[0-9]+' {} + | sort -uV | tail -1)
  glibcxx=$(find "$pre/lib/$arch" -maxdepth 1 -type f -name '*.so*' -exec grep -aohE 'GLIBCXX_3\.4\.[0-9]+' {} + | sort -uV | tail -1)
  cxxabi=$(find "$pre/lib/$arch" -maxdepth 1 -type f -name '*.so*' -exec grep -aohE 'CXXABI_1\.3\.[0-9]+' {} + | sort -uV | tail -1)
  write_deps_cmake "$pre/fwlab-deps.cmake" "${glibc#GLIBC_}" "${glibcxx}" "${cxxabi}"
  {
    echo "fwlab dependency bundle, made $(date -u +%Y-%m-%d) on $(. /etc/os-release; echo "$PRETTY_NAME") by scripts/bundle_deps.sh."
    echo "Use: cmake ... -DCMAKE_PROJECT_INCLUDE=<this dir>/fwlab-deps.cmake -DCMAKE_PREFIX_PATH=<PyTorch's cmake prefix>"
    echo "Needs glibc >= ${glibc#GLIBC_} and a libstdc++ with $glibcxx / $cxxabi. Packages:"
    sed 's/^/  /' "$pre/share/fwlab-deps/packages.txt"
  } >"$pre/README.txt"

  check_bundle "$pre"
  tar -C "$work" --owner=0 --group=0 --numeric-owner -czf "$out" fwlab-deps

  echo
  echo "bundle_deps: wrote $out ($(du -h "$out" | cut -f1), $(stat -c %s "$out") bytes; $(du -sh "$pre" | cut -f1) unpacked," \
       "$(find "$pre" -type f | wc -l) files, Boost: $([ "$full_boost" = 1 ] && echo all headers || echo "$(find "$pre/include/boost" -type f | wc -l) headers of Boost.Process's closure"))"
  echo "  packages: $(awk '{printf "%s%s %s", sep, $1, $2; sep=", "}' "$pre/share/fwlab-deps/packages.txt")"
  echo "  include/: $(cd "$pre/include" && ls | paste -sd' ')"
  echo "  lib/$arch: $(cd "$pre/lib/$arch" && find . -maxdepth 1 -name 'lib*.so.[0-9]*' ! -name '*.so.*.*' -printf '%P\n' | sort | paste -sd' ')"
  echo "  unpacked sizes: $(cd "$pre" && for d in include/boost include lib/$arch/libicudata.so.*.* lib share; do du -sh --apparent-size "$d"; done |
                          awk '{printf "%s%s %s", sep, $2, $1; sep="; "}') (include counts boost, lib counts libicudata)"
  echo "  host needs: glibc >= ${glibc#GLIBC_}, libstdc++ with $glibcxx and $cxxabi (GCC 12's or newer)"
}

write_deps_cmake() {  # FILE GLIBC GLIBCXX CXXABI
  cat >"$1" <<EOF
# fwlab's third-party libraries from Debian 12 (scripts/bundle_deps.sh), relocatable: configure fwlab with
#   cmake -S fwlab -B build -G Ninja -DCMAKE_PROJECT_INCLUDE=<this dir>/fwlab-deps.cmake \\
#         -DCMAKE_PREFIX_PATH="\$(python3 -c 'import torch; print(torch.utils.cmake_prefix_path)')"
# CMake includes this file right after project(): it puts the bundle first on the search path, sets
# CMAKE_LIBRARY_ARCHITECTURE so that Debian's lib/x86_64-linux-gnu is searched on any host, points FindICU,
# FindOpenSSL and FindSQLite3 at the bundle, and adds its include directory for Boost (header-only, no CMake package).
# Binaries in the build tree find the bundle's shared libraries through the build RPATH; others need
#   LD_LIBRARY_PATH=<this dir>/lib/x86_64-linux-gnu
# pkg-config users: PKG_CONFIG_PATH=<this dir>/lib/x86_64-linux-gnu/pkgconfig:<this dir>/share/pkgconfig
get_filename_component(FWLAB_DEPS_ROOT "\${CMAKE_CURRENT_LIST_DIR}" REALPATH)
if(NOT CMAKE_SYSTEM_PROCESSOR MATCHES "^(x86_64|AMD64|amd64)\$")
  message(FATAL_ERROR "fwlab-deps: the bundle holds x86_64 libraries; this is \${CMAKE_SYSTEM_PROCESSOR}")
endif()
list(PREPEND CMAKE_PREFIX_PATH "\${FWLAB_DEPS_ROOT}")
if(NOT CMAKE_LIBRARY_ARCHITECTURE)
  set(CMAKE_LIBRARY_ARCHITECTURE x86_64-linux-gnu)
endif()
set(ICU_ROOT "\${FWLAB_DEPS_ROOT}")
set(OPENSSL_ROOT_DIR "\${FWLAB_DEPS_ROOT}")
set(SQLite3_ROOT "\${FWLAB_DEPS_ROOT}")
# pkg_check_modules (SentencePiece, cpp-httplib): the bundle's pkgconf and .pc files, whatever the host has.
if(NOT PKG_CONFIG_EXECUTABLE)
  set(PKG_CONFIG_EXECUTABLE "\${FWLAB_DEPS_ROOT}/bin/pkgconf" CACHE FILEPATH "pkg-config (fwlab-deps)")
endif()
set(ENV{PKG_CONFIG_PATH} "\${FWLAB_DEPS_ROOT}/lib/x86_64-linux-gnu/pkgconfig:\${FWLAB_DEPS_ROOT}/share/pkgconfig:\$ENV{PKG_CONFIG_PATH}")
include_directories(SYSTEM "\${FWLAB_DEPS_ROOT}/include")

# The bundled libraries need glibc >= $2 and $3 / $4 (GCC 12's libstdc++): say so now rather than as an
# undefined symbol at link time. -DFWLAB_DEPS_SKIP_HOST_CHECK=ON skips this (e.g. a newer libstdc++ at run time).
if(NOT FWLAB_DEPS_SKIP_HOST_CHECK)
  execute_process(COMMAND getconf GNU_LIBC_VERSION OUTPUT_VARIABLE _fwlab_glibc ERROR_QUIET OUTPUT_STRIP_TRAILING_WHITESPACE)
  string(REGEX MATCH "[0-9]+\\\\.[0-9]+" _fwlab_glibc "\${_fwlab_glibc}")
  if(_fwlab_glibc AND _fwlab_glibc VERSION_LESS $2)
    message(FATAL_ERROR "fwlab-deps: this host has glibc \${_fwlab_glibc}; the bundle's libraries (Debian 12) need glibc >= $2")
  endif()
  execute_process(COMMAND "\${CMAKE_CXX_COMPILER}" -print-file-name=libstdc++.so.6 OUTPUT_VARIABLE _fwlab_stdcxx
                  ERROR_QUIET OUTPUT_STRIP_TRAILING_WHITESPACE)
  if(IS_ABSOLUTE "\${_fwlab_stdcxx}" AND EXISTS "\${_fwlab_stdcxx}")
    foreach(_fwlab_v $3 $4)
      file(STRINGS "\${_fwlab_stdcxx}" _fwlab_has REGEX "^\${_fwlab_v}\$" LIMIT_COUNT 1)
      if(NOT _fwlab_has)
        message(FATAL_ERROR "fwlab-deps: \${_fwlab_stdcxx} has no \${_fwlab_v}; the bundle's libraries (Debian 12) need "
                            "GCC 12's libstdc++ or newer (-DFWLAB_DEPS_SKIP_HOST_CHECK=ON to try anyway)")
      endif()
    endforeach()
  endif()
  unset(_fwlab_glibc)
  unset(_fwlab_stdcxx)
  unset(_fwlab_has)
endif()
message(STATUS "fwlab-deps: third-party libraries from \${FWLAB_DEPS_ROOT}")
EOF
}

# ---------------------------------------------------------------------------------------------------------------
self_test() {
  [ -r /etc/os-release ] && . /etc/os-release
  if [ "${VERSION_CODENAME:-}" != bookworm ] || ! command -v apt-get >/dev/null; then
    echo "bundle_deps --self-test: not Debian 12; skipped"; exit 77
  fi
  local t; t=$(mktemp -d "${TMPDIR:-/tmp}/fwlab-bundle-selftest.XXXXXX")
  cleanup+=("$t"); on_exit
  local status=0
  ( cleanup=(); make_bundle "$t/made/fwlab-deps.tar.gz" 0 ) >"$t/make.log" 2>&1 || status=$?  # cleans only its own
  if [ "$status" != 0 ]; then
    if grep -qE 'apt-get download failed|package lists are empty|no candidate' "$t/make.log"; then
      tail -5 "$t/make.log"; echo "bundle_deps --self-test: apt cannot download here; skipped"; exit 77
    fi
    cat "$t/make.log"; exit 1
  fi
  grep '^bundle_deps: wrote' "$t/make.log"
  mkdir -p "$t/elsewhere"
  tar -C "$t/elsewhere" -xzf "$t/made/fwlab-deps.tar.gz"
  rm -rf "$t/made"
  check_bundle "$t/elsewhere/fwlab-deps" --compile
}

case "${1:-}" in
  -h|--help) usage ;;
  '') echo "usage: $0 OUT.tar.gz | --full-boost OUT.tar.gz | --check DIR [--compile] | --self-test | --help" >&2; exit 2 ;;
  --check) [ $# -ge 2 ] || die "--check DIR [--compile]"; check_bundle "$2" "${3:-}" ;;
  --self-test) self_test ;;
  --full-boost) [ $# -eq 2 ] || die "--full-boost OUT.tar.gz"; make_bundle "$2" 1 ;;
  -*) die "unknown option $1 (see --help)" ;;
  *) [ $# -eq 1 ] || die "usage: $0 OUT.tar.gz"; make_bundle "$1" 0 ;;
esac
