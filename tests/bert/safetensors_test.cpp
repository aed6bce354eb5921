#include "bert/checkpoint/safetensors.h"

#include <gtest/gtest.h>

#include <filesystem>
#include <random>

#include "bert/common/error.h"
#include "tests/support/test_support.h"

namespace bert {
namespace {

using testing::TempDir;
using testing::write_bytes;

/// `n` as the 8 little-endian bytes of a safetensors header length.
std::string length_field(uint64_t n) {
  std::string out(8, '\0');
  for (int i = 0; i < 8; ++i) out[i] = static_cast<char>((n >> (8 * i)) & 0xff);
  return out;
}

std::string header_file(const std::string& header, const std::string& data) {
  return length_field(header.size()) + header + data;
}

/// The CheckpointError message for opening (and reading everything from) `bytes`.
std::string error_for(const std::string& bytes) {
  TempDir dir;
  const auto path = dir.path() / "bad.safetensors";
  write_bytes(path, bytes);
  try {
    SafetensorsReader reader(path);
    reader.read_all();
  } catch (const CheckpointError& e) {
    return e.what();
  }
  return "(no error)";
}

class SafetensorsTest : public testing::SeededTest {};

TEST_F(SafetensorsTest, RoundTripIsBitExactForEveryDtype) {
  TensorMap tensors = {
      {"f32", torch::randn({3, 5})},
      {"bf16", torch::randn({4, 2}).to(torch::kBFloat16)},
      {"f16", torch::randn({7}).to(torch::kHalf)},
      {"f64", torch::randn({2, 2}, torch::kDouble)},
      {"i64", torch::randint(-1000, 1000, {6}, torch::kLong)},
      {"u8", torch::randint(0, 255, {3}).to(torch::kByte)},
      {"bool", torch::rand({4}) > 0.5},
      {"empty", torch::zeros({0, 3})},
      {"scalar", torch::tensor(3.5f).reshape({})},
      {"strided", torch::randn({4, 6}).t()},  // non-contiguous input
  };
  TempDir dir;
  save_safetensors(dir.path() / "m.safetensors", tensors);
  SafetensorsReader reader(dir.path() / "m.safetensors");
  EXPECT_EQ(reader.metadata(), nlohmann::json({{"format", "pt"}}));
  const auto back = reader.read_all();
  ASSERT_EQ(back.size(), tensors.size());
  for (const auto& [name, t] : tensors) {
    EXPECT_EQ(back.at(name).scalar_type(), t.scalar_type()) << name;
    EXPECT_EQ(back.at(name).sizes(), t.sizes()) << name;
    EXPECT_TRUE(torch::equal(back.at(name), t)) << name;
  }
}

TEST_F(SafetensorsTest, LayoutFollowsTheSpec) {
  const auto bytes =
      safetensors_bytes({{"b", torch::zeros({2}, torch::kHalf)}, {"a", torch::zeros({1})}});
  uint64_t n = 0;
  for (int i = 7; i >= 0; --i) n = (n << 8) | static_cast<unsigned char>(bytes[i]);
  EXPECT_EQ(n % 8, 0u);  // header padded to 8 bytes
  const auto header = nlohmann::json::parse(bytes.substr(8, n));
  // Larger dtypes first: the F32 tensor starts at 0, the F16 one after it.
  EXPECT_EQ(header["a"]["data_offsets"], nlohmann::json({0, 4}));
  EXPECT_EQ(header["b"]["data_offsets"], nlohmann::json({4, 8}));
  EXPECT_EQ(header["b"]["dtype"], "F16");
  EXPECT_EQ(bytes.size(), 8 + n + 8);
}

TEST_F(SafetensorsTest, ConvertsHalfAndBfloat16ToFloat) {
  const auto values = torch::tensor({1.5f, -2.25f, 1024.0f});
  TempDir dir;
  save_safetensors(dir.path() / "m.safetensors",
                   {{"h", values.to(torch::kHalf)}, {"b", values.to(torch::kBFloat16)}});
  SafetensorsReader reader(dir.path() / "m.safetensors");
  EXPECT_TRUE(torch::equal(reader.get("h", torch::kFloat), values));
  EXPECT_TRUE(torch::equal(reader.get("b", torch::kFloat), values));
  EXPECT_EQ(reader.get("b").scalar_type(), torch::kBFloat16);
}

// A dtype asked for converts floating-point tensors only: integer ones (token ids, an old
// checkpoint's position_ids buffer) keep their type and values.
TEST_F(SafetensorsTest, ARequestedDtypeLeavesIntegerTensorsAlone) {
  TempDir dir;
  const auto ids = torch::tensor({int64_t{0}, int64_t{5}, (int64_t{1} << 40) + 1});
  save_safetensors(dir.path() / "m.safetensors", {{"ids", ids}, {"w", torch::ones({2})}});
  SafetensorsReader reader(dir.path() / "m.safetensors");
  const auto read = reader.get("ids", torch::kFloat);
  EXPECT_EQ(read.scalar_type(), torch::kLong);
  EXPECT_TRUE(torch::equal(read, ids));
  EXPECT_EQ(reader.read_all(torch::kBFloat16).at("ids").scalar_type(), torch::kLong);
  EXPECT_EQ(reader.read_all(torch::kBFloat16).at("w").scalar_type(), torch::kBFloat16);
}

TEST_F(SafetensorsTest, MappedTensorsCanBeModifiedWithoutTouchingTheFile) {
  TempDir dir;
  save_safetensors(dir.path() / "m.safetensors", {{"x", torch::ones({4})}});
  {
    SafetensorsReader reader(dir.path() / "m.safetensors");
    auto x = reader.get("x");
    x.mul_(3);
  }
  EXPECT_TRUE(
      torch::equal(SafetensorsReader(dir.path() / "m.safetensors").get("x"), torch::ones({4})));
}

TEST(SafetensorsMalformedTest, TruncatedBelowEightBytes) {
  EXPECT_NE(error_for("abc").find("truncated safetensors file: 3 bytes"), std::string::npos);
}

TEST(SafetensorsMalformedTest, HeaderLengthLargerThanFile) {
  std::string bytes = header_file("{}", "");
  bytes[0] = '\x40';  // 64-byte header claimed, 2 present
  EXPECT_NE(error_for(bytes).find("header length 64 is larger than the file allows"),
            std::string::npos);
  std::string huge(8, '\xff');
  EXPECT_NE(error_for(huge + "{}").find("header length"), std::string::npos);
}

TEST(SafetensorsMalformedTest, HeaderIsNotJson) {
  EXPECT_NE(error_for(header_file("{\"a\": ", "")).find("header is not valid JSON"),
            std::string::npos);
}

TEST(SafetensorsMalformedTest, OffsetsPastTheEnd) {
  const auto bytes = header_file(R"({"w":{"dtype":"F32","shape":[4],"data_offsets":[0,16]}})",
                                 std::string(8, '\0'));
  const auto message = error_for(bytes);
  EXPECT_NE(message.find("tensor 'w'"), std::string::npos) << message;
  EXPECT_NE(message.find("past the end of the data section (8 bytes)"), std::string::npos)
      << message;
}

TEST(SafetensorsMalformedTest, TruncatedDataOfARealFile) {
  TempDir dir;
  save_safetensors(dir.path() / "m.safetensors", {{"w", torch::ones({64})}});
  const auto bytes = safetensors_bytes({{"w", torch::ones({64})}});
  EXPECT_NE(error_for(bytes.substr(0, bytes.size() - 10)).find("past the end"), std::string::npos);
}

TEST(SafetensorsMalformedTest, UnknownDtype) {
  const auto bytes =
      header_file(R"({"w":{"dtype":"F8_E9","shape":[1],"data_offsets":[0,1]}})", "x");
  EXPECT_NE(error_for(bytes).find("unknown or unsupported dtype 'F8_E9'"), std::string::npos);
}

TEST(SafetensorsMalformedTest, SizeDoesNotMatchShape) {
  const auto bytes =
      header_file(R"({"w":{"dtype":"F32","shape":[3],"data_offsets":[0,8]}})", std::string(8, 'x'));
  EXPECT_NE(error_for(bytes).find("8 bytes for shape [3] of F32 (12 bytes expected)"),
            std::string::npos);
}

// A tensor's byte range must be exactly its shape's size, more as well as less (the reference
// reader refuses both): extra bytes would be read as nobody's data.
TEST(SafetensorsMalformedTest, MoreBytesThanTheShapeIsRefusedToo) {
  const auto bytes = header_file(R"({"w":{"dtype":"F32","shape":[2],"data_offsets":[0,12]}})",
                                 std::string(12, 'x'));
  EXPECT_NE(error_for(bytes).find("12 bytes for shape [2] of F32 (8 bytes expected)"),
            std::string::npos);
}

// A shape whose element count does not fit 64 bits is refused before its product wraps: here
// to 0, which the empty byte range would then match.
TEST(SafetensorsMalformedTest, AShapeWhoseSizeOverflowsIsRefused) {
  const auto bytes = header_file(
      R"({"w":{"dtype":"F32","shape":[4294967296,4294967296,4],"data_offsets":[0,0]}})", "");
  const auto message = error_for(bytes);
  EXPECT_NE(message.find("tensor 'w': shape overflows"), std::string::npos) << message;
}

// A header above 100 MiB (the reference implementation's limit) is refused from its length
// alone, before any of it is parsed: a sparse file, so that no disk space is used.
TEST(SafetensorsMalformedTest, AHeaderAbove100MiBIsRefusedByItsLength) {
  TempDir dir;
  const auto path = dir.path() / "big.safetensors";
  const uint64_t header = (100ull << 20) + 8;
  write_bytes(path, length_field(header) + "{");
  std::filesystem::resize_file(path, 8 + header);
  try {
    SafetensorsReader reader(path);
    FAIL() << "a 100 MiB header was read";
  } catch (const CheckpointError& e) {
    EXPECT_NE(std::string(e.what()).find("limit 100 MiB"), std::string::npos) << e.what();
  }
}

TEST(SafetensorsMalformedTest, OverlappingTensors) {
  const auto bytes = header_file(
      R"({"a":{"dtype":"F32","shape":[2],"data_offsets":[0,8]},"b":{"dtype":"F32","shape":[2],"data_offsets":[4,12]}})",
      std::string(12, 'x'));
  EXPECT_NE(error_for(bytes).find("overlap"), std::string::npos);
}

TEST(SafetensorsMalformedTest, NegativeOrFractionalShapeAndReversedOffsets) {
  EXPECT_NE(error_for(header_file(R"({"w":{"dtype":"F32","shape":[-1],"data_offsets":[0,0]}})", ""))
                .find("non-integer or negative"),
            std::string::npos);
  EXPECT_NE(
      error_for(header_file(R"({"w":{"dtype":"F32","shape":[1],"data_offsets":[4,0]}})", "xxxx"))
          .find("reversed"),
      std::string::npos);
  EXPECT_NE(error_for(header_file(R"({"w":{"dtype":"F32","shape":[1]}})", "xxxx"))
                .find("expected {dtype"),
            std::string::npos);
}

TEST(SafetensorsMalformedTest, RandomCorruptionNeverCrashes) {
  // Flip bytes all over a valid file: every outcome is a clean read or a CheckpointError.
  const auto good =
      safetensors_bytes({{"a", torch::ones({3, 3})}, {"b", torch::zeros({5}, torch::kLong)}});
  std::mt19937 rng(7);
  for (int trial = 0; trial < 300; ++trial) {
    std::string bytes = good;
    const int flips = 1 + static_cast<int>(rng() % 4);
    for (int k = 0; k < flips; ++k) bytes[rng() % bytes.size()] = static_cast<char>(rng() % 256);
    if (rng() % 3 == 0) bytes.resize(rng() % bytes.size());
    error_for(bytes);  // must not crash or read out of bounds (run under ASan/valgrind to see)
  }
}

TEST(SafetensorsMalformedTest, MissingFileNamesThePath) {
  try {
    SafetensorsReader reader("/nonexistent/x.safetensors");
    FAIL();
  } catch (const CheckpointError& e) {
    EXPECT_NE(std::string(e.what()).find("/nonexistent/x.safetensors: cannot open"),
              std::string::npos);
  }
}

}  // namespace
}  // namespace bert
