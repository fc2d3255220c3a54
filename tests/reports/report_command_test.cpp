// `pipebal report`: compiled in from tools/ so that the command is tested without the
// LibTorch-linked binary (as tests/balance does for `pipebal balance`).
#include "tools/report_command.h"

#include <filesystem>
#include <sstream>
#include <stdexcept>
#include <string>

#include <gtest/gtest.h>

#include "pipebal/common/atomic_file.h"
#include "tests/support/scratch_dir.h"

namespace pipebal::tools {
namespace {

namespace fs = std::filesystem;

const std::string kFixtureDir = PIPEBAL_FIXTURES_DIR "/../reports/fixtures/validation_dir";

// A copy of the fixture directory, so that the default output DIR/report.html does not land in
// the source tree.
class ScratchCopy {
 public:
  ScratchCopy() : path_(pipebal::testing::fresh_dir("validation_dir")) {
    fs::copy(kFixtureDir, path_);
  }
  std::string path() const { return path_.string(); }

 private:
  fs::path path_;
};

TEST(ReportCommand, WritesDirReportHtmlAndPrintsThePath) {
  ScratchCopy dir;
  std::ostringstream out;
  ReportParams params;
  params.dir = dir.path();
  const std::string path = run_report(params, out);
  EXPECT_EQ(path, (fs::path(dir.path()) / "report.html").string());
  EXPECT_EQ(out.str(), path + "\n");
  const std::string html = read_file(path);
  EXPECT_NE(html.find("<!DOCTYPE html>"), std::string::npos);
  EXPECT_NE(html.find("</html>"), std::string::npos);
  // No temporary file is left beside it.
  size_t files = 0;
  for (const auto& entry : fs::directory_iterator(dir.path())) files += entry.is_regular_file();
  EXPECT_EQ(files, 5u);  // the four JSON documents and report.html
}

// -o may name any file but the documents the report reads: those stay as they are, a JSON file
// it does not read (a trace) is the user's to replace.
TEST(ReportCommand, TheOutputMayNotReplaceADocumentItReads) {
  ScratchCopy dir;
  const fs::path root(dir.path());
  write_file_atomically((root / "trace.json").string(), "{}");
  std::ostringstream out;
  ReportParams params;
  params.dir = dir.path();
  params.output_path = (root / "trace.json").string();
  run_report(params, out);
  EXPECT_NE(read_file(params.output_path).find("<!DOCTYPE html>"), std::string::npos);
  for (const char* document : {"profile.json", "plan.json", "run.json", "validation.json"}) {
    const std::string before = read_file((root / document).string());
    params.output_path = (root / document).string();
    try {
      run_report(params, out);
      ADD_FAILURE() << "replaced " << document;
    } catch (const std::invalid_argument& error) {
      EXPECT_NE(std::string(error.what()).find("is the file the report reads"), std::string::npos)
          << error.what();
    }
    EXPECT_EQ(read_file((root / document).string()), before) << document;
  }
}

TEST(ReportCommand, ParsesDirAndOutputOption) {
  ScratchCopy dir;
  const std::string target = (fs::path(dir.path()) / "elsewhere.html").string();
  CLI::App app;
  add_report_command(app);
  ::testing::internal::CaptureStdout();
  app.parse(std::vector<std::string>{target, "-o", dir.path(), "report"});  // reversed argv
  const std::string printed = ::testing::internal::GetCapturedStdout();
  EXPECT_EQ(printed, target + "\n");
  EXPECT_TRUE(fs::exists(target));
  EXPECT_FALSE(fs::exists(fs::path(dir.path()) / "report.html"));
}

TEST(ReportCommand, HelpHasAnExample) {
  CLI::App app;
  add_report_command(app);
  const std::string footer = app.get_subcommand("report")->get_footer();
  EXPECT_NE(footer.find("Example:"), std::string::npos);
  EXPECT_NE(footer.find("pipebal report"), std::string::npos);
}

TEST(ReportCommand, BadDirectoryIsOneLineError) {
  std::ostringstream out;
  ReportParams params;
  params.dir = "/nonexistent/pipebal-dir";
  try {
    run_report(params, out);
    FAIL() << "expected std::invalid_argument";
  } catch (const std::invalid_argument& error) {
    const std::string message = error.what();
    EXPECT_NE(message.find("/nonexistent/pipebal-dir"), std::string::npos) << message;
    EXPECT_EQ(message.find('\n'), std::string::npos) << message;
  }
  EXPECT_TRUE(out.str().empty());
}

}  // namespace
}  // namespace pipebal::tools
