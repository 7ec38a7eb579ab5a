// See runner_protocol.h.
#include "isolation/runner_protocol.h"

#include <algorithm>
#include <cstdio>
#include <cstring>

namespace csi_proxy::host {

void AppendFrame(const runner_proto::RunnerMessage& message, std::string& out) {
  const size_t size = message.ByteSizeLong();
  const size_t at = out.size();
  out.resize(at + kRunnerFrameHeaderBytes + size);
  const auto length = static_cast<uint32_t>(size);
  for (size_t i = 0; i < kRunnerFrameHeaderBytes; ++i) out[at + i] = static_cast<char>((length >> (8 * i)) & 0xff);
  message.SerializeWithCachedSizesToArray(reinterpret_cast<uint8_t*>(out.data() + at + kRunnerFrameHeaderBytes));
}

std::string PrintableRunnerText(std::string_view text, size_t max_bytes) {
  size_t keep = std::min(text.size(), max_bytes);
  while (keep > 0 && keep < text.size() && (static_cast<unsigned char>(text[keep]) & 0xc0) == 0x80) --keep;
  std::string out;
  out.reserve(keep);
  for (size_t i = 0; i < keep; ++i) {
    const auto c = static_cast<unsigned char>(text[i]);
    const bool c1 = c == 0xc2 && i + 1 < keep && static_cast<unsigned char>(text[i + 1]) >= 0x80 &&
                    static_cast<unsigned char>(text[i + 1]) <= 0x9f;
    if (c == '\n') {
      out += "\\n";
    } else if (c == '\r') {
      out += "\\r";
    } else if (c == '\t') {
      out += "\\t";
    } else if (c < 0x20 || c == 0x7f || c1) {
      char escaped[5];
      std::snprintf(escaped, sizeof escaped, "\\x%02x", c1 ? static_cast<unsigned char>(text[++i]) : c);
      out += escaped;
    } else {
      out += static_cast<char>(c);
    }
  }
  if (keep < text.size()) out += " ... (" + std::to_string(text.size()) + " bytes)";
  return out;
}

std::string RunnerLogLine(std::string_view group, std::string_view text) {
  const std::string prefix = "[" + std::string(group) + "] ";
  if (text.substr(0, prefix.size()) == prefix) text.remove_prefix(prefix.size());
  return prefix + PrintableRunnerText(text, kMaxRunnerLogLine);
}

char* FrameReader::Space(size_t want) {
  if (begin_ == end_) begin_ = end_ = 0;
  if (begin_ > 0 && (begin_ >= buffer_.size() / 2 || buffer_.size() - end_ < want)) {
    // What is left moves to the front, so that the buffer stays about as large as the largest frame.
    std::memmove(buffer_.data(), buffer_.data() + begin_, end_ - begin_);
    end_ -= begin_;
    begin_ = 0;
  }
  if (buffer_.size() - end_ < want) buffer_.resize(end_ + want);
  return buffer_.data() + end_;
}

void FrameReader::Filled(size_t size) { end_ += size; }

void FrameReader::Feed(std::string_view bytes) {
  std::memcpy(Space(bytes.size()), bytes.data(), bytes.size());
  Filled(bytes.size());
}

bool FrameReader::HasFrame() const {
  if (pending() < kRunnerFrameHeaderBytes) return false;
  const auto* p = reinterpret_cast<const unsigned char*>(buffer_.data() + begin_);
  uint32_t length = 0;
  for (size_t i = 0; i < kRunnerFrameHeaderBytes; ++i) length |= static_cast<uint32_t>(p[i]) << (8 * i);
  return pending() >= kRunnerFrameHeaderBytes + length;  // a length over the limit: Next says so
}

StatusOr<bool> FrameReader::Next(runner_proto::RunnerMessage& out) {
  if (pending() < kRunnerFrameHeaderBytes) return false;
  const auto* p = reinterpret_cast<const unsigned char*>(buffer_.data() + begin_);
  uint32_t length = 0;
  for (size_t i = 0; i < kRunnerFrameHeaderBytes; ++i) length |= static_cast<uint32_t>(p[i]) << (8 * i);
  if (length > kMaxRunnerFrameBytes) {
    return Status(Code::kDataLoss, "a frame of " + std::to_string(length) + " bytes, more than the " +
                                       std::to_string(kMaxRunnerFrameBytes) + " a frame may have");
  }
  if (pending() < kRunnerFrameHeaderBytes + length) return false;
  if (!out.ParseFromArray(p + kRunnerFrameHeaderBytes, static_cast<int>(length))) {
    return Status(Code::kDataLoss, "a frame of " + std::to_string(length) + " bytes that is not a message");
  }
  begin_ += kRunnerFrameHeaderBytes + length;
  return true;
}

}  // namespace csi_proxy::host
