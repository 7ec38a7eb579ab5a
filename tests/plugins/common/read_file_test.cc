// The whole-file read every group uses for state, sysfs and procfs files: close-on-exec while it is open, and
// bounded.
#include "read_file_linux.h"

#include <fcntl.h>
#include <gtest/gtest.h>
#include <stdlib.h>
#include <sys/stat.h>
#include <unistd.h>

#include <filesystem>
#include <fstream>
#include <future>
#include <string>
#include <thread>

namespace csi_proxy::common {
namespace {

class ScratchDir {
 public:
  ScratchDir() {
    std::string templ = (std::filesystem::temp_directory_path() / "read-file-test.XXXXXX").string();
    path_ = ::mkdtemp(templ.data()) ? templ : "";
  }
  ~ScratchDir() {
    std::error_code ec;
    if (!path_.empty()) std::filesystem::remove_all(path_, ec);
  }
  const std::string& path() const { return path_; }

 private:
  std::string path_;
};

// The open flags of this process's descriptor for `target` other than `except`, from /proc/self/fdinfo; -1 if
// none.
long OpenFlagsOf(const std::string& target, int except) {
  for (const auto& entry : std::filesystem::directory_iterator("/proc/self/fd")) {
    int fd = std::stoi(entry.path().filename().string());
    if (fd == except) continue;
    std::error_code ec;
    if (std::filesystem::read_symlink(entry.path(), ec).string() != target) continue;
    std::ifstream info("/proc/self/fdinfo/" + std::to_string(fd));
    std::string key;
    while (info >> key) {
      if (key == "flags:") {
        std::string octal;
        info >> octal;
        return std::stol(octal, nullptr, 8);
      }
    }
  }
  return -1;
}

// A red-team pass: files read with std::ifstream lacked O_CLOEXEC and leaked into programs spawned at the same
// moment. The read blocks on a FIFO here, so the test can look at the descriptor while it is open.
TEST(ReadWholeFile, TheDescriptorIsCloseOnExecWhileTheFileIsOpen) {
  ScratchDir dir;
  ASSERT_FALSE(dir.path().empty());
  const std::string fifo = dir.path() + "/fifo";
  ASSERT_EQ(::mkfifo(fifo.c_str(), 0600), 0);
  auto reading = std::async(std::launch::async, [&] { return ReadWholeFile(fifo); });
  int writer = ::open(fifo.c_str(), O_WRONLY | O_CLOEXEC);  // returns once the reader's open has begun
  ASSERT_GE(writer, 0);
  // The reader's descriptor appears when its open returns, which can be just after the writer's.
  long flags = OpenFlagsOf(fifo, writer);
  for (int i = 0; flags == -1 && i < 2000; ++i) {
    std::this_thread::sleep_for(std::chrono::milliseconds(1));
    flags = OpenFlagsOf(fifo, writer);
  }
  ASSERT_EQ(::write(writer, "data", 4), 4);
  ::close(writer);
  auto content = reading.get();
  ASSERT_NE(flags, -1) << "the reader's descriptor was not found";
  EXPECT_NE(flags & O_CLOEXEC, 0) << "flags " << std::oct << flags;
  ASSERT_TRUE(content.ok()) << content.status().message();
  EXPECT_EQ(*content, "data");
}

TEST(ReadWholeFile, AFileLongerThanTheLimitIsResourceExhaustedAndAMissingOneNotFound) {
  ScratchDir dir;
  const std::string file = dir.path() + "/big";
  std::ofstream(file) << std::string(5000, 'x');
  EXPECT_EQ(ReadWholeFile(file, {.max_bytes = 4096}).status().code(), Code::kResourceExhausted);
  EXPECT_EQ(ReadWholeFile(file, {.max_bytes = 5000}).value().size(), 5000u);
  EXPECT_EQ(ReadWholeFile(dir.path() + "/missing").status().code(), Code::kNotFound);
  EXPECT_EQ(ReadTrimmedFile(file + "-none"), std::nullopt);
}

}  // namespace
}  // namespace csi_proxy::common
