// Test helper: two checkpoint directories hold the same tensors (names, dtypes, shapes, bytes).
#ifndef DF11_TESTS_TESTING_CHECKPOINT_COMPARE_H_
#define DF11_TESTS_TESTING_CHECKPOINT_COMPARE_H_

#include <cstring>
#include <filesystem>

#include "codec/safetensors.h"
#include "gtest/gtest.h"
#include "tests/testing/status_matchers.h"

namespace df11::testing {

inline void ExpectSameCheckpoint(const std::filesystem::path& a_dir,
                                 const std::filesystem::path& b_dir) {
  DF11_ASSERT_OK_AND_ASSIGN(codec::Checkpoint a, codec::Checkpoint::Open(a_dir.string()));
  DF11_ASSERT_OK_AND_ASSIGN(codec::Checkpoint b, codec::Checkpoint::Open(b_dir.string()));
  ASSERT_EQ(a.TensorNames(), b.TensorNames());
  for (const std::string& name : a.TensorNames()) {
    SCOPED_TRACE(name);
    const codec::TensorView* x = a.Find(name);
    const codec::TensorView* y = b.Find(name);
    EXPECT_EQ(x->dtype, y->dtype);
    EXPECT_EQ(x->shape, y->shape);
    ASSERT_EQ(x->data.size(), y->data.size());
    EXPECT_EQ(std::memcmp(x->data.data(), y->data.data(), x->data.size()), 0);
  }
}

}  // namespace df11::testing

#endif  // DF11_TESTS_TESTING_CHECKPOINT_COMPARE_H_
