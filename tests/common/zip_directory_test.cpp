// The zip directory reader against archives laid out here by PKWARE's APPNOTE (a plain archive, a
// zip64 one, a comment holding a false end record), archives cut or edited, and files that are no
// archive. tests/tools/train_data_test.py checks it on TorchScript models and torch.save files.
#include "pipebal/common/zip_directory.h"

#include <cstdint>
#include <fstream>
#include <stdexcept>
#include <string>
#include <vector>

#include <gtest/gtest.h>

#include "tests/support/scratch_dir.h"

namespace pipebal {
namespace {

void put(std::string& out, uint64_t value, int bytes) {
  for (int i = 0; i < bytes; ++i) out.push_back(static_cast<char>(value >> (8 * i) & 0xFF));
}

struct Layout {
  bool zip64 = false;   // every size and offset in zip64 extras, and the zip64 end records
  std::string comment;  // the archive's comment
};

// A stored (uncompressed) archive of `files` (name, content), laid out as `layout` says.
std::string archive(const std::vector<std::pair<std::string, std::string>>& files,
                    const Layout& layout = {}) {
  std::string out, directory;
  const uint32_t mark = 0xFFFFFFFF;
  for (const auto& [name, content] : files) {
    const uint64_t offset = out.size();
    put(out, 0x04034b50, 4);  // local file header
    put(out, 45, 2);
    put(out, 0, 2);
    put(out, 0, 2);  // stored
    put(out, 0, 4);  // time, date
    put(out, 0, 4);  // crc-32: not read
    put(out, content.size(), 4);
    put(out, content.size(), 4);
    put(out, name.size(), 2);
    put(out, 0, 2);
    out += name + content;
    std::string extra;
    if (layout.zip64) {
      put(extra, 0x0001, 2);
      put(extra, 24, 2);
      put(extra, content.size(), 8);  // uncompressed
      put(extra, content.size(), 8);  // compressed
      put(extra, offset, 8);
    }
    put(directory, 0x02014b50, 4);  // central directory file header
    put(directory, 45, 2);
    put(directory, 45, 2);
    put(directory, 0, 2);
    put(directory, 0, 2);
    put(directory, 0, 4);
    put(directory, 0, 4);
    put(directory, layout.zip64 ? mark : content.size(), 4);
    put(directory, layout.zip64 ? mark : content.size(), 4);
    put(directory, name.size(), 2);
    put(directory, extra.size(), 2);
    put(directory, 0, 2);  // comment
    put(directory, 0, 2);  // disk
    put(directory, 0, 2);
    put(directory, 0, 4);
    put(directory, layout.zip64 ? mark : offset, 4);
    directory += name + extra;
  }
  const uint64_t directory_offset = out.size();
  out += directory;
  if (layout.zip64) {
    const uint64_t end64_offset = out.size();
    put(out, 0x06064b50, 4);  // zip64 end of central directory record
    put(out, 44, 8);
    put(out, 45, 2);
    put(out, 45, 2);
    put(out, 0, 4);
    put(out, 0, 4);
    put(out, files.size(), 8);
    put(out, files.size(), 8);
    put(out, directory.size(), 8);
    put(out, directory_offset, 8);
    put(out, 0x07064b50, 4);  // its locator
    put(out, 0, 4);
    put(out, end64_offset, 8);
    put(out, 1, 4);
  }
  put(out, 0x06054b50, 4);  // end of central directory record
  put(out, 0, 2);
  put(out, 0, 2);
  put(out, layout.zip64 ? 0xFFFF : files.size(), 2);
  put(out, layout.zip64 ? 0xFFFF : files.size(), 2);
  put(out, layout.zip64 ? mark : directory.size(), 4);
  put(out, layout.zip64 ? mark : directory_offset, 4);
  put(out, layout.comment.size(), 2);
  return out + layout.comment;
}

const std::vector<std::pair<std::string, std::string>> kFiles = {
    {"archive/data.pkl", "pickle"},
    {"archive/data/0", std::string(1000, 'x')},
    {"archive/data/1", ""}};

void expect_files(const std::vector<ZipEntry>& entries) {
  ASSERT_EQ(entries.size(), kFiles.size());
  for (size_t i = 0; i < kFiles.size(); ++i) {
    EXPECT_EQ(entries[i].name, kFiles[i].first);
    EXPECT_EQ(entries[i].size, kFiles[i].second.size()) << entries[i].name;
  }
}

std::string error_of(const std::string& bytes) {
  try {
    zip_directory(bytes.data(), bytes.size());
  } catch (const std::runtime_error& error) {
    return error.what();
  }
  return "no error";
}

TEST(ZipDirectory, ListsEachEntrysNameAndSize) {
  const std::string bytes = archive(kFiles);
  expect_files(zip_directory(bytes.data(), bytes.size()));
  const std::string path = testing::scratch_dir() + "/archive.zip";
  std::ofstream(path, std::ios::binary) << bytes;
  expect_files(zip_directory(path));
}

// Past 65,535 entries or 4 GiB, the sizes, offsets and counts are in zip64 records instead.
TEST(ZipDirectory, ReadsZip64Archives) {
  const std::string bytes = archive(kFiles, {true, ""});
  expect_files(zip_directory(bytes.data(), bytes.size()));
}

// A comment may hold the end record's signature: the end record is the one whose comment
// reaches the end of the archive.
TEST(ZipDirectory, AnEndRecordInTheCommentIsNotTakenForTheArchives) {
  std::string fake;
  put(fake, 0x06054b50, 4);
  fake += std::string(18, '\0');
  for (const bool zip64 : {false, true}) {
    const std::string bytes = archive(kFiles, {zip64, "a comment " + fake + " ends here"});
    expect_files(zip_directory(bytes.data(), bytes.size()));
    // Bytes appended after an archive: its end record is the last that fits.
    const std::string appended = archive(kFiles, {zip64, ""}) + "appended";
    expect_files(zip_directory(appended.data(), appended.size()));
  }
}

// What stands before the end record is read as a zip64 locator only where it leads to a zip64
// end record, as LibTorch's reader takes it: here it is the end of the last entry's name.
TEST(ZipDirectory, BytesLikeALocatorThatLeadNowhereAreNotOne) {
  std::string name = "archive/x";
  put(name, 0x07064b50, 4);
  put(name, 0, 4);
  put(name, 3, 8);  // "the zip64 end record is at offset 3"
  put(name, 1, 4);
  const std::string bytes = archive({{"archive/data/0", "abc"}, {name, "defg"}});
  const std::vector<ZipEntry> entries = zip_directory(bytes.data(), bytes.size());
  ASSERT_EQ(entries.size(), 2u);
  EXPECT_EQ(entries[1].name, name);
  EXPECT_EQ(entries[1].size, 4u);
}

TEST(ZipDirectory, RefusesWhatIsNoArchiveOrADamagedOne) {
  EXPECT_EQ(error_of(""),
            "not a zip archive it can read: shorter than the end of a central directory");
  EXPECT_EQ(error_of(std::string(4096, 'x')),
            "not a zip archive it can read: no end of central directory");
  for (const bool zip64 : {false, true}) {
    const std::string bytes = archive(kFiles, {zip64, ""});
    // The directory's start moved far past its end record, or its first entry's signature broken.
    const std::string tail = bytes.substr(bytes.size() - 22);
    std::string moved = bytes;
    moved[zip64 ? moved.size() - 22 - 20 - 56 + 48 + 7 : moved.size() - 22 + 16 + 3] = 0x7F;
    EXPECT_EQ(error_of(moved),
              "not a zip archive it can read: its central directory lies outside the archive")
        << zip64;
    const size_t first_entry = bytes.find(std::string("PK\x01\x02", 4));
    std::string broken = bytes;
    broken[first_entry + 2] = 'x';
    EXPECT_EQ(error_of(broken),
              "not a zip archive it can read: its central directory is inconsistent")
        << zip64;
    // Entries and directory cut off its end: the end record alone is left.
    EXPECT_NE(error_of(tail), "no error") << zip64;
  }
  // An archive on several disks (this the second): refused, where one disk numbered 1 is not.
  for (const int disk : {1, 2}) {
    std::string disks = archive(kFiles);
    disks[disks.size() - 22 + 4] = static_cast<char>(disk);
    disks[disks.size() - 22 + 6] = 1;
    if (disk == 1) {
      expect_files(zip_directory(disks.data(), disks.size()));
    } else {
      EXPECT_EQ(error_of(disks), "not a zip archive it can read: it spans several disks");
    }
  }
  // A zip64 entry whose extra field does not hold the size it says is there.
  std::string no_extra = archive({{"a", "b"}}, {true, ""});
  const size_t extra_id = no_extra.find(std::string("\x01\x00\x18\x00", 4));
  no_extra[extra_id] = 0x09;
  EXPECT_EQ(error_of(no_extra),
            "not a zip archive it can read: an entry's zip64 sizes are missing");
  EXPECT_THROW(zip_directory(testing::scratch_dir() + "/none.zip"), std::runtime_error);
}

}  // namespace
}  // namespace pipebal
