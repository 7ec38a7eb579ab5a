# CMake toolchain file: cross-compiles for 64-bit Windows on Debian with MinGW-w64, posix thread model
# (Debian's g++-mingw-w64-x86-64-posix; std::thread, std::mutex and the C++ runtime need it).
#
#   cmake -S <src> -B <build> -DCMAKE_TOOLCHAIN_FILE=<this file> -DCSI_PROXY_WINDOWS_DEPS=<prefix>
#
# for the csi-proxy tree and for a third party's group DLL against the installed SDK (docs/plugin-authors.md).
# CSI_PROXY_WINDOWS_DEPS (or the environment variable of that name) is the prefix that
# scripts/windows/build-deps.sh prints: gRPC, protobuf, abseil and the rest, built for Windows. find_package()
# and find_library() look there and in MinGW's own tree only, never in the Linux system's /usr.
set(CMAKE_SYSTEM_NAME Windows)
set(CMAKE_SYSTEM_PROCESSOR AMD64)

set(CSI_PROXY_MINGW_TRIPLE x86_64-w64-mingw32)
set(CMAKE_C_COMPILER ${CSI_PROXY_MINGW_TRIPLE}-gcc-posix)
set(CMAKE_CXX_COMPILER ${CSI_PROXY_MINGW_TRIPLE}-g++-posix)
set(CMAKE_RC_COMPILER ${CSI_PROXY_MINGW_TRIPLE}-windres)

# try_compile() projects read this file again; they get the prefix through these variables.
list(APPEND CMAKE_TRY_COMPILE_PLATFORM_VARIABLES CSI_PROXY_WINDOWS_DEPS)
if(NOT CSI_PROXY_WINDOWS_DEPS AND DEFINED ENV{CSI_PROXY_WINDOWS_DEPS})
  set(CSI_PROXY_WINDOWS_DEPS "$ENV{CSI_PROXY_WINDOWS_DEPS}")
endif()
set(CMAKE_FIND_ROOT_PATH /usr/${CSI_PROXY_MINGW_TRIPLE} ${CSI_PROXY_WINDOWS_DEPS})
# Installed with the SDK (<prefix>/lib/cmake/CsiProxySdk, sdk\lib\cmake\CsiProxySdk in the Windows release zip),
# the SDK's own prefix is searched too: find_package(CsiProxySdk) finds it with no further setting.
if(EXISTS ${CMAKE_CURRENT_LIST_DIR}/CsiProxySdkConfig.cmake)
  get_filename_component(_csi_proxy_sdk_prefix ${CMAKE_CURRENT_LIST_DIR}/../../.. ABSOLUTE)
  list(APPEND CMAKE_FIND_ROOT_PATH ${_csi_proxy_sdk_prefix})
endif()
set(CMAKE_FIND_ROOT_PATH_MODE_PROGRAM NEVER)  # programs run here: protoc, grpc_cpp_plugin are Linux binaries
set(CMAKE_FIND_ROOT_PATH_MODE_LIBRARY ONLY)
set(CMAKE_FIND_ROOT_PATH_MODE_INCLUDE ONLY)
set(CMAKE_FIND_ROOT_PATH_MODE_PACKAGE ONLY)

# Large generated sources (protobuf, gRPC's core) pass the 32768-section limit of the default COFF object format.
set(CMAKE_C_FLAGS_INIT "-Wa,-mbig-obj")
set(CMAKE_CXX_FLAGS_INIT "-Wa,-mbig-obj")
# Every executable and DLL carries its own C++ runtime, libgcc and winpthread: a Windows node (and Wine) has no
# MinGW runtime DLLs, and a group DLL's runtime stays private to it, which the C ABI allows (nothing of a C++
# runtime crosses it).
set(CMAKE_EXE_LINKER_FLAGS_INIT "-static")
set(CMAKE_SHARED_LINKER_FLAGS_INIT "-static")
set(CMAKE_MODULE_LINKER_FLAGS_INIT "-static")
