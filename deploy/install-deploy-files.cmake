# Run by `cmake --install` (and by cpack, which installs the same way): places the files whose location depends on
# the install prefix chosen at install time, which GNUInstallDirs cannot know when the tree is configured.
#   - the configuration: /etc/csi-proxy/csi-proxy.toml for --prefix /usr (where the host at /usr/bin looks for it),
#     <prefix>/etc/csi-proxy/csi-proxy.toml otherwise. An existing file that differs from the default is an admin's
#     edit: it is kept, and the new default goes beside it as csi-proxy.toml.default.
#   - the systemd unit, with the installed paths, in <prefix>/lib/systemd/system/csi-proxy.service.
#   - the audit log's rotation, deploy/csi-proxy.logrotate, as logrotate.d/csi-proxy beside the configuration's
#     folder (/etc/logrotate.d/csi-proxy for --prefix /usr).
# Set by the install(CODE) before this script: CSI_PROXY_SOURCE_DIR, CSI_PROXY_STAGING_DIR (a build-tree folder),
# CSI_PROXY_BINDIR and CSI_PROXY_DOCDIR (GNUInstallDirs' relative bin and doc folders).
# file(INSTALL) adds $ENV{DESTDIR} and records the files in the install manifest.

string(REGEX REPLACE "/+$" "" _prefix "${CMAKE_INSTALL_PREFIX}")
if(_prefix STREQUAL "/usr")
  set(_config_dir "/etc/csi-proxy")
else()
  set(_config_dir "${_prefix}/etc/csi-proxy")
endif()

# One staging folder per destination, so that installs to different places never share a generated file.
string(SHA1 _key "$ENV{DESTDIR}|${CMAKE_INSTALL_PREFIX}")
string(SUBSTRING "${_key}" 0 12 _key)
set(_staging "${CSI_PROXY_STAGING_DIR}/${_key}")
file(MAKE_DIRECTORY "${_staging}")

set(_default "${CSI_PROXY_SOURCE_DIR}/config/csi-proxy.toml")
set(_installed "$ENV{DESTDIR}${_config_dir}/csi-proxy.toml")
if(EXISTS "${_installed}")
  file(SHA256 "${_installed}" _have)
  file(SHA256 "${_default}" _want)
  if(_have STREQUAL _want)
    message(STATUS "Up-to-date: ${_installed}")
  else()
    message(STATUS "Kept (edited): ${_installed}; the default is installed beside it as csi-proxy.toml.default")
    configure_file("${_default}" "${_staging}/csi-proxy.toml.default" COPYONLY)
    file(INSTALL DESTINATION "${_config_dir}" TYPE FILE FILES "${_staging}/csi-proxy.toml.default")
  endif()
else()
  file(INSTALL DESTINATION "${_config_dir}" TYPE FILE FILES "${_default}")
endif()

set(CSI_PROXY_EXECUTABLE "${_prefix}/${CSI_PROXY_BINDIR}/csi-proxy")
set(CSI_PROXY_CONFIG_FILE "${_config_dir}/csi-proxy.toml")
set(CSI_PROXY_DOC_DIR "${_prefix}/${CSI_PROXY_DOCDIR}")
configure_file("${CSI_PROXY_SOURCE_DIR}/deploy/csi-proxy.service.in" "${_staging}/csi-proxy.service" @ONLY)
file(INSTALL DESTINATION "${_prefix}/lib/systemd/system" TYPE FILE FILES "${_staging}/csi-proxy.service")

get_filename_component(_etc_dir "${_config_dir}" DIRECTORY)
configure_file("${CSI_PROXY_SOURCE_DIR}/deploy/csi-proxy.logrotate" "${_staging}/csi-proxy" COPYONLY)
file(INSTALL DESTINATION "${_etc_dir}/logrotate.d" TYPE FILE FILES "${_staging}/csi-proxy")
