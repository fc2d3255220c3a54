// Parsing and printing of sizes and bandwidths.
#include "pipebal/balance/units.h"

#include <stdexcept>
#include <string>

#include <gtest/gtest.h>

namespace pipebal::balance {
namespace {

TEST(Units, BinarySuffixesArePowersOf1024) {
  EXPECT_EQ(parse_bytes("8G"), 8LL << 30);
  EXPECT_EQ(parse_bytes("8g"), 8LL << 30);
  EXPECT_EQ(parse_bytes("512MiB"), 512LL << 20);
  EXPECT_EQ(parse_bytes("1.5GiB"), 3LL << 29);
  EXPECT_EQ(parse_bytes("2K"), 2048);
  EXPECT_EQ(parse_bytes("1Ti"), 1LL << 40);
}

TEST(Units, DecimalSuffixesArePowersOf1000AndPlainNumbersAreBytes) {
  EXPECT_EQ(parse_bytes("1.5GB"), 1500000000);
  EXPECT_EQ(parse_bytes("10kb"), 10000);
  EXPECT_EQ(parse_bytes("1048576"), 1048576);
  EXPECT_EQ(parse_bytes("12B"), 12);
  EXPECT_EQ(parse_bytes("4 MiB"), 4LL << 20);
}

TEST(Units, RejectsWhatIsNotASize) {
  for (const std::string bad :
       {"", "G", "-1G", "8X", "8GBs", "nan", "inf", "1e30T", "0x10G", "0x1p4K", "0X10"}) {
    try {
      parse_bytes(bad);
      ADD_FAILURE() << "accepted '" << bad << "'";
    } catch (const std::invalid_argument& error) {
      EXPECT_NE(std::string(error.what()).find("cannot read byte size '" + bad + "'"),
                std::string::npos)
          << error.what();
    }
  }
}

TEST(Units, BandwidthIsReturnedInBytesPerMillisecond) {
  EXPECT_DOUBLE_EQ(parse_bandwidth_bytes_per_ms("10GB/s"), 1e7);
  EXPECT_DOUBLE_EQ(parse_bandwidth_bytes_per_ms("1GiB/s"), 1073741824.0 / 1000);
  EXPECT_DOUBLE_EQ(parse_bandwidth_bytes_per_ms("1e9"), 1e6);
  EXPECT_DOUBLE_EQ(parse_bandwidth_bytes_per_ms("100MB"), 1e5);
  EXPECT_THROW(parse_bandwidth_bytes_per_ms("fast"), std::invalid_argument);
  EXPECT_THROW(parse_bandwidth_bytes_per_ms("10GB/h"), std::invalid_argument);
  EXPECT_THROW(parse_bandwidth_bytes_per_ms("0x10GB/s"), std::invalid_argument);
  // Past a double's range: infinity, which a plan.json could not carry back to `train --plan`.
  try {
    parse_bandwidth_bytes_per_ms("1e300TB/s");
    ADD_FAILURE() << "accepted 1e300TB/s";
  } catch (const std::invalid_argument& error) {
    EXPECT_EQ(std::string(error.what()),
              "bandwidth '1e300TB/s' is too large (leave it out for free transfers)");
  }
  EXPECT_DOUBLE_EQ(parse_bandwidth_bytes_per_ms("1e300"), 1e297);
}

// Bits are said as bits: a link of 25 Gbit/s carries 3.125 GB/s; "Gb" could be either, and is
// refused with both spellings.
TEST(Units, BandwidthInBitsIsAnEighthInBytes) {
  EXPECT_DOUBLE_EQ(parse_bandwidth_bytes_per_ms("25Gbit/s"), 25e9 / 8 / 1000);
  EXPECT_DOUBLE_EQ(parse_bandwidth_bytes_per_ms("1Gibit/s"), 1073741824.0 / 8 / 1000);
  EXPECT_DOUBLE_EQ(parse_bandwidth_bytes_per_ms("8000bit"), 1.0);
  EXPECT_DOUBLE_EQ(parse_bandwidth_bytes_per_ms("10 Mbit/s"), 1250.0);
  for (const std::string ambiguous : {"10Gb/s", "10gb/s", "100Mb", "12b/s"}) {
    try {
      parse_bandwidth_bytes_per_ms(ambiguous);
      ADD_FAILURE() << "accepted '" << ambiguous << "'";
    } catch (const std::invalid_argument& error) {
      EXPECT_NE(std::string(error.what()).find("a lower-case b may be bits or bytes"),
                std::string::npos)
          << error.what();
    }
  }
  try {
    parse_bandwidth_bytes_per_ms("10Gb/s");
  } catch (const std::invalid_argument& error) {
    EXPECT_EQ(std::string(error.what()),
              "bandwidth '10Gb/s': a lower-case b may be bits or bytes; write 10GB/s for bytes "
              "or 10Gbit/s for bits");
  }
}

TEST(Units, FormatsBinaryBytesAndDecimalBandwidth) {
  EXPECT_EQ(format_bytes(12), "12 B");
  EXPECT_EQ(format_bytes(1536), "1.50 KiB");
  EXPECT_EQ(format_bytes(8LL << 30), "8.00 GiB");
  EXPECT_EQ(format_bandwidth(1e7), "10.00 GB/s");
}

}  // namespace
}  // namespace pipebal::balance
