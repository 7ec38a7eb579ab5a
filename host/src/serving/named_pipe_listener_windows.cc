// See named_pipe_listener_windows.h.
#include "named_pipe_listener_windows.h"

#include <sddl.h>

#include <algorithm>

namespace csi_proxy::host {

std::wstring PipePath(const std::string& name) { return L"\\\\.\\pipe\\" + Widen(name); }

StatusOr<std::unique_ptr<NamedPipeListener>> NamedPipeListener::Open(PipeEndpointOptions options) {
  std::unique_ptr<NamedPipeListener> listener(new NamedPipeListener(std::move(options)));
  const std::string shown = "\\\\.\\pipe\\" + listener->options_.name;
  // The guard first: it is what tells a second csi-proxy apart where the pipe flag is not enforced.
  std::wstring guard_name = L"Global\\csi-proxy-pipe-" + Widen(listener->options_.name);
  listener->guard_.reset(CreateMutexW(nullptr, FALSE, guard_name.c_str()));
  DWORD guard_error = GetLastError();
  if (!listener->guard_.valid() || guard_error == ERROR_ALREADY_EXISTS) {
    return AlreadyExists(shown + " is already served by another process (is another csi-proxy running?)");
  }
  if (!ConvertStringSecurityDescriptorToSecurityDescriptorW(Widen(listener->options_.sddl).c_str(), SDDL_REVISION_1,
                                                            &listener->security_, nullptr)) {
    return InvalidArgument("the pipe security descriptor '" + listener->options_.sddl +
                           "' is not valid SDDL: " + ErrorText(GetLastError()));
  }
  CSI_PROXY_ASSIGN_OR_RETURN(listener->first_, listener->CreatePipe(true));
  return listener;
}

StatusOr<std::unique_ptr<NamedPipeListener>> NamedPipeListener::Open(IoPort& port, PipeEndpointOptions options,
                                                                     OnConnection on_connection) {
  CSI_PROXY_ASSIGN_OR_RETURN(auto listener, Open(std::move(options)));
  CSI_PROXY_RETURN_IF_ERROR(listener->Start(port, std::move(on_connection)));
  return listener;
}

Status NamedPipeListener::Start(IoPort& port, OnConnection on_connection) {
  if (port_ != nullptr || !first_.valid()) return FailedPrecondition("the pipe listener has started already");
  port_ = &port;
  on_connection_ = std::move(on_connection);
  CSI_PROXY_RETURN_IF_ERROR(Wait(std::move(first_)));
  for (int i = 1; i < std::max(1, options_.waiting_instances); ++i) {
    CSI_PROXY_ASSIGN_OR_RETURN(UniqueHandle pipe, CreatePipe(false));
    CSI_PROXY_RETURN_IF_ERROR(Wait(std::move(pipe)));
  }
  return Status::Ok();
}

StatusOr<UniqueHandle> NamedPipeListener::CreatePipe(bool first) {
  SECURITY_ATTRIBUTES attributes{sizeof attributes, security_, FALSE};
  DWORD open_mode = PIPE_ACCESS_DUPLEX | FILE_FLAG_OVERLAPPED | (first ? FILE_FLAG_FIRST_PIPE_INSTANCE : 0);
  DWORD pipe_mode = PIPE_TYPE_BYTE | PIPE_READMODE_BYTE | PIPE_WAIT | PIPE_REJECT_REMOTE_CLIENTS;
  UniqueHandle pipe(CreateNamedPipeW(PipePath(options_.name).c_str(), open_mode, pipe_mode, PIPE_UNLIMITED_INSTANCES,
                                     options_.buffer_bytes, options_.buffer_bytes, 0, &attributes));
  if (!pipe.valid()) {
    DWORD error = GetLastError();
    std::string shown = "\\\\.\\pipe\\" + options_.name;
    if (first && (error == ERROR_ACCESS_DENIED || error == ERROR_PIPE_BUSY)) {
      return AlreadyExists(shown + " already exists: another process serves it (is another csi-proxy running?)");
    }
    return Internal("CreateNamedPipe " + shown + ": " + ErrorText(error));
  }
  return pipe;
}

Status NamedPipeListener::Wait(UniqueHandle pipe) {
  CSI_PROXY_RETURN_IF_ERROR(port_->Associate(pipe.get()));
  auto instance = std::make_unique<Instance>();
  instance->listener = this;
  instance->pipe = std::move(pipe);
  Instance* raw = instance.get();
  {
    std::lock_guard lock(mu_);
    if (closing_) return Status::Ok();
    instances_.push_back(std::move(instance));
  }
  if (ConnectNamedPipe(raw->pipe.get(), raw)) {
    return Status::Ok();  // connected at once; the completion is queued on the port all the same
  }
  DWORD error = GetLastError();
  if (error == ERROR_IO_PENDING) return Status::Ok();
  if (error == ERROR_PIPE_CONNECTED) {
    // A client came between CreateNamedPipe and ConnectNamedPipe: nothing is queued, so hand it on from the port.
    port_->Post(raw);
    return Status::Ok();
  }
  // The instance cannot wait; drop it (a client that hung up already: ERROR_NO_DATA) and make another.
  Connected(raw, error);
  return Status::Ok();
}

void NamedPipeListener::Connected(Instance* instance, DWORD error) {
  std::unique_ptr<Instance> owned;
  bool closing;
  {
    std::lock_guard lock(mu_);
    auto it = std::find_if(instances_.begin(), instances_.end(), [&](const auto& p) { return p.get() == instance; });
    if (it == instances_.end()) return;
    owned = std::move(*it);
    instances_.erase(it);
    closing = closing_;
    if (!closing) instances_.push_back(nullptr);  // a place held for the replacement, so Close waits for it
  }
  if (!closing && error == 0) on_connection_(std::move(owned->pipe));
  owned.reset();
  if (!closing) {
    // The replacement keeps as many instances waiting as before; a failure leaves one fewer waiting, and the
    // others still accept.
    if (auto pipe = CreatePipe(false); pipe.ok()) (void)Wait(std::move(*pipe));
  }
  std::lock_guard lock(mu_);
  if (!closing) {
    auto hold = std::find(instances_.begin(), instances_.end(), nullptr);
    if (hold != instances_.end()) instances_.erase(hold);
  }
  if (instances_.empty()) idle_.notify_all();
}

NamedPipeListener::~NamedPipeListener() {
  Close();
  first_.reset();
  guard_.reset();
}

void NamedPipeListener::Close() {
  std::unique_lock lock(mu_);
  if (!closing_) {
    closing_ = true;
    for (auto& instance : instances_) {
      if (instance) CancelIoEx(instance->pipe.get(), instance.get());
    }
  }
  idle_.wait(lock, [this] { return instances_.empty(); });
  lock.unlock();
  if (security_ != nullptr) {
    LocalFree(security_);
    security_ = nullptr;
  }
}

}  // namespace csi_proxy::host
