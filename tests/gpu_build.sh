# Sourced by tests/gpu_check.sh and bench/gpu_e2e.sh: builds remat's
# LibTorch code with the C++ compiler alone (a GPU machine has no Bazel)
# against the LibTorch inside $PYTHON's PyTorch, CUDA included when that
# PyTorch has it. The caller sets NAME (for messages) and calls, in order:
#
#   RUNTIME_SRCS         the runtime's, collector's and core's sources
#   gpu_probe            finds PyTorch (or skips: exit 77); sets TORCH_ROOT,
#                        TORCH_VERSION, TORCH_CUDA, HAVE_GPU (0/1), WITH_CUDA
#   gpu_compile SRC...   compiles every source, $JOBS at a time
#   gpu_link OUT SRC...  links OUT from the objects of those sources
#   gpu_require_gpu      exits 77, saying so, when there is no GPU: what a
#                        run on a machine without one (CI's rehearsal) ends
#                        with, after everything has been compiled and linked
#
# Besides PyTorch it needs a C++20 compiler ($CXX, default g++; LibTorch
# 2.15's headers need C++20) and the headers and libraries the build takes
# from Debian elsewhere: abseil (headers and libabsl_*.so), Eigen 3,
# nlohmann/json, CLI11 and Catch2 v2. They come from $REMAT_GPU_DEPS, a
# folder that tests/gpu_deps.sh fills from this machine's Debian packages
# (include/ and lib/), or else from the system (/usr).
#
# Environment: PYTHON (python3), CXX (g++), REMAT_GPU_DEPS, REMAT_GPU_BUILD_DIR
# (default: a fresh temporary folder; objects there that are up to date are
# reused), REMAT_GPU_JOBS (nproc).

PYTHON=${PYTHON:-python3}
CXX=${CXX:-g++}
if [ -n "${REMAT_GPU_BUILD_DIR:-}" ]; then
  BUILD_DIR=$REMAT_GPU_BUILD_DIR
else
  BUILD_DIR=$(mktemp -d)
  trap 'rm -rf "$BUILD_DIR"' EXIT
fi
JOBS=${REMAT_GPU_JOBS:-$(nproc)}

# The runtime, the collector and the planning core: what both scripts
# link (the sources of //client:runtime and its dependencies).
RUNTIME_SRCS=(collector/cpu_memory_tracker.cc collector/cuda_memory_source.cc
  collector/block_sampler.cc collector/trace_recorder.cc
  client/block_function.cc client/checkpoint.cc client/offload.cc
  client/batch_fit.cc client/plan_chooser.cc client/step_lifecycle.cc
  client/planner.cc client/runtime.cc
  kernels/copy_engine.cc kernels/cpu_copy_engine.cc
  kernels/copy_queue.cc kernels/cuda_copy_engine.cc kernels/host_pool.cc
  planner/core.cc planner/estimator.cc planner/exact_solver.cc
  planner/internal/least_squares.cc planner/internal/monomials.cc
  planner/model.cc planner/plan.cc planner/plan_cache.cc
  planner/reserved_margin.cc planner/solver.cc
  planner/trace.cc planner/units.cc)
# The exact solver's parts: every source of their folder but the tests'.
for src in planner/internal/exact/*.cc; do
  [[ $src == *_test.cc ]] || RUNTIME_SRCS+=("$src")
done

skip() { echo "$NAME: SKIPPED: $*"; exit 77; }
fail() { echo "$NAME: FAILED: $*" >&2; exit 1; }

gpu_probe() {
  command -v "$PYTHON" >/dev/null || skip "no $PYTHON, so no PyTorch"
  local probe='import os, torch
print(os.path.dirname(torch.__file__))
print(int(torch._C._GLIBCXX_USE_CXX11_ABI))
print(torch.__version__)
print(torch.version.cuda or "")
print(int(torch.cuda.is_available()))'
  local info
  info=$("$PYTHON" -c "$probe" 2>/dev/null) ||
    skip "PyTorch is not installed for $PYTHON"
  TORCH_ROOT=$(sed -n 1p <<<"$info")
  CXX11_ABI=$(sed -n 2p <<<"$info")
  TORCH_VERSION=$(sed -n 3p <<<"$info")
  TORCH_CUDA=$(sed -n 4p <<<"$info")
  HAVE_GPU=$(sed -n 5p <<<"$info")
  WITH_CUDA=0
  if [ -n "$TORCH_CUDA" ] && [ -e "$TORCH_ROOT/lib/libc10_cuda.so" ]; then
    WITH_CUDA=1
  fi
  echo "$NAME: PyTorch $TORCH_VERSION (CUDA ${TORCH_CUDA:-none}) at $TORCH_ROOT;" \
    "GPU visible: $([ "$HAVE_GPU" = 1 ] && echo yes || echo no)"

  command -v "$CXX" >/dev/null || fail "no C++ compiler ($CXX); set CXX"
  local deps=${REMAT_GPU_DEPS:-/usr}
  DEPS_INCLUDE=$deps/include
  [ -e "$DEPS_INCLUDE/absl/status/status.h" ] ||
    fail "abseil headers not found under $DEPS_INCLUDE; run tests/gpu_deps.sh and set REMAT_GPU_DEPS"
  DEPS_LIB=""
  local d
  for d in "$deps/lib" "$deps/lib/x86_64-linux-gnu" "$deps/lib64"; do
    if ls "$d"/libabsl_status.so* >/dev/null 2>&1; then DEPS_LIB=$d; break; fi
  done
  [ -n "$DEPS_LIB" ] || fail "libabsl_status.so not found under $deps; set REMAT_GPU_DEPS"
  for d in catch2/catch.hpp eigen3/Eigen/Dense nlohmann/json.hpp CLI/CLI.hpp; do
    [ -e "$DEPS_INCLUDE/$d" ] || fail "$d not found under $DEPS_INCLUDE; set REMAT_GPU_DEPS"
  done

  CXXFLAGS=(-std=c++20 -O2 -fPIC -D_GLIBCXX_USE_CXX11_ABI="$CXX11_ABI" -I.
    -isystem "$TORCH_ROOT/include"
    -isystem "$TORCH_ROOT/include/torch/csrc/api/include")
  # /usr/include is searched already; naming it with -isystem would break
  # the C++ library's #include_next.
  [ "$(realpath "$DEPS_INCLUDE")" = /usr/include ] || CXXFLAGS+=(-isystem "$DEPS_INCLUDE")
  LIBS=(-L"$TORCH_ROOT/lib" -Wl,-rpath,"$TORCH_ROOT/lib" -Wl,--no-as-needed
    -ltorch -ltorch_cpu -lc10)
  if [ "$WITH_CUDA" = 1 ]; then
    # The CUDA runtime's headers and library of torch's CUDA release, for
    # the code that calls it directly (the CUDA copy engine): the wheel's
    # (nvidia/cuXX), else the toolkit's.
    local cuda_probe='import os, sys, torch
major = torch.version.cuda.split(".")[0]
roots = [os.path.join(p, "nvidia", d) for p in sys.path
         for d in ("cu" + major, "cuda_runtime")] + ["/usr/local/cuda"]
for root in roots:
    if os.path.exists(os.path.join(root, "include", "cuda_runtime_api.h")):
        for lib in ("lib", "lib64"):
            d = os.path.join(root, lib)
            if os.path.exists(os.path.join(d, "libcudart.so." + major)):
                print(root); print(d); print(major); sys.exit(0)
sys.exit(1)'
    local cuda_info
    cuda_info=$("$PYTHON" -c "$cuda_probe" 2>/dev/null) ||
      fail "no CUDA runtime (cuda_runtime_api.h, libcudart.so.N) of CUDA $TORCH_CUDA found beside PyTorch or in /usr/local/cuda"
    CXXFLAGS+=(-DREMAT_WITH_CUDA -isystem "$(sed -n 1p <<<"$cuda_info")/include")
    LIBS+=(-ltorch_cuda -lc10_cuda -L"$(sed -n 2p <<<"$cuda_info")"
      -Wl,-rpath,"$(sed -n 2p <<<"$cuda_info")"
      -l:libcudart.so."$(sed -n 3p <<<"$cuda_info")")
  fi
  LIBS+=(-Wl,--as-needed -L"$DEPS_LIB" -Wl,-rpath,"$DEPS_LIB")
  local l
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
  mkdir -p "$BUILD_DIR"
}

_obj() { echo "$BUILD_DIR/$(tr / _ <<<"${1%.cc}").o"; }

# Sources that need CUDA (the CUDA memory source and copy engine) are left
# out of a build against a PyTorch without it.
CUDA_SRCS=" collector/cuda_memory_source.cc kernels/cuda_copy_engine.cc "
gpu_sources() {
  local src
  for src in "$@"; do
    if [ "$WITH_CUDA" = 1 ] || [[ "$CUDA_SRCS" != *" $src "* ]]; then
      echo "$src"
    fi
  done
}

# An object in $BUILD_DIR is reused when it was compiled with the same
# command and is newer than its source and every header it included (the
# compiler's -MD list), so the two scripts can share one folder
# (REMAT_GPU_BUILD_DIR) and the second compiles only what the first did not.
_up_to_date() {
  local obj=$1 command=$2 dep
  [ -e "$obj.ok" ] && [ "$(cat "$obj.ok")" = "$command" ] || return 1
  for dep in $(sed -e 's/^[^:]*://' -e 's/\\$//' "$obj.d"); do
    [ "$dep" -nt "$obj" ] && return 1
  done
  return 0
}

gpu_compile() {
  local srcs src obj command status=0 reused=0
  mapfile -t srcs < <(gpu_sources "$@")
  command="$CXX ${CXXFLAGS[*]}"
  echo "$NAME: compiling ${#srcs[@]} files in $BUILD_DIR ($JOBS at a time)"
  for src in "${srcs[@]}"; do
    obj=$(_obj "$src")
    if _up_to_date "$obj" "$command"; then
      reused=$((reused + 1))
      continue
    fi
    rm -f "$obj.ok"
    while [ "$(jobs -rp | wc -l)" -ge "$JOBS" ]; do wait -n || true; done
    ( "$CXX" "${CXXFLAGS[@]}" -MD -MF "$obj.d" -c "$src" -o "$obj" &&
        echo "$command" >"$obj.ok" ) >"$obj.log" 2>&1 &
  done
  [ "$reused" = 0 ] || echo "$NAME: $reused of them up to date already"
  wait || true
  for src in "${srcs[@]}"; do
    obj=$(_obj "$src")
    if [ ! -e "$obj.ok" ]; then
      echo "$NAME: compiling $src failed:" >&2
      head -60 "$obj.log" >&2
      status=1
    fi
  done
  [ "$status" = 0 ] || fail "compilation"
}

gpu_link() {
  local out=$1 objs=() src
  shift
  while read -r src; do objs+=("$(_obj "$src")"); done < <(gpu_sources "$@")
  "$CXX" -o "$out" "${objs[@]}" "${LIBS[@]}" || fail "linking $(basename "$out")"
  echo "$NAME: linked $out"
}

gpu_require_gpu() {
  [ "$WITH_CUDA" = 1 ] || skip "built and linked against PyTorch $TORCH_VERSION without CUDA; the GPU part did not run"
  [ "$HAVE_GPU" = 1 ] || skip "built and linked with CUDA $TORCH_CUDA; no GPU here (torch.cuda.is_available() is false); the GPU part did not run"
}
