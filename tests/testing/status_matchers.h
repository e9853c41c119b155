// gMock matchers for absl::Status and absl::StatusOr (Abseil 20220623 has none).
//
//   EXPECT_THAT(Decode(bad), StatusIs(absl::StatusCode::kDataLoss));
//   EXPECT_THAT(Open(path), StatusIs(absl::StatusCode::kDataLoss, HasSubstr("overlap")));
//   DF11_ASSERT_OK_AND_ASSIGN(auto file, SafetensorsFile::Open(path));
#ifndef DF11_TESTS_TESTING_STATUS_MATCHERS_H_
#define DF11_TESTS_TESTING_STATUS_MATCHERS_H_

#include <ostream>
#include <string>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "gmock/gmock.h"
#include "gtest/gtest.h"

namespace df11::testing {

inline const absl::Status& GetStatus(const absl::Status& s) { return s; }
template <typename T>
const absl::Status& GetStatus(const absl::StatusOr<T>& s) {
  return s.status();
}

MATCHER_P(StatusIs, code,
          std::string("has status code ") + absl::StatusCodeToString(code)) {
  const absl::Status& s = ::df11::testing::GetStatus(arg);
  *result_listener << "status is " << s;
  return s.code() == code;
}

MATCHER_P2(StatusIs, code, message_matcher,
           std::string("has status code ") + absl::StatusCodeToString(code)) {
  const absl::Status& s = ::df11::testing::GetStatus(arg);
  *result_listener << "status is " << s;
  return s.code() == code &&
         ::testing::Matches(message_matcher)(std::string(s.message()));
}

MATCHER(IsOk, "is OK") {
  const absl::Status& s = ::df11::testing::GetStatus(arg);
  *result_listener << "status is " << s;
  return s.ok();
}

}  // namespace df11::testing

#define DF11_STATUS_TEST_CONCAT_INNER_(a, b) a##b
#define DF11_STATUS_TEST_CONCAT_(a, b) DF11_STATUS_TEST_CONCAT_INNER_(a, b)

#define DF11_ASSERT_OK(expr) ASSERT_THAT((expr), ::df11::testing::IsOk())
#define DF11_EXPECT_OK(expr) EXPECT_THAT((expr), ::df11::testing::IsOk())

#define DF11_ASSERT_OK_AND_ASSIGN(lhs, rexpr) \
  DF11_ASSERT_OK_AND_ASSIGN_IMPL_(DF11_STATUS_TEST_CONCAT_(df11_test_statusor_, __LINE__), lhs, rexpr)
#define DF11_ASSERT_OK_AND_ASSIGN_IMPL_(statusor, lhs, rexpr) \
  auto statusor = (rexpr);                                    \
  ASSERT_TRUE(statusor.ok()) << statusor.status();            \
  lhs = std::move(statusor).value()

#endif  // DF11_TESTS_TESTING_STATUS_MATCHERS_H_
