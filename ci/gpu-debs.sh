#!/usr/bin/env bash
# Fetches, here, the Debian packages the GPU machine lacks (Open MPI, OpenBLAS, toml++,
# CLI11, nlohmann-json, fccp, GoogleTest, Google Benchmark, pkg-config) into .gpu-debs/ (git
# ignores it), for ci/gpu-check.sh to unpack there with dpkg -x. The device tool carries it:
#   bash ci/gpu-debs.sh   then   run(command="bash ci/gpu-check.sh", carry=[".gpu-debs"])
# Besides the named packages it takes every shared library they load that is not part of a
# base system (glibc, libstdc++, zlib, ...): each library's package is found with dpkg -S.
set -euo pipefail
cd "$(dirname "$0")/.."
DIR=.gpu-debs
PKGS=(openmpi-bin openmpi-common libopenmpi3 libopenmpi-dev libopenblas0-pthread libopenblas-pthread-dev
      libopenblas-dev libtomlplusplus-dev libtomlplusplus3 libcli11-dev nlohmann-json3-dev libfccp-dev
      libgtest-dev libgmock-dev libbenchmark-dev libbenchmark1debian pkgconf pkgconf-bin libpkgconf3
      libhwloc-plugins libgfortran5)
# Present on any machine that runs our binaries (the GPU image is a glibc system with a C++ toolchain).
BASE='^(libc6|libstdc\+\+6|libgcc-s1|zlib1g|libzstd1|liblzma5|libbz2-1.0|libssl3|libcrypt1|libselinux1|libpcre2-8-0|libsystemd0|libcap2|libgcrypt20|libgpg-error0|liblz4-1|libudev1)$'
mkdir -p "$DIR"
fetch() { (cd "$DIR" && apt-get download "$@" 2>&1 | grep -Ev "^(W: Download is performed unsandboxed|Get:|Fetched)" >&2 || true); }
rm -f "$DIR"/*.deb
fetch "${PKGS[@]}"
# Close over the libraries they load: unpack, ldd every ELF, add the owners of what resolves
# outside the unpacked tree, until nothing new appears.
for round in 1 2 3 4; do
  root=$(mktemp -d)
  for f in "$DIR"/*.deb; do dpkg -x "$f" "$root"; done
  libdirs=$(find "$root" -name '*.so*' -printf '%h\n' | sort -u | tr '\n' ':')
  need=()
  while read -r lib; do
    # Merged /usr: dpkg may know the file under /lib or under /usr/lib.
    owner=$( (dpkg -S "$lib" || dpkg -S "${lib#/usr}" || dpkg -S "/usr$lib") 2>/dev/null | head -1 | cut -d: -f1) || true
    [[ -z $owner || $owner =~ $BASE ]] && continue
    ls "$DIR"/"${owner}"_*.deb >/dev/null 2>&1 || need+=("$owner")
  done < <(find "$root" -type f \( -name '*.so*' -o -path '*/bin/*' \) -exec sh -c 'file -b "$1" | grep -q ELF && echo "$1"' _ {} \; |
           xargs -r env LD_LIBRARY_PATH="$libdirs" ldd 2>/dev/null | awk '/=> \// {print $3}' | grep -v "^$root" | sort -u)
  rm -rf "$root"
  mapfile -t need < <(printf '%s\n' "${need[@]}" | sort -u | sed '/^$/d')
  ((${#need[@]})) || break
  echo "gpu-debs: round $round adds ${need[*]}"
  fetch "${need[@]}"
done
du -sh "$DIR"
ls "$DIR" | wc -l
