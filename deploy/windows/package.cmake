# The Windows release zip, csi-proxy-<version>-windows-amd64.zip: `cpack` in the Windows build tree
# (scripts/windows/package.sh builds the tree and runs it). At its top what a node runs, as upstream's release has
# csi-proxy.exe: csi-proxy.exe, csi-proxyctl.exe, the group DLLs, csi-proxy.toml (config/csi-proxy-windows.toml),
# install.cmd and uninstall.cmd; under sdk\ what a third party builds a group DLL with: the headers, the CMake
# package with the MinGW toolchain file and the protoc plugin's source.
foreach(script install.cmd uninstall.cmd)
  # cmd.exe reads batch files with Windows line ends (labels and jumps misbehave without them); they hold no @VAR@.
  configure_file(${CMAKE_CURRENT_LIST_DIR}/${script} ${CMAKE_BINARY_DIR}/release/${script} @ONLY NEWLINE_STYLE CRLF)
  install(PROGRAMS ${CMAKE_BINARY_DIR}/release/${script} DESTINATION .)
endforeach()
install(FILES ${PROJECT_SOURCE_DIR}/config/csi-proxy-windows.toml DESTINATION . RENAME csi-proxy.toml)

set(CPACK_GENERATOR ZIP)
set(CPACK_PACKAGE_NAME csi-proxy)
set(CPACK_PACKAGE_VERSION ${PROJECT_VERSION})
set(CPACK_PACKAGE_FILE_NAME csi-proxy-${PROJECT_VERSION}-windows-amd64)
set(CPACK_INCLUDE_TOPLEVEL_DIRECTORY OFF)
# Symbols out of the executables and DLLs (MinGW's strip): half their size.
set(CPACK_STRIP_FILES ON)
# cpack builds the `preinstall` target before it installs; without this, that target depends on `all` (every test).
# scripts/windows/package.sh builds everything first; the release test packs the tree it runs from as built.
set(CMAKE_SKIP_INSTALL_ALL_DEPENDENCY ON)
# Test programs and examples have no install rules: they stay out.
include(CPack)
