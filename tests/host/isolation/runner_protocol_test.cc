// The frames between the host and an isolated group's runner: whatever sizes the reads come in, the messages come
// out whole and in order; a corrupt stream is refused rather than read on.
#include "isolation/runner_protocol.h"

#include <gtest/gtest.h>

#include <cstring>

namespace csi_proxy::host {
namespace {

runner_proto::RunnerMessage CallMessage(uint64_t id, std::string request) {
  runner_proto::RunnerMessage m;
  m.mutable_call()->set_id(id);
  m.mutable_call()->set_method(7);
  m.mutable_call()->set_request(std::move(request));
  m.mutable_call()->set_deadline_unix_ns(INT64_MAX);
  return m;
}

TEST(RunnerFrames, MessagesComeOutWholeAndInOrderWhateverTheReadSizes) {
  std::string stream;
  for (uint64_t id = 1; id <= 3; ++id) AppendFrame(CallMessage(id, std::string(id * 1000, 'x')), stream);
  runner_proto::RunnerMessage log;
  log.mutable_log()->set_level(2);
  log.mutable_log()->set_text("[echo] hello");
  AppendFrame(log, stream);

  for (size_t piece : {size_t{1}, size_t{3}, size_t{4}, size_t{5}, size_t{4096}, stream.size()}) {
    FrameReader reader;
    std::vector<runner_proto::RunnerMessage> got;
    for (size_t at = 0; at < stream.size(); at += piece) {
      reader.Feed(std::string_view(stream).substr(at, piece));
      runner_proto::RunnerMessage m;
      for (;;) {
        auto next = reader.Next(m);
        ASSERT_TRUE(next.ok()) << next.status().message();
        if (!*next) break;
        got.push_back(m);
      }
    }
    ASSERT_EQ(got.size(), 4u) << "reads of " << piece << " bytes";
    for (uint64_t id = 1; id <= 3; ++id) {
      EXPECT_EQ(got[id - 1].call().id(), id);
      EXPECT_EQ(got[id - 1].call().request(), std::string(id * 1000, 'x'));
    }
    EXPECT_EQ(got[3].log().text(), "[echo] hello");
    EXPECT_EQ(reader.pending(), 0u);
  }
}

TEST(RunnerFrames, AFrameIsLittleEndianLengthThenTheMessage) {
  runner_proto::RunnerMessage m;
  m.mutable_cancel()->set_id(1);
  std::string frame;
  AppendFrame(m, frame);
  ASSERT_EQ(frame.size(), kRunnerFrameHeaderBytes + m.ByteSizeLong());
  EXPECT_EQ(frame.substr(0, 4), std::string("\x04\x00\x00\x00", 4));  // cancel (field 6) holding id 1: 4 bytes
}

TEST(RunnerFrames, ALargeRequestPassesAndSpaceIsReused) {
  FrameReader reader;
  std::string frame;
  AppendFrame(CallMessage(1, std::string(8 << 20, 'r')), frame);
  for (size_t at = 0; at < frame.size(); at += 65536) {
    size_t n = std::min<size_t>(65536, frame.size() - at);
    std::memcpy(reader.Space(65536), frame.data() + at, n);
    reader.Filled(n);
  }
  runner_proto::RunnerMessage m;
  auto next = reader.Next(m);
  ASSERT_TRUE(next.ok() && *next);
  EXPECT_EQ(m.call().request().size(), size_t{8 << 20});
}

TEST(RunnerFrames, AFrameLongerThanTheLimitIsRefused) {
  FrameReader reader;
  const uint32_t too_long = static_cast<uint32_t>(kMaxRunnerFrameBytes + 1);
  std::string header;
  for (int i = 0; i < 4; ++i) header += static_cast<char>((too_long >> (8 * i)) & 0xff);
  reader.Feed(header);
  runner_proto::RunnerMessage m;
  auto next = reader.Next(m);
  ASSERT_FALSE(next.ok());
  EXPECT_EQ(next.status().code(), Code::kDataLoss);
}

TEST(RunnerFrames, AFrameThatIsNotAMessageIsRefused) {
  FrameReader reader;
  reader.Feed(std::string("\x03\x00\x00\x00\xff\xff\xff", 7));
  runner_proto::RunnerMessage m;
  auto next = reader.Next(m);
  ASSERT_FALSE(next.ok());
  EXPECT_EQ(next.status().code(), Code::kDataLoss);
}

TEST(RunnerFrames, AnIncompleteFrameWaitsForTheRest) {
  std::string frame;
  AppendFrame(CallMessage(9, "abc"), frame);
  FrameReader reader;
  reader.Feed(std::string_view(frame).substr(0, frame.size() - 1));
  runner_proto::RunnerMessage m;
  auto next = reader.Next(m);
  ASSERT_TRUE(next.ok());
  EXPECT_FALSE(*next);
  EXPECT_FALSE(reader.HasFrame());
  reader.Feed(std::string_view(frame).substr(frame.size() - 1));
  EXPECT_TRUE(reader.HasFrame());
  next = reader.Next(m);
  ASSERT_TRUE(next.ok() && *next);
  EXPECT_EQ(m.call().id(), 9u);
}

// A runner's text is the group's word: what could pass for another line, or command a terminal, is escaped.
TEST(RunnerText, ControlCharactersAreEscapedAndTheLengthBounded) {
  EXPECT_EQ(PrintableRunnerText("a\nb\rc\td\x1b[2J\x7f", 100), "a\\nb\\rc\\td\\x1b[2J\\x7f");
  // The C1 controls (U+0080-U+009F: CSI is U+009B) in their UTF-8 form; other characters stay as they are.
  EXPECT_EQ(PrintableRunnerText("\xc2\x9b"
                                "2J \xc3\xa9t\xc3\xa9 \xc2\xa0",
                                100),
            "\\x9b2J \xc3\xa9t\xc3\xa9 \xc2\xa0");
  EXPECT_EQ(PrintableRunnerText("abcdef", 4), "abcd ... (6 bytes)");
  // Not within a character: "\xc3\xa9" is one.
  EXPECT_EQ(PrintableRunnerText("ab\xc3\xa9", 3), "ab ... (4 bytes)");
}

TEST(RunnerText, ALogLineNamesTheGroupOnceWhateverTheRunnerWrote) {
  EXPECT_EQ(RunnerLogLine("echo", "[echo] hello"), "[echo] hello");
  EXPECT_EQ(RunnerLogLine("echo", "hello"), "[echo] hello");
  EXPECT_EQ(RunnerLogLine("echo", "[disk] hello"), "[echo] [disk] hello");
  EXPECT_EQ(RunnerLogLine("echo", "[echo] [echo] hello"), "[echo] [echo] hello");
  EXPECT_EQ(RunnerLogLine("echo", "hi\n2026-01-01 error [disk] forged"), "[echo] hi\\n2026-01-01 error [disk] forged");
  EXPECT_EQ(RunnerLogLine("echo", std::string(5000, 'x')).size(),
            std::string("[echo] ").size() + kMaxRunnerLogLine + std::string(" ... (5000 bytes)").size());
}

}  // namespace
}  // namespace csi_proxy::host
