// send_ctrl_c.exe <pid> [<timeout ms>]: Ctrl-C in the console of process <pid>, as an admin's key press stops a
// console host, then waits for that process to end. A program of its own because Wine delivers the console
// event of a process that attached to another's console only the first time that process does it.
#include <windows.h>

#include <cstdio>
#include <cstdlib>

int main(int argc, char** argv) {
  if (argc < 2) {
    std::fprintf(stderr, "usage: send_ctrl_c <pid> [<timeout ms>]\n");
    return 2;
  }
  DWORD pid = static_cast<DWORD>(std::strtoul(argv[1], nullptr, 10));
  DWORD timeout = argc > 2 ? static_cast<DWORD>(std::strtoul(argv[2], nullptr, 10)) : 30000;
  HANDLE process = OpenProcess(SYNCHRONIZE, FALSE, pid);
  if (process == nullptr) return 3;
  FreeConsole();
  if (!AttachConsole(pid)) return 4;
  SetConsoleCtrlHandler(nullptr, TRUE);  // the event reaches this process too: it must not end it
  if (!GenerateConsoleCtrlEvent(CTRL_C_EVENT, 0)) return 5;
  // Staying in the console until the host has ended, so that the event is not lost with this process.
  return WaitForSingleObject(process, timeout) == WAIT_OBJECT_0 ? 0 : 1;
}
