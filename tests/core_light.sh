#!/usr/bin/env bash
# The planning core builds without LibTorch and gRPC: no target that
# //planner:core depends on, in the configuration the arguments select
# (e.g. --config=cuda), is LibTorch, gRPC or Protobuf.
# Usage: tests/core_light.sh [bazel flags]
set -euo pipefail
cd "$(dirname "$0")/.."
heavy=$(bazel cquery "$@" 'deps(//planner:core)' 2>/dev/null |
  grep -E 'libtorch|//third_party:(torch|grpc|protobuf)|@com_github_grpc' || true)
if [ -n "$heavy" ]; then
  echo "core_light: //planner:core depends on:" "$heavy"
  exit 1
fi
echo "core_light: //planner:core ${*:-(default config)}: no LibTorch, gRPC or Protobuf"
