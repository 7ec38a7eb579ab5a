@echo off
rem Stops and removes the service csiproxy that install.cmd created (csi-proxy.exe --uninstall-service); the files
rem stay. Run it from an elevated command prompt.
"%~dp0csi-proxy.exe" --uninstall-service %*
