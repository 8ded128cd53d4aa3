# find_package(remat): the imported target remat::client (libremat_client
# and its headers: the in-process planner and RemotePlanner, rematd's
# client). It links LibTorch: find_package(Torch) first, or set
# Torch_DIR to the LibTorch remat was installed against.
include(CMakeFindDependencyMacro)
# Protobuf before Torch (Caffe2Config stands an empty target in for a
# missing protobuf::libprotobuf).
find_dependency(Protobuf)
find_dependency(Torch)
find_dependency(absl)
find_dependency(gRPC CONFIG)
find_dependency(Threads)
include("${CMAKE_CURRENT_LIST_DIR}/remat-targets.cmake")
