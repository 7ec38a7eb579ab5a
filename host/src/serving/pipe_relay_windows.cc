// See pipe_relay_windows.h.
#include "pipe_relay_windows.h"

#include <vector>

namespace csi_proxy::host {
namespace {
constexpr size_t kBufferBytes = 64 * 1024;
}

// One relayed connection: two directions, each a read followed by a full write, again and again.
struct PipeRelay::Link {
  enum Kind { kPipeRead, kSocketWrite, kSocketRead, kPipeWrite };
  struct Op : IoPort::Operation {
    Link* link = nullptr;
    Kind kind = kPipeRead;
    void Completed(DWORD bytes, DWORD error) override { link->Completed(*this, bytes, error); }
  };
  struct Direction {
    std::vector<char> buffer = std::vector<char>(kBufferBytes);
    size_t length = 0;   // bytes in the buffer
    size_t written = 0;  // of them, already written
  };

  PipeRelay* relay = nullptr;
  UniqueHandle pipe;
  UniqueSocket socket;
  std::function<void()> on_closed;
  Op ops[4];
  Direction up;    // pipe -> socket
  Direction down;  // socket -> pipe

  std::mutex mu;
  int pending = 0;  // operations in flight
  bool closing = false;

  Link() {
    for (int i = 0; i < 4; ++i) {
      ops[i].link = this;
      ops[i].kind = static_cast<Kind>(i);
    }
  }

  // Starts an operation; false when it could not start (the link then closes). Called with mu held.
  bool Issue(Kind kind) {
    if (closing) return false;
    Op& op = ops[kind];
    op.Reset();
    ++pending;
    bool started = false;
    switch (kind) {
      case kPipeRead: {
        started = ReadFile(pipe.get(), up.buffer.data(), static_cast<DWORD>(up.buffer.size()), nullptr, &op) ||
                  GetLastError() == ERROR_IO_PENDING;
        break;
      }
      case kPipeWrite: {
        started = WriteFile(pipe.get(), down.buffer.data() + down.written,
                            static_cast<DWORD>(down.length - down.written), nullptr, &op) ||
                  GetLastError() == ERROR_IO_PENDING;
        break;
      }
      case kSocketRead: {
        WSABUF buf{static_cast<ULONG>(down.buffer.size()), down.buffer.data()};
        DWORD flags = 0;
        started =
            WSARecv(socket.get(), &buf, 1, nullptr, &flags, &op, nullptr) == 0 || WSAGetLastError() == WSA_IO_PENDING;
        break;
      }
      case kSocketWrite: {
        WSABUF buf{static_cast<ULONG>(up.length - up.written), up.buffer.data() + up.written};
        started = WSASend(socket.get(), &buf, 1, nullptr, 0, &op, nullptr) == 0 || WSAGetLastError() == WSA_IO_PENDING;
        break;
      }
    }
    if (!started) {
      --pending;
      BeginClose();
    }
    return started;
  }

  // Cancels what is in flight; the link is freed once the last operation has completed. Called with mu held.
  void BeginClose() {
    if (closing) return;
    closing = true;
    CancelIoEx(pipe.get(), nullptr);
    CancelIoEx(reinterpret_cast<HANDLE>(socket.get()), nullptr);
  }

  void Completed(Op& op, DWORD bytes, DWORD error) {
    bool done = false;
    {
      std::lock_guard lock(mu);
      --pending;
      if (error != 0 || closing) {
        BeginClose();
      } else {
        switch (op.kind) {
          case kPipeRead:
          case kSocketRead: {
            Direction& d = op.kind == kPipeRead ? up : down;
            if (bytes == 0) {  // the pipe's client or the socket's peer has ended
              BeginClose();
              break;
            }
            d.length = bytes;
            d.written = 0;
            Issue(op.kind == kPipeRead ? kSocketWrite : kPipeWrite);
            break;
          }
          case kSocketWrite:
          case kPipeWrite: {
            Direction& d = op.kind == kSocketWrite ? up : down;
            d.written += bytes;
            if (d.written < d.length) {
              Issue(op.kind);
            } else {
              Issue(op.kind == kSocketWrite ? kPipeRead : kSocketRead);
            }
            break;
          }
        }
      }
      done = closing && pending == 0;
    }
    if (done) relay->Finished(this);
  }
};

Status PipeRelay::Add(UniqueHandle pipe, UniqueSocket socket, std::string to_socket_first,
                      std::function<void()> on_closed) {
  if (to_socket_first.size() > kBufferBytes) return InvalidArgument("too many bytes to write first");
  CSI_PROXY_RETURN_IF_ERROR(port_.Associate(reinterpret_cast<HANDLE>(socket.get())));
  auto* link = new Link;
  link->relay = this;
  link->pipe = std::move(pipe);
  link->socket = std::move(socket);
  link->on_closed = std::move(on_closed);
  {
    std::lock_guard lock(mu_);
    links_.insert(link);
  }
  bool done = false;
  {
    std::lock_guard lock(link->mu);
    if (!to_socket_first.empty()) {
      link->up.length = to_socket_first.size();
      link->up.written = 0;
      to_socket_first.copy(link->up.buffer.data(), to_socket_first.size());
      link->Issue(Link::kSocketWrite);
    } else {
      link->Issue(Link::kPipeRead);
    }
    link->Issue(Link::kSocketRead);
    done = link->closing && link->pending == 0;
  }
  if (done) Finished(link);
  return Status::Ok();
}

void PipeRelay::Finished(Link* link) {
  link->pipe.reset();
  link->socket.reset();
  if (link->on_closed) link->on_closed();
  std::lock_guard lock(mu_);
  links_.erase(link);
  delete link;
  if (links_.empty()) drained_.notify_all();
}

void PipeRelay::CloseAll() {
  std::unique_lock lock(mu_);
  for (Link* link : links_) {
    std::lock_guard link_lock(link->mu);
    link->BeginClose();
  }
  drained_.wait(lock, [this] { return links_.empty(); });
}

size_t PipeRelay::size() const {
  std::lock_guard lock(mu_);
  return links_.size();
}

}  // namespace csi_proxy::host
