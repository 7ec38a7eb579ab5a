# csi_proxy_add_plugin(): builds an API-group library the way the host expects it.
#
#   csi_proxy_add_plugin(<target>
#     GROUP <group>                 # the group name; the file is libcsi-proxy-<group>.so (csi-proxy-<group>.dll)
#     [VERSION <version>]           # the library's own version (default: the project's version, if it has one)
#     SOURCES <files...>            # the plugin's C++ sources
#     [PROTOS <files...>]           # .proto files; each must say `option optimize_for = LITE_RUNTIME;`
#                                   # (sources include <version>/<name>.csi.h: see csi_proxy_generate_lite_protos)
#     [PROTO_ROOT <dir>]            # the import root of PROTOS (default: the current source dir)
#     [LIBS <targets...>]           # further libraries to link
#     [INSTALL_DIR <dir>]           # where `cmake --install` puts it (default: no install rule)
#     [NO_INSTALL])                 # in the csi-proxy tree: do not install (examples, test fixtures)
#
# The result is a MODULE library with hidden visibility, exactly one exported symbol
# (csi_proxy_plugin_negotiate), no undefined symbols (-z defs) and protobuf-lite generated code, which registers
# nothing process-wide, so several plugins may reuse the same proto file names and packages. Its sources see
# CSI_PROXY_GROUP_NAME and CSI_PROXY_GROUP_VERSION (string literals of GROUP and VERSION), which
# CSI_PROXY_GROUP_PLUGIN(Class) answers the host with, so neither is typed in the code.
include_guard(GLOBAL)

# csi_proxy_generate_lite_protos(<out-var> PROTO_ROOT <dir> PROTOS <files...>): runs protoc --cpp_out and the
# SDK's protoc-gen-csi-proxy and returns the generated sources in <out-var>; the output folder is
# <out-var>_INCLUDE_DIR. For proto/v1/x.proto (PROTO_ROOT proto) it writes v1/x.pb.h and v1/x.pb.cc, the message
# classes, and v1/x.csi.h, which names each service for the C++ layer (v1::XApi::kService == "v1.X",
# v1::XApi::<Method>::Request), and v1/x.csi.cc, which holds the file's serialized FileDescriptorProto.
function(csi_proxy_generate_lite_protos out_var)
  cmake_parse_arguments(G "" "PROTO_ROOT" "PROTOS" ${ARGN})
  if(NOT G_PROTO_ROOT)
    set(G_PROTO_ROOT ${CMAKE_CURRENT_SOURCE_DIR})
  endif()
  get_filename_component(G_PROTO_ROOT ${G_PROTO_ROOT} ABSOLUTE)
  set(gen_dir ${CMAKE_CURRENT_BINARY_DIR}/${out_var}_gen)
  file(MAKE_DIRECTORY ${gen_dir})
  set(sources)
  foreach(proto IN LISTS G_PROTOS)
    get_filename_component(abs ${proto} ABSOLUTE)
    file(STRINGS ${abs} lite_lines REGEX "optimize_for[ \t]*=[ \t]*LITE_RUNTIME")
    if(NOT lite_lines)
      message(FATAL_ERROR "${proto}: API-group protos must use `option optimize_for = LITE_RUNTIME;` "
                          "(full protobuf registers names process-wide and two plugins would abort the host)")
    endif()
    file(RELATIVE_PATH rel ${G_PROTO_ROOT} ${abs})
    string(REGEX REPLACE "\\.proto$" "" stem ${rel})
    set(outputs ${gen_dir}/${stem}.pb.cc ${gen_dir}/${stem}.pb.h ${gen_dir}/${stem}.csi.cc ${gen_dir}/${stem}.csi.h)
    add_custom_command(
      OUTPUT ${outputs}
      COMMAND protobuf::protoc --cpp_out=${gen_dir} --csi-proxy_out=${gen_dir}
              --plugin=protoc-gen-csi-proxy=$<TARGET_FILE:CsiProxy::protoc-gen-csi-proxy> -I${G_PROTO_ROOT} ${abs}
      DEPENDS ${abs} protobuf::protoc CsiProxy::protoc-gen-csi-proxy
      COMMENT "protoc (lite, csi-proxy) ${rel}"
      VERBATIM)
    list(APPEND sources ${gen_dir}/${stem}.pb.cc ${gen_dir}/${stem}.csi.cc)
  endforeach()
  set(${out_var} ${sources} PARENT_SCOPE)
  set(${out_var}_INCLUDE_DIR ${gen_dir} PARENT_SCOPE)
endfunction()

# csi_proxy_add_native_protoc_gen(<source dir>): in a cross build (Windows, with MinGW), protoc-gen-csi-proxy runs
# on the build machine, so it is built for that machine from its source (<source dir>: sdk/tools in the csi-proxy
# tree, tools/ beside this file in the Windows SDK) with the build machine's compiler, protobuf and libprotoc, and
# named CsiProxy::protoc-gen-csi-proxy.
function(csi_proxy_add_native_protoc_gen source_dir)
  include(ExternalProject)
  set(native_dir ${CMAKE_CURRENT_BINARY_DIR}/csi-proxy-native-tools)
  ExternalProject_Add(protoc-gen-csi-proxy-native
    SOURCE_DIR ${source_dir}
    BINARY_DIR ${native_dir}
    CMAKE_ARGS -DCMAKE_BUILD_TYPE=Release -DCMAKE_CXX_COMPILER_LAUNCHER=${CMAKE_CXX_COMPILER_LAUNCHER}
    INSTALL_COMMAND ""
    BUILD_BYPRODUCTS ${native_dir}/protoc-gen-csi-proxy)
  add_executable(CsiProxy::protoc-gen-csi-proxy IMPORTED GLOBAL)
  set_target_properties(CsiProxy::protoc-gen-csi-proxy PROPERTIES IMPORTED_LOCATION ${native_dir}/protoc-gen-csi-proxy)
  add_dependencies(CsiProxy::protoc-gen-csi-proxy protoc-gen-csi-proxy-native)
endfunction()

function(csi_proxy_add_plugin target)
  cmake_parse_arguments(P "NO_INSTALL" "GROUP;VERSION;PROTO_ROOT;INSTALL_DIR" "SOURCES;PROTOS;LIBS" ${ARGN})
  if(NOT P_GROUP)
    message(FATAL_ERROR "csi_proxy_add_plugin(${target}): GROUP is required")
  endif()
  if(NOT P_GROUP MATCHES "^[a-z][a-z0-9]*$")
    message(FATAL_ERROR "csi_proxy_add_plugin(${target}): GROUP '${P_GROUP}' must be lowercase letters and digits")
  endif()
  if(NOT P_VERSION)
    set(P_VERSION "${PROJECT_VERSION}")
  endif()
  if(P_VERSION AND NOT P_VERSION MATCHES "^[0-9A-Za-z.+~-]+$")
    message(FATAL_ERROR "csi_proxy_add_plugin(${target}): VERSION '${P_VERSION}' must be letters, digits and .+~-")
  endif()
  set(proto_sources)
  if(P_PROTOS)
    csi_proxy_generate_lite_protos(${target}_protos PROTO_ROOT "${P_PROTO_ROOT}" PROTOS ${P_PROTOS})
    set(proto_sources ${${target}_protos})
  endif()

  add_library(${target} MODULE ${P_SOURCES} ${proto_sources})
  if(P_PROTOS)
    target_include_directories(${target} PRIVATE ${${target}_protos_INCLUDE_DIR})
  endif()
  target_link_libraries(${target} PRIVATE CsiProxy::sdk protobuf::libprotobuf-lite tomlplusplus::tomlplusplus ${P_LIBS})
  target_compile_definitions(${target} PRIVATE CSI_PROXY_GROUP_NAME="${P_GROUP}")
  if(P_VERSION)
    target_compile_definitions(${target} PRIVATE CSI_PROXY_GROUP_VERSION="${P_VERSION}")
  endif()
  set_target_properties(${target} PROPERTIES
    OUTPUT_NAME "csi-proxy-${P_GROUP}"
    CXX_VISIBILITY_PRESET hidden
    C_VISIBILITY_PRESET hidden
    VISIBILITY_INLINES_HIDDEN ON)
  if(WIN32)
    # csi-proxy-<group>.dll; the .def file is the export list (a DLL has no undefined symbols by construction).
    set_target_properties(${target} PROPERTIES PREFIX "")
    target_sources(${target} PRIVATE ${CMAKE_CURRENT_FUNCTION_LIST_DIR}/csi_proxy_plugin.def)
  else()
    set_target_properties(${target} PROPERTIES PREFIX "lib")
    target_link_options(${target} PRIVATE
      "-Wl,-z,defs"
      "-Wl,--version-script=${CMAKE_CURRENT_FUNCTION_LIST_DIR}/csi_proxy_plugin.map")
  endif()
  # In the csi-proxy tree, group libraries land beside the host as in an installed tree.
  if(DEFINED CSI_PROXY_PLUGIN_OUTPUT_DIR)
    set_target_properties(${target} PROPERTIES LIBRARY_OUTPUT_DIRECTORY ${CSI_PROXY_PLUGIN_OUTPUT_DIR})
    if(NOT P_INSTALL_DIR AND NOT P_NO_INSTALL)
      set(P_INSTALL_DIR ${CSI_PROXY_INSTALL_PLUGIN_DIR})
    endif()
  endif()
  if(P_INSTALL_DIR)
    install(TARGETS ${target} LIBRARY DESTINATION ${P_INSTALL_DIR})
  endif()
endfunction()
