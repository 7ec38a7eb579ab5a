# The Windows build's dependencies: the libraries from the MinGW prefix that scripts/windows/build-deps.sh builds
# (found through the toolchain file sdk/cmake/mingw-w64-x86_64.cmake), and the programs that run during the build,
# which are this Debian's Linux binaries of the same versions.
find_package(Threads REQUIRED)
find_package(Protobuf CONFIG REQUIRED)
find_package(gRPC CONFIG REQUIRED)
find_package(spdlog CONFIG REQUIRED)
find_package(tomlplusplus CONFIG REQUIRED)
find_package(CLI11 CONFIG REQUIRED)
# Boost's headers (Boost.DLL loads the group libraries), linked into the prefix from the Linux build's
# libboost-dev by build-deps.sh.
find_path(CSI_PROXY_BOOST_INCLUDE_DIR boost/dll/shared_library.hpp REQUIRED)

find_program(CSI_PROXY_PROTOC protoc REQUIRED)
find_program(CSI_PROXY_GRPC_CPP_PLUGIN grpc_cpp_plugin REQUIRED)
# Generated code only compiles against the runtime of the protoc that wrote it.
execute_process(COMMAND ${CSI_PROXY_PROTOC} --version OUTPUT_VARIABLE protoc_version OUTPUT_STRIP_TRAILING_WHITESPACE)
string(REGEX REPLACE "^libprotoc ([0-9.]+).*" "\\1" protoc_version "${protoc_version}")
if(NOT protoc_version VERSION_EQUAL Protobuf_VERSION)
  message(FATAL_ERROR "${CSI_PROXY_PROTOC} is protobuf ${protoc_version}, the Windows prefix has ${Protobuf_VERSION}: "
                      "rebuild the prefix (scripts/windows/build-deps.sh) after Debian's protobuf changed")
endif()
if(NOT TARGET protobuf::protoc)
  add_executable(protobuf::protoc IMPORTED)
  set_target_properties(protobuf::protoc PROPERTIES IMPORTED_LOCATION ${CSI_PROXY_PROTOC})
endif()
add_executable(gRPC::grpc_cpp_plugin IMPORTED)
set_target_properties(gRPC::grpc_cpp_plugin PROPERTIES IMPORTED_LOCATION ${CSI_PROXY_GRPC_CPP_PLUGIN})

# Only gRPC's unsecure libraries exist for Windows (nothing here uses TLS); the code names them as Linux does.
set_target_properties(gRPC::grpc++_unsecure PROPERTIES IMPORTED_GLOBAL TRUE)
add_library(gRPC::grpc++ ALIAS gRPC::grpc++_unsecure)
