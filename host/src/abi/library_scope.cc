// See library_scope.h.
#include "abi/library_scope.h"

namespace csi_proxy::host {
namespace {

// Initial-exec thread-locals of the executable: a signal handler reads them without allocating.
thread_local const char* current_group = nullptr;
thread_local const char* current_work = nullptr;

}  // namespace

LibraryScope::LibraryScope(const char* group, const char* work) noexcept
    : previous_group_(current_group), previous_work_(current_work) {
  current_group = group;
  current_work = work;
}

LibraryScope::~LibraryScope() {
  current_group = previous_group_;
  current_work = previous_work_;
}

const char* CurrentLibraryGroup() noexcept { return current_group; }
const char* CurrentLibraryWork() noexcept { return current_work; }

}  // namespace csi_proxy::host
