#!/usr/bin/env bash
# Validates the CUDA path on a machine with a GPU, without Bazel: builds the
# CUDA memory source, the checkpoint runtime and the collector and runtime
# tests with the C++ compiler against the LibTorch inside an installed
# CUDA-enabled PyTorch, then runs them (the [cuda]-tagged cases must run,
# not skip). One run on a GPU machine checks the CUDA path and, since that
# LibTorch is 2.x, the version shim (collector/torch_compat.h) too.
#
# Exit codes: 0 passed; 77 skipped (no PyTorch, or no GPU visible to it);
# anything else failed.
#
# Needs, besides PyTorch:
#   * a C++17 compiler ($CXX, default g++);
#   * abseil headers and shared libraries (Status, StatusOr, strings,
#     synchronization): REMAT_ABSL_PREFIX (default /usr), holding
#     include/absl and lib/ (or lib/x86_64-linux-gnu/) with libabsl_*.so;
#   * Catch2 v2's single header: REMAT_CATCH2_INCLUDE (default
#     /usr/include), holding catch2/catch.hpp.
# The CUDA memory source and the checkpoint function need neither; the
# runtime's planner interface and the sampler use absl::Status. A machine
# without abseil can use a copy of Debian 12's: /usr/include/absl and
# /usr/lib/x86_64-linux-gnu/libabsl_*.so* (links dereferenced, under both
# the .so and the .so.20220623 names) put in one prefix; the same for
# /usr/include/catch2.
set -euo pipefail
cd "$(dirname "$0")/.."

PYTHON=${PYTHON:-python3}
CXX=${CXX:-g++}
ABSL_PREFIX=${REMAT_ABSL_PREFIX:-/usr}
CATCH2_INCLUDE=${REMAT_CATCH2_INCLUDE:-/usr/include}
BUILD_DIR=${REMAT_GPU_BUILD_DIR:-$(mktemp -d)}

skip() { echo "gpu_check: SKIPPED: $*"; exit 77; }
fail() { echo "gpu_check: FAILED: $*" >&2; exit 1; }

# REMAT_GPU_CHECK_REHEARSAL=1 with REMAT_TORCH_ROOT=<a CPU LibTorch root>
# runs every step but the CUDA ones (no CUDA source, [cuda] cases skip), to
# check this script itself on a machine without a GPU; it ends with 77.
REHEARSAL=${REMAT_GPU_CHECK_REHEARSAL:-0}
if [ "$REHEARSAL" = 1 ]; then
  TORCH_ROOT=${REMAT_TORCH_ROOT:?set REMAT_TORCH_ROOT for a rehearsal}
  CXX11_ABI=${REMAT_CXX11_ABI:-1}
  echo "gpu_check: REHEARSAL without CUDA against $TORCH_ROOT"
else
  command -v "$PYTHON" >/dev/null || skip "no $PYTHON, so no PyTorch"
  probe='import os, torch
print(os.path.dirname(torch.__file__))
print(int(torch._C._GLIBCXX_USE_CXX11_ABI))
print(int(torch.cuda.is_available()))
print(torch.__version__)
print(torch.version.cuda or "none")'
  info=$("$PYTHON" -c "$probe" 2>/dev/null) ||
    skip "PyTorch is not installed for $PYTHON"
  TORCH_ROOT=$(sed -n 1p <<<"$info")
  CXX11_ABI=$(sed -n 2p <<<"$info")
  HAVE_GPU=$(sed -n 3p <<<"$info")
  echo "gpu_check: PyTorch $(sed -n 4p <<<"$info") (CUDA $(sed -n 5p <<<"$info")) at $TORCH_ROOT"
  [ "$HAVE_GPU" = 1 ] || skip "torch.cuda.is_available() is false"
  [ -e "$TORCH_ROOT/lib/libc10_cuda.so" ] ||
    skip "this PyTorch has no CUDA libraries"
fi

command -v "$CXX" >/dev/null || fail "no C++ compiler ($CXX); set CXX"
[ -e "$ABSL_PREFIX/include/absl/status/status.h" ] ||
  fail "abseil headers not found under $ABSL_PREFIX/include; set REMAT_ABSL_PREFIX"
ABSL_LIB=""
for d in "$ABSL_PREFIX/lib" "$ABSL_PREFIX/lib/x86_64-linux-gnu" "$ABSL_PREFIX/lib64"; do
  if ls "$d"/libabsl_status.so* >/dev/null 2>&1; then ABSL_LIB=$d; break; fi
done
[ -n "$ABSL_LIB" ] || fail "libabsl_status.so not found under $ABSL_PREFIX; set REMAT_ABSL_PREFIX"
[ -e "$CATCH2_INCLUDE/catch2/catch.hpp" ] ||
  fail "catch2/catch.hpp not found under $CATCH2_INCLUDE; set REMAT_CATCH2_INCLUDE"

CXXFLAGS=(-std=c++17 -O1 -fPIC -D_GLIBCXX_USE_CXX11_ABI="$CXX11_ABI" -I.
  -isystem "$TORCH_ROOT/include"
  -isystem "$TORCH_ROOT/include/torch/csrc/api/include")
# /usr/include is searched already; naming it with -isystem would break the
# C++ library's #include_next.
for dir in "$ABSL_PREFIX/include" "$CATCH2_INCLUDE"; do
  [ "$(realpath "$dir")" = /usr/include ] || CXXFLAGS+=(-isystem "$dir")
done
LIBS=(-L"$TORCH_ROOT/lib" -Wl,-rpath,"$TORCH_ROOT/lib" -Wl,--no-as-needed
  -ltorch -ltorch_cpu -lc10)
if [ "$REHEARSAL" != 1 ]; then
  CXXFLAGS+=(-DREMAT_WITH_CUDA)
  LIBS+=(-ltorch_cuda -lc10_cuda)
fi
LIBS+=(-Wl,--as-needed -L"$ABSL_LIB" -Wl,-rpath,"$ABSL_LIB")
for l in statusor status cord cordz_info cord_internal cordz_functions \
         cordz_handle exponential_biased hash city low_level_hash \
         raw_hash_set hashtablez_sampler bad_optional_access \
         bad_variant_access str_format_internal synchronization \
         graphcycles_internal stacktrace symbolize debugging_internal \
         demangle_internal malloc_internal time civil_time time_zone \
         strings strings_internal strerror throw_delegate base \
         spinlock_wait int128 raw_logging_internal log_severity; do
  LIBS+=(-labsl_$l)
done
LIBS+=(-lpthread)

LIB_SRCS=(collector/cpu_memory_tracker.cc
  collector/block_sampler.cc collector/trace_recorder.cc
  client/checkpoint.cc client/plan_chooser.cc client/runtime.cc
  planner/model.cc planner/plan.cc third_party/catch2_main.cc)
TEST_SRCS=(collector/collector_torch_test.cc client/runtime_test.cc)
[ "$REHEARSAL" = 1 ] || LIB_SRCS+=(collector/cuda_memory_source.cc)

mkdir -p "$BUILD_DIR"
JOBS=${REMAT_GPU_CHECK_JOBS:-$(nproc)}
echo "gpu_check: compiling $(( ${#LIB_SRCS[@]} + ${#TEST_SRCS[@]} )) files in $BUILD_DIR ($JOBS at a time)"
for src in "${LIB_SRCS[@]}" "${TEST_SRCS[@]}"; do
  obj="$BUILD_DIR/$(tr / _ <<<"${src%.cc}").o"
  rm -f "$obj.ok"
  while [ "$(jobs -rp | wc -l)" -ge "$JOBS" ]; do wait -n || true; done
  ( "$CXX" "${CXXFLAGS[@]}" -c "$src" -o "$obj" && touch "$obj.ok" ) \
    >"$obj.log" 2>&1 &
done
wait || true
status=0
for src in "${LIB_SRCS[@]}" "${TEST_SRCS[@]}"; do
  obj="$BUILD_DIR/$(tr / _ <<<"${src%.cc}").o"
  if [ ! -e "$obj.ok" ]; then
    echo "gpu_check: compiling $src failed:" >&2
    head -60 "$obj.log" >&2
    status=1
  fi
done
[ "$status" = 0 ] || fail "compilation"

LIB_OBJS=()
for src in "${LIB_SRCS[@]}"; do LIB_OBJS+=("$BUILD_DIR/$(tr / _ <<<"${src%.cc}").o"); done
for src in "${TEST_SRCS[@]}"; do
  name=$(basename "${src%.cc}")
  "$CXX" -o "$BUILD_DIR/$name" "$BUILD_DIR/$(tr / _ <<<"${src%.cc}").o" \
    "${LIB_OBJS[@]}" "${LIBS[@]}" || fail "linking $name"
done

if [ "$REHEARSAL" = 1 ]; then
  "$BUILD_DIR/collector_torch_test" || fail "collector_torch_test"
  "$BUILD_DIR/runtime_test" || fail "runtime_test"
  skip "rehearsal passed; the CUDA path was not checked"
fi
echo "gpu_check: [cuda] cases"
out=$("$BUILD_DIR/collector_torch_test" "[cuda]" --success 2>&1) || {
  echo "$out"; fail "[cuda] cases"; }
echo "$out" | tail -3
if grep -q "skipped" <<<"$out"; then
  echo "$out" | grep -B2 -A2 skipped
  fail "[cuda] cases skipped on a GPU machine"
fi
echo "gpu_check: all collector cases"
"$BUILD_DIR/collector_torch_test" || fail "collector_torch_test"
echo "gpu_check: runtime cases (checkpoint correctness under this LibTorch)"
"$BUILD_DIR/runtime_test" || fail "runtime_test"
echo "gpu_check: PASSED"
