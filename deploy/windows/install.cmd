@echo off
rem Installs csi-proxy.exe from this directory as the Windows service csiproxy (upstream's service name) and starts
rem it. Run it from an elevated command prompt, in the directory the release zip was extracted to:
rem
rem   install.cmd [csi-proxy.exe flags...]      e.g. install.cmd -kubelet-path=D:\var\lib\kubelet
rem
rem The flags are upstream csi-proxy's (docs/windows.md); they go onto the service's command line. Steps:
rem   1. only SYSTEM and Administrators may change this directory (users may read it): csi-proxy.exe refuses a DLL
rem      or a configuration that others may change, and a directory made under C:\ lets every user change it;
rem   2. csi-proxy.exe --check-config: csi-proxy.toml here, with the flags;
rem   3. csi-proxy.exe --install-service: the service runs csi-proxy.exe -windows-service and the flags as
rem      LocalSystem, starts with the system, is restarted 10 s after a failure, logs to csi-proxy.log here;
rem   4. sc.exe start csiproxy.
rem uninstall.cmd stops and removes the service. (Each step is checked with `if errorlevel`, which every cmd.exe
rem reads alike; Wine's does not honour `||`.)
setlocal
set "dir=%~dp0"
rem Without its trailing backslash, which would escape the closing quote of "%dir%".
set "dir=%dir:~0,-1%"
rem The accounts by SID (SYSTEM, Administrators, Users), whose names depend on the system's language.
icacls "%dir%" /inheritance:r /grant:r "*S-1-5-18:(OI)(CI)F" "*S-1-5-32-544:(OI)(CI)F" "*S-1-5-32-545:(OI)(CI)RX" >nul
if errorlevel 1 exit /b 1
"%dir%\csi-proxy.exe" --check-config %*
if errorlevel 1 exit /b 1
"%dir%\csi-proxy.exe" --install-service "-log_file=%dir%\csi-proxy.log" -logtostderr=false %*
if errorlevel 1 exit /b 1
sc.exe start csiproxy
if errorlevel 1 exit /b 1
echo csi-proxy runs as the service csiproxy; its log is %dir%\csi-proxy.log
