# The Windows host's named-pipe transport (the relay design in docs/windows.md): a static library the host's
# serving library, csi-proxyctl and the Windows tests link. Included by CMakeLists.txt here in the Windows build.
# grpc_socket_adoption_windows.cc includes gRPC's core headers, which scripts/windows/build-deps.sh installs
# into the prefix's include/grpc-core (gRPC 1.51.1's, the version the shim is pinned to).
find_path(CSI_PROXY_GRPC_CORE_INCLUDE_DIR src/core/lib/surface/server.h PATH_SUFFIXES grpc-core REQUIRED)
add_library(csi_proxy_pipe_transport STATIC
  ${CMAKE_CURRENT_LIST_DIR}/grpc_socket_adoption_windows.cc
  ${CMAKE_CURRENT_LIST_DIR}/io_port_windows.cc
  ${CMAKE_CURRENT_LIST_DIR}/loopback_pair_windows.cc
  ${CMAKE_CURRENT_LIST_DIR}/named_pipe_listener_windows.cc
  ${CMAKE_CURRENT_LIST_DIR}/pipe_client_identity_windows.cc
  ${CMAKE_CURRENT_LIST_DIR}/pipe_dialer_windows.cc
  ${CMAKE_CURRENT_LIST_DIR}/pipe_endpoint_windows.cc
  ${CMAKE_CURRENT_LIST_DIR}/pipe_relay_windows.cc)
target_compile_options(csi_proxy_pipe_transport PRIVATE ${CSI_PROXY_WARNINGS})
target_include_directories(csi_proxy_pipe_transport PUBLIC ${CMAKE_CURRENT_LIST_DIR})
# Only the shim sees gRPC's internals, as system headers (their warnings are gRPC's), with the _WIN32_WINNT gRPC
# was built with, so that it reads gRPC's internal structs as gRPC lays them out.
set(core ${CSI_PROXY_GRPC_CORE_INCLUDE_DIR})
set_source_files_properties(${CMAKE_CURRENT_LIST_DIR}/grpc_socket_adoption_windows.cc PROPERTIES
  COMPILE_OPTIONS "-isystem;${core};-isystem;${core}/third_party/upb;-isystem;${core}/src/core/ext/upb-generated"
  COMPILE_DEFINITIONS "_WIN32_WINNT=0x0600")
target_link_libraries(csi_proxy_pipe_transport PUBLIC csi_proxy_host_config gRPC::grpc++ ws2_32 advapi32)
