# The Debian package: `cpack -G DEB` in a build tree (scripts/package.sh does the build and this), one csi-proxy
# package with the host, the group libraries, the SDK (headers, CMake package, protoc plugin), the systemd unit,
# the configuration and the docs, installed under /usr with the configuration in /etc/csi-proxy.
set(CPACK_GENERATOR DEB)
set(CPACK_PACKAGE_NAME csi-proxy)
set(CPACK_PACKAGE_VERSION ${PROJECT_VERSION})
set(CPACK_PACKAGE_CONTACT "csi-proxy maintainers <csi-proxy@localhost>")
set(CPACK_PACKAGE_DESCRIPTION_SUMMARY "privileged storage operations for Kubernetes CSI node plugins")
set(CPACK_PACKAGE_DESCRIPTION
    "A host daemon, wire-compatible with kubernetes-csi/csi-proxy, serving API-group libraries (disk, volume, filesystem, smb, iscsi, system) on local gRPC Unix sockets; with its SDK for third-party groups.")
# The install scripts see the final prefix (/usr) and put the files outside it (/etc) under DESTDIR.
set(CPACK_SET_DESTDIR ON)
set(CPACK_PACKAGING_INSTALL_PREFIX /usr)
set(CPACK_INSTALL_PREFIX /usr)
set(CPACK_DEBIAN_FILE_NAME DEB-DEFAULT)
set(CPACK_DEBIAN_PACKAGE_SECTION admin)
set(CPACK_DEBIAN_PACKAGE_PRIORITY optional)
# Library dependencies from dpkg-shlibdeps; the programs the groups run, by name.
set(CPACK_DEBIAN_PACKAGE_SHLIBDEPS ON)
set(CPACK_DEBIAN_PACKAGE_DEPENDS "mount, util-linux, fdisk, e2fsprogs")
set(CPACK_DEBIAN_PACKAGE_RECOMMENDS "xfsprogs, dosfstools, cifs-utils, open-iscsi, systemd, logrotate")
# conffiles: dpkg keeps an admin's edit of the configuration (and of the audit log's logrotate file) across upgrades (CMake 3.25's cpack does not mark
# files in /etc by itself); the maintainer scripts tell systemd about the unit.
set(CPACK_DEBIAN_PACKAGE_CONTROL_EXTRA
    ${CMAKE_CURRENT_LIST_DIR}/debian/conffiles ${CMAKE_CURRENT_LIST_DIR}/debian/postinst
    ${CMAKE_CURRENT_LIST_DIR}/debian/prerm ${CMAKE_CURRENT_LIST_DIR}/debian/postrm)
set(CPACK_DEBIAN_PACKAGE_CONTROL_STRICT_PERMISSION ON)
# cpack builds the `preinstall` target before it installs; without this, that target depends on `all` (every test
# and benchmark). scripts/package.sh builds everything first; the package test packs the tree it runs from as built.
set(CMAKE_SKIP_INSTALL_ALL_DEPENDENCY ON)
# Test programs, benchmarks and examples have no install rules: they stay out.
include(CPack)
