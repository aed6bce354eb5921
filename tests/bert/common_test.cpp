// bert/common's small pieces that the commands rely on: durations in progress lines, which
// messages a rank and a level let through, error text without LibTorch's backtrace, the
// overrides through which tests and benchmarks switch bertft's own choices.
#include <c10/util/Exception.h>
#include <gtest/gtest.h>

#include <stdexcept>
#include <string>

#include "bert/common/error.h"
#include "bert/common/log.h"
#include "bert/common/override.h"
#include "bert/common/strings.h"

namespace bert {
namespace {

TEST(LogTest, DurationsReadInMinutesThenHours) {
  EXPECT_EQ(log::format_duration(0), "0m00s");
  EXPECT_EQ(log::format_duration(-5), "0m00s");  // a clock read backwards is no time
  EXPECT_EQ(log::format_duration(59.9), "0m59s");
  EXPECT_EQ(log::format_duration(61), "1m01s");
  EXPECT_EQ(log::format_duration(3599), "59m59s");
  EXPECT_EQ(log::format_duration(3600), "1h00m");
  EXPECT_EQ(log::format_duration(2 * 3600 + 3 * 60 + 4), "2h03m");
  EXPECT_EQ(log::format_duration(100 * 3600 + 59 * 60), "100h59m");
}

// The level drops what is below it; a rank other than 0 (data-parallel workers) logs errors
// only, so that N workers do not print N progress lines.
TEST(LogTest, LevelAndRankChooseWhatIsWritten) {
  const log::Level before = log::level();
  log::set_level(log::Level::kWarn);
  EXPECT_FALSE(log::enabled(log::Level::kInfo));
  EXPECT_TRUE(log::enabled(log::Level::kWarn));
  EXPECT_TRUE(log::enabled(log::Level::kError));
  log::set_level(log::Level::kInfo);
  EXPECT_TRUE(log::enabled(log::Level::kInfo));
  EXPECT_FALSE(log::enabled(log::Level::kDebug));
  log::set_rank(1);
  EXPECT_FALSE(log::enabled(log::Level::kInfo));
  EXPECT_FALSE(log::enabled(log::Level::kWarn));
  EXPECT_TRUE(log::enabled(log::Level::kError));
  log::set_rank(0);
  log::set_level(log::Level::kError);
  EXPECT_FALSE(log::enabled(log::Level::kWarn));
  EXPECT_TRUE(log::enabled(log::Level::kError));
  log::set_level(log::Level::kOff);
  EXPECT_FALSE(log::enabled(log::Level::kError));
  log::set_level(before);
}

// An override decides while a scope holds it, the choice's own rule otherwise; nested scopes
// restore the value they found, not "none".
TEST(OverrideTest, ScopesSetAndRestoreInNestedOrder) {
  detail::Override o;
  EXPECT_EQ(o.value(), -1);
  EXPECT_EQ(o.is(0), std::nullopt);
  EXPECT_TRUE(o.on_or(true));
  EXPECT_FALSE(o.on_or(false));
  {
    const detail::ScopedOverride off(o, 0);
    EXPECT_EQ(o.value(), 0);
    EXPECT_FALSE(o.on_or(true));
    {
      const detail::ScopedOverride on(o, 1);
      EXPECT_TRUE(o.on_or(false));
      {
        const detail::ScopedOverride engine(o, 7);  // any value >= 0 (an enum's, as an engine)
        EXPECT_EQ(o.value(), 7);
        EXPECT_EQ(o.is(7), std::optional<bool>(true));
        EXPECT_EQ(o.is(1), std::optional<bool>(false));
      }
      EXPECT_EQ(o.value(), 1);
    }
    EXPECT_EQ(o.value(), 0);
    EXPECT_FALSE(o.on_or(true));
  }
  EXPECT_EQ(o.value(), -1);
  EXPECT_TRUE(o.on_or(true));
}

// A LibTorch error's message is its text without the C++ backtrace LibTorch appends (one line
// for the user); other exceptions give what() itself.
TEST(ErrorTest, MessageOfLeavesOutLibTorchsBacktrace) {
  try {
    TORCH_CHECK(false, "shapes differ: 2 vs 3");
    FAIL() << "TORCH_CHECK did not throw";
  } catch (const c10::Error& e) {
    EXPECT_EQ(message_of(e), "shapes differ: 2 vs 3");
    EXPECT_NE(std::string(e.what()), message_of(e));  // what() carries the backtrace
  }
  EXPECT_EQ(message_of(std::runtime_error("plain")), "plain");
}

// clip keeps a text of up to `limit` bytes whole and cuts a longer one at a character's start.
TEST(ErrorTest, ClipKeepsATextAtTheLimitWhole) {
  EXPECT_EQ(clip(std::string(100, 'x')), std::string(100, 'x'));
  EXPECT_EQ(clip("abcd", 4), "abcd");
  EXPECT_EQ(clip("abcde", 4), "abcd... (5 bytes)");
}

// tokenizer.json's precompiled_charsmap: base64 of any length decodes to its bytes, padded or
// not, whole groups included (the last byte of a text whose length is a multiple of three).
TEST(Base64Test, DecodesWhatEncodeWrites) {
  EXPECT_EQ(base64_decode("TWFu"), "Man");
  EXPECT_EQ(base64_decode("TWE="), "Ma");
  EXPECT_EQ(base64_decode("TWE"), "Ma");
  EXPECT_EQ(base64_decode("TQ=="), "M");
  EXPECT_EQ(base64_decode("+/+/"), "\xfb\xff\xbf");
  EXPECT_EQ(base64_decode(""), "");
  EXPECT_EQ(base64_decode("TW%u"), std::nullopt);
  std::string bytes;
  for (int n = 0; n < 64; ++n) {
    EXPECT_EQ(base64_decode(base64_encode(bytes)), bytes) << n;
    bytes += static_cast<char>(n * 37 + 5);
  }
}

}  // namespace
}  // namespace bert
