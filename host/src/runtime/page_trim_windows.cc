// See page_trim.h: Windows gives a process no way to drop only the clean file pages it mapped, so the whole
// working set is trimmed (SetProcessWorkingSetSize with -1, -1): the pages go to the standby list and come back
// with a soft fault when touched again, the file pages among them never written anywhere. The heap's free memory
// goes back with the C runtime's _heapmin and the process heap's compaction.
#include "runtime/page_trim.h"

#include "config/win32_windows.h"  // winsock2.h and windows.h, before the headers that need them

#include <malloc.h>
#include <psapi.h>

#include <mutex>

#include "abi/mapping_change.h"

namespace csi_proxy::host {
namespace {

size_t WorkingSetBytes() {
  PROCESS_MEMORY_COUNTERS counters{};
  counters.cb = sizeof counters;
  return GetProcessMemoryInfo(GetCurrentProcess(), &counters, sizeof counters) ? counters.WorkingSetSize : 0;
}

}  // namespace

size_t ReleaseFilePages() {
  std::lock_guard lock(MappingChangeMutex());
  size_t before = WorkingSetBytes();
  if (!SetProcessWorkingSetSize(GetCurrentProcess(), static_cast<SIZE_T>(-1), static_cast<SIZE_T>(-1))) return 0;
  size_t after = WorkingSetBytes();
  return before > after ? (before - after) / 1024 : 0;
}

size_t ReleaseFreeHeap() {
  size_t before = WorkingSetBytes();
  _heapmin();
  HeapCompact(GetProcessHeap(), 0);
  size_t after = WorkingSetBytes();
  return before > after ? (before - after) / 1024 : 0;
}

}  // namespace csi_proxy::host
