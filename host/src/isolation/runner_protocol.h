// The frames the host and an isolated group's runner exchange over their socket pair: a 4-byte little-endian
// length and a serialized csi_proxy.runner.v1.RunnerMessage (host/proto/csi_proxy/runner/v1/runner.proto). Pure
// byte handling, no I/O: both sides read into a FrameReader and write what AppendFrame produced.
#pragma once

#include <cstddef>
#include <cstdint>
#include <string>
#include <string_view>

#include "csi_proxy/runner/v1/runner.pb.h"
#include "csi_proxy/status.hpp"

namespace csi_proxy::host {

namespace runner_proto = ::csi_proxy::runner::v1;

// Host and runner come from one build; the handshake refuses a runner that speaks another version.
inline constexpr uint32_t kRunnerProtocolVersion = 2;
// Above the largest request a group may accept (16 MiB) and any answer the API gives: a longer frame means the
// stream is corrupt, and the connection is given up.
inline constexpr size_t kMaxRunnerFrameBytes = 64 * 1024 * 1024;
inline constexpr size_t kRunnerFrameHeaderBytes = 4;

// What the host writes of text a runner sent (a log line, the code its library ran when it crashed), which a
// hostile library may have forged: control characters become \n, \r, \t or \xNN (a newline would start a line that
// looks like the host's, an escape sequence would command the terminal of an admin reading the log), the C1
// controls' UTF-8 form too; at most `max_bytes` bytes of `text` are kept (not cutting a character), the cut said.
std::string PrintableRunnerText(std::string_view text, size_t max_bytes);

// The longest runner log line the host writes, in bytes of the runner's text (the runner cuts its own at 16 KiB).
inline constexpr size_t kMaxRunnerLogLine = 2048;

// A runner's log line as the host writes it: "[<group>] " and the text, printable and bounded. The host names the
// group itself, whatever the runner wrote; the lines of a well-behaved runner and its library begin with that
// prefix already (as host_context.cc writes a library's lines in process), which is then not written twice.
std::string RunnerLogLine(std::string_view group, std::string_view text);

// Appends `message` as one frame to `out`.
void AppendFrame(const runner_proto::RunnerMessage& message, std::string& out);

// Cuts a byte stream into messages, whatever the sizes of the reads that brought it.
class FrameReader {
 public:
  // The buffer to read into (at least `want` bytes), and how much of it the read filled.
  char* Space(size_t want);
  void Filled(size_t size);
  // Appends bytes from elsewhere (the tests).
  void Feed(std::string_view bytes);

  // The next whole message into `out`: true when there was one, false when more bytes are needed, an error
  // (DATA_LOSS) when the stream is corrupt (a frame too long, or one that does not parse).
  StatusOr<bool> Next(runner_proto::RunnerMessage& out);
  // Bytes received and not yet taken as messages.
  size_t pending() const { return end_ - begin_; }
  // Whether those bytes hold a whole frame, which Next returns without another read.
  bool HasFrame() const;

 private:
  std::string buffer_;
  size_t begin_ = 0;  // the first byte not taken
  size_t end_ = 0;    // one past the last byte received
};

}  // namespace csi_proxy::host
