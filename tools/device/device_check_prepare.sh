# tools/device/device_check_prepare.sh — `tools/device/device_check.sh --prepare`: build and pack the
# kit on the build machine (device_check.sh's header says what the kit holds and why). Apart from
# device_check.sh because it is the other machine's half: nothing here runs on the GPU machine,
# and nothing of the GPU run is needed here. Sourced by device_check.sh (ROOT, KIT_ARCHIVE set
# there); not run on its own.
# shellcheck shell=bash
if [[ "${BASH_SOURCE[0]}" == "$0" ]]; then
  echo "device_check_prepare.sh: sourced by tools/device/device_check.sh; run that (--help)" >&2
  exit 2
fi

# ---------------------------------------------------------------------------------------------
# --prepare: build and pack the kit (on the build machine; slow on 2 cores: a full CUDA build).
# ---------------------------------------------------------------------------------------------
prepare() {
  set -e
  local build="$ROOT/build/device" jobs="${JOBS:-2}"
  cmake -S "$ROOT" -B "$build" -G Ninja -DCMAKE_BUILD_TYPE=Release -DBLOCKSCOPE_CUDA=ON \
    -DCMAKE_CUDA_ARCHITECTURES=90 -DBLOCKSCOPE_CPU_GEMM=BUILTIN -DBLOCKSCOPE_TESTS=ON -DBLOCKSCOPE_BENCH=ON \
    -DBLOCKSCOPE_NCCL="${DEVICE_CHECK_NCCL:-OFF}"  # libnccl (218 MB) outweighs the kit: linked, not packed
  cmake --build "$build" -j "$jobs"

  local kit="$build/kit"
  rm -rf "$kit"
  mkdir -p "$kit/bin" "$kit/lib" "$kit/loader"
  cp "$build"/bin/* "$kit/bin/"
  cp "$build"/test/*_test "$kit/bin/"
  cp "$build"/conformance/conformance_* "$kit/bin/" 2>/dev/null || true
  strip --strip-unneeded "$kit"/bin/*

  # Shared libraries: the machine's own CUDA libraries stay behind; the C runtime goes to
  # loader/ (fallback only, see the header); everything else to lib/.
  local lib name
  for lib in $(ldd "$kit"/bin/* 2>/dev/null | awk '$2 == "=>" && $3 ~ /^\// { print $3 }' | sort -u); do
    name=$(basename "$lib")
    case "$name" in
      libcuda.so*|libcublas*|libcupti*|libnvidia*|libnvrtc*|libcudart.so*|libnccl*) ;;  # the GPU machine's own
      libc.so*|libm.so*|libpthread.so*|libdl.so*|librt.so*|libutil.so*|libstdc++.so*|libgcc_s.so*)
        cp -L "$lib" "$kit/loader/$name" ;;
      *) cp -L "$lib" "$kit/lib/$name" ;;
    esac
  done
  cp -L /lib64/ld-linux-x86-64.so.2 "$kit/loader/"
  git -C "$ROOT" rev-parse HEAD > "$kit/COMMIT" 2>/dev/null || echo unknown > "$kit/COMMIT"
  # What the GPU machine must offer (checked there before anything runs): a driver whose CUDA
  # version is at least the runtime's, and a GPU these architectures have code for.
  nvcc --version | grep -Eo 'release [0-9]+\.[0-9]+' | grep -Eo '[0-9.]+$' > "$kit/CUDA_VERSION" ||
    echo unknown > "$kit/CUDA_VERSION"
  echo 90 > "$kit/CUDA_ARCHS"  # CMAKE_CUDA_ARCHITECTURES above: sm_90 code + compute_90 PTX
  # Tests and benchmarks have this checkout's path compiled in (BLOCKSCOPE_SOURCE_DIR).
  echo "$ROOT" > "$kit/SOURCE_DIR"
  git -C "$ROOT" status --porcelain --untracked-files=no | head -20 > "$kit/DIRTY" || true

  rm -f "$KIT_ARCHIVE"
  tar -C "$build" -cf - kit | xz -9e --lzma2=preset=9e,dict=64MiB -T "$jobs" > "$KIT_ARCHIVE"
  local bytes
  bytes=$(stat -c %s "$KIT_ARCHIVE")
  echo "device_check: kit $(du -h "$KIT_ARCHIVE" | cut -f1) at $KIT_ARCHIVE ($(ls "$kit/bin" | wc -l) binaries," \
       "commit $(cut -c1-12 "$kit/COMMIT"))"
  if (( bytes > 48 * 1024 * 1024 )); then
    echo "device_check: the kit is over 48 MiB: with the source it may not fit the 64 MiB the device tool carries" >&2
    exit 1
  fi
  echo "device_check: now run on the GPU machine: tools/device/device_check.sh   (carry: build/device-kit.tar.xz)"
}
