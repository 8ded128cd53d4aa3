# find_package(remat): the imported target remat::client (libremat_client
# and its headers). It links LibTorch: find_package(Torch) first, or set
# Torch_DIR to the LibTorch remat was installed against.
include(CMakeFindDependencyMacro)
find_dependency(Torch)
find_dependency(absl)
find_dependency(Threads)
include("${CMAKE_CURRENT_LIST_DIR}/remat-targets.cmake")
